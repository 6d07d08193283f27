"""Several Tusk processes on one PostgreSQL (bot/cluster/), on this machine: an ingress and 1, 2 or 3 workers
started as users start them (`tusk run --role ...`), a fake model answering in --delay seconds
(tests/fakes/fake_llm.py), --chats chats talking at once over the HTTP API, each message sent with an
Idempotency-Key and sent again (same key) until answered.

1. turns/s and reply p50/p95 with 1, 2 and 3 workers;
2. with 3 workers, one killed (SIGKILL) after a third of the messages: turns run again (model calls beyond
   one per message), duplicates (a message stored twice), lost (not answered within LOST seconds: the goal
   is 0), and the time from the kill to the answer of the last turn it held;
3. with 3 workers, the database stopped as if it crashed after a third of the messages and started again
   DOWN seconds later: the same counts, the 503s while it was down, and the time from its start to the
   answer of the last message asked before it stopped.

    python bench/cluster.py [--chats 20] [--messages 5] [--delay 0.3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.tusk_process import clean_env  # noqa: E402

TOKEN = re.compile(r"\b(c\d+m\d+)\b")
LOST = 180.0  # seconds after which a message not answered counts as lost
DOWN = 3.0  # seconds the database is down


async def start(role: str, home: Path, url: str, llm: str) -> tuple[asyncio.subprocess.Process, str]:
    home.mkdir(parents=True)
    env = clean_env(str(home), TUSK_MODEL="openai/fake-model", TUSK_API_BASE=llm, TUSK_API_KEY="sk-bench",
                    TUSK_HTTP_PORT="0", TUSK_DATABASE_URL=url, TUSK_HTTP_TOKEN="bench-token")
    out = home / "out"
    with open(out, "wb") as stdout, open(home / "log", "wb") as stderr:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.ops.cli", "run", "--role", role,
                                                    env=env, cwd=home, stdout=stdout, stderr=stderr,
                                                    start_new_session=True)
    deadline = time.monotonic() + 120
    while "Tusk is running" not in out.read_text():
        if proc.returncode is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{role} did not start: {(home / 'log').read_text()[-2000:]}")
        await asyncio.sleep(0.1)
    return proc, re.search(r"http://[^\s/#]+", out.read_text())[0]


async def ask(session, base: str, chat: str, text: str, refused: list[int]) -> tuple[float, float] | None:
    """(seconds to the answer, when it came), or None if not answered within LOST seconds: sent again with the
    same Idempotency-Key until answered (each 503 counted in `refused`)."""
    import aiohttp

    key, began = str(uuid.uuid4()), time.monotonic()
    while time.monotonic() - began < LOST:
        try:
            async with session.post(f"{base}/v1/chats/{chat}/messages", json={"text": text},
                                    headers={"Authorization": "Bearer bench-token", "Origin": base,
                                             "Idempotency-Key": key},
                                    timeout=aiohttp.ClientTimeout(total=LOST)) as resp:
                if resp.status == 200:
                    await resp.json()
                    return time.monotonic() - began, time.monotonic()
                refused[0] += resp.status == 503
        except (aiohttp.ClientError, TimeoutError):
            pass
        await asyncio.sleep(0.5)
    return None


def stored_twice(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        lines = [json.loads(line) for (line,) in conn.execute("SELECT line FROM session_lines WHERE seq IS NOT NULL")]
    tokens = [TOKEN.findall(m.get("content") or "")[-1:] for m in lines if m.get("role") == "user"]
    seen = [t[0] for t in tokens if t]
    return len(seen) - len(set(seen))


async def run(server, fake, args, workers: int, trouble: str = "") -> dict:
    """One round; `trouble`: "" (none), "kill" (a worker) or "restart" (the database), a third of the way."""
    import aiohttp

    from tests.conftest import migrated

    url = server.new_database()
    migrated(url)
    root = Path(tempfile.mkdtemp(prefix="tusk-cluster-bench-"))
    procs = [await start("ingress", root / "ingress", url, fake.base_url)]
    base = procs[0][1]
    procs += await asyncio.gather(*(start("worker", root / f"worker{n}", url, fake.base_url) for n in range(workers)))
    calls_before = len(fake.requests)
    latencies: list[tuple[float, float]] = []
    struck: list[float] = []  # when the trouble struck, and (restart) when the database was back
    refused, lost = [0], [0]
    total = args.chats * args.messages
    try:
        async with aiohttp.ClientSession() as session:
            async def chat(c: int) -> None:
                for m in range(args.messages):
                    answered = await ask(session, base, f"c{c}", f"message c{c}m{m}", refused)
                    if answered is None:
                        lost[0] += 1
                    else:
                        latencies.append(answered)

            async def strike() -> None:
                while len(latencies) < total // 3:
                    await asyncio.sleep(0.01)
                struck.append(time.monotonic())
                if trouble == "kill":
                    procs[1][0].send_signal(signal.SIGKILL)
                    return
                await asyncio.to_thread(server.stop, "immediate")
                await asyncio.sleep(DOWN)
                await asyncio.to_thread(server.start)
                struck.append(time.monotonic())

            began = time.monotonic()
            await asyncio.gather(*(chat(c) for c in range(args.chats)), *([strike()] if trouble else []))
            wall = time.monotonic() - began
        took = sorted(t for t, _ in latencies)
        figures = {"turns/s": total / wall, "p50": statistics.median(took), "p95": took[int(len(took) * 0.95) - 1],
                   "model calls beyond one per message": len(fake.requests) - calls_before - len(latencies),
                   "stored twice": stored_twice(url), "lost": lost[0], "503": refused[0]}
        if struck:  # the turns under way when it struck were answered last among those asked before it
            held = [at for t, at in latencies if at - t < struck[0] < at]
            figures["to the last turn held"] = max(held) - struck[-1] if held else 0.0
        return figures
    finally:
        server.start()  # (running unless the round failed while it was down)
        for proc, _ in procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGKILL)
                await proc.wait()


async def main(args) -> None:
    from tests.fakes.fake_llm import FakeLLM, Reply, last_user_text
    from tests.pg_server import PgServer

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with PgServer() as server:
        async with FakeLLM() as fake:
            fake.responder = lambda body: Reply(text=f"ok {TOKEN.findall(last_user_text(body))[-1:]}",
                                                delay=args.delay)
            print(f"{args.chats} chats x {args.messages} messages, the model answering in {args.delay} s")
            for workers in (1, 2, 3):
                f = await run(server, fake, args, workers)
                print(f"{workers} worker(s): {f['turns/s']:.1f} turns/s, reply p50 {f['p50']:.2f} s, "
                      f"p95 {f['p95']:.2f} s, lost {f['lost']}, stored twice {f['stored twice']}")
            for trouble, what, since in (("kill", "one worker killed (-9)", "the kill"),
                                         ("restart", f"the database down {DOWN:.0f} s", "it was back")):
                f = await run(server, fake, args, 3, trouble)
                print(f"3 workers, {what} a third of the way: {f['turns/s']:.1f} turns/s, p95 {f['p95']:.2f} s, "
                      f"turns run again {f['model calls beyond one per message']}, stored twice "
                      f"{f['stored twice']}, lost {f['lost']}, 503s {f['503']}, from {since} to the last turn "
                      f"under way answered {f['to the last turn held']:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--messages", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.3)
    asyncio.run(main(parser.parse_args()))
