"""kill -9 of a `tusk run` on PostgreSQL while chats talk: what was acknowledged is kept, once.

A real `tusk run` (its own process, the HTTP channel, litellm) on a database of a PostgreSQL started for the
run (tests/pg_server.py), its model the fake provider (tests/fakes/fake_llm.py) answering each message after
a short delay. --talkers chats each send numbered messages one after another over the HTTP API. After
--kill-after seconds the process is killed with SIGKILL (its whole process group) in the middle of that
traffic, and started again at once on the same database; the chats go on talking for --after seconds, then
Tusk is stopped and every chat is read back from the database.

On the HTTP API a message is acknowledged when its request is answered 200 with the reply: the turn has
been saved by then (the API is not journaled: a request cut off by the kill is an error its client sees,
and sends again if it wants). Counted:

    acknowledged   answered 200 (before the kill and after the restart)
    answered       acknowledged, and in the database once, with the reply that was sent right after it
    lost           acknowledged, and not in the database
    duplicated     a message in the database more than once
    cut off        sent and not answered (the kill): kept whole (the turn was saved before the kill, its
                   answer lost on the way), or not at all; never half (a message without its reply)

    python bench/store_kill.py [--talkers 20] [--kill-after 6] [--after 6] [--delay 0.05]
    (also part of python bench/store.py)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import socket
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@dataclass
class Tally:
    acked: dict[str, str] = field(default_factory=dict)  # message -> the reply acknowledged with it
    cut: list[str] = field(default_factory=list)  # sent, never answered
    after_restart: int = 0  # acknowledged by the restarted Tusk


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _up(client: aiohttp.ClientSession, url: str, timeout: float = 120) -> float:
    """Seconds until Tusk answers /healthz."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            async with client.get(f"{url}/healthz") as resp:
                if resp.status == 200:
                    return time.monotonic() - started
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)
    raise TimeoutError(f"Tusk did not come up at {url}")


async def _talk(client: aiohttp.ClientSession, url: str, chat: str, tally: Tally, stop: asyncio.Event,
                restarted: asyncio.Event) -> None:
    """One chat's messages, one after another, until `stop`; a message cut off waits for the restart."""
    n = 0
    while not stop.is_set():
        text = f"{chat} message {n}"
        n += 1
        try:
            async with client.post(f"{url}/v1/chats/{chat}/messages", json={"text": text}) as resp:
                body = await resp.json() if resp.status == 200 else None
        except (aiohttp.ClientError, asyncio.TimeoutError):
            body = None
        if body is not None and body.get("replies"):
            tally.acked[text] = body["replies"][-1]
            tally.after_restart += restarted.is_set()
            continue
        tally.cut.append(text)
        await restarted.wait()


async def _read_back(home: Path, url: str, chats: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Each chat's messages as the database keeps them: (role, text)."""
    from memory.keys import ChatKey
    from store import opened

    async with opened(home, url) as store:
        return {chat: [(m.role, m.content) for m in await store.chats.handle(ChatKey("http", chat)).messages()]
                for chat in chats}


def count(tally: Tally, kept: dict[str, list[tuple[str, str]]]) -> dict[str, int]:
    """The figures above, from what the clients were told and what the database keeps."""
    times: Counter[str] = Counter()
    reply_after: dict[str, str | None] = {}
    for messages in kept.values():
        for i, (role, text) in enumerate(messages):
            if role == "user":
                times[text] += 1
                following = messages[i + 1] if i + 1 < len(messages) else None
                reply_after[text] = following[1] if following and following[0] == "assistant" else None
    answered = sum(times[t] == 1 and reply_after[t] == reply for t, reply in tally.acked.items())
    cut_whole = sum(times[t] == 1 and reply_after[t] is not None for t in tally.cut)
    cut_half = sum(times[t] >= 1 and reply_after[t] is None for t in tally.cut)
    return {"acknowledged": len(tally.acked), "answered": answered,
            "lost": sum(times[t] == 0 for t in tally.acked), "duplicated": sum(n > 1 for n in times.values()),
            "cut off": len(tally.cut), "cut off, kept whole": cut_whole, "cut off, kept half": cut_half,
            "after the restart": tally.after_restart}


async def kill_nine(database_url: str, talkers: int = 20, kill_after: float = 6.0, after: float = 6.0,
                    delay: float = 0.05) -> dict[str, float]:
    """The run above; prints its figures and returns them."""
    from tests import procs
    from tests.fakes.fake_llm import FakeLLM, Reply

    def answer(body: dict) -> Reply:
        return Reply(text=f"answer {secrets.token_hex(4)}", delay=delay)  # each reply its own: matched by text

    chats = [f"talker{i}" for i in range(talkers)]
    tally, stop, restarted = Tally(), asyncio.Event(), asyncio.Event()
    token, port = secrets.token_urlsafe(32), _free_port()
    url = f"http://127.0.0.1:{port}"
    async with FakeLLM() as fake:
        fake.responder = answer
        with tempfile.TemporaryDirectory(prefix="tusk-kill-") as tmp:
            home = Path(tmp) / "home"
            env = procs.clean_env(TUSK_HOME=home, TUSK_MODEL="openai/fake-model", TUSK_API_BASE=fake.base_url,
                                  TUSK_API_KEY="sk-bench", TUSK_HTTP_PORT=port, TUSK_HTTP_TOKEN=token,
                                  TUSK_DATABASE_URL=database_url, TUSK_LLM_RETRIES=0, TUSK_DM_POLICY="open")
            headers = {"Authorization": f"Bearer {token}", "Origin": url}
            timeout = aiohttp.ClientTimeout(total=60)
            async with aiohttp.ClientSession(headers=headers, timeout=timeout) as client:
                proc = await procs.start_tusk("run", env=env, cwd=tmp, stdout=asyncio.subprocess.DEVNULL,
                                              stderr=asyncio.subprocess.DEVNULL)
                await _up(client, url)
                async with client.post(f"{url}/v1/chats/warm-up/messages", json={"text": "hello"}) as resp:
                    assert resp.status == 200, await resp.text()  # litellm loaded: the traffic meets a warm Tusk
                talking = [asyncio.create_task(_talk(client, url, chat, tally, stop, restarted)) for chat in chats]
                await asyncio.sleep(kill_after)
                before = len(tally.acked)
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
                proc = await procs.start_tusk("run", env=env, cwd=tmp, stdout=asyncio.subprocess.DEVNULL,
                                              stderr=asyncio.subprocess.DEVNULL)
                down = await _up(client, url)
                restarted.set()
                await asyncio.sleep(after)
                stop.set()
                await asyncio.gather(*talking)
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.wait(), timeout=60)
            figures = count(tally, await _read_back(home, database_url, chats))
    figures |= {"acknowledged before the kill": before, "restart (s)": round(down, 2)}
    print(f"\nkill -9 of `tusk run` on PostgreSQL, {talkers} chats talking over the HTTP API "
          f"(the model answering in {delay * 1000:.0f} ms; killed after {kill_after:g} s, then {after:g} s more):")
    print(f"  acknowledged {figures['acknowledged']} ({before} before the kill, {figures['after the restart']} "
          f"after the restart); answered, once, with the reply sent: {figures['answered']}")
    print(f"  lost: {figures['lost']}; duplicated: {figures['duplicated']}")
    print(f"  cut off by the kill: {figures['cut off']} (kept whole: {figures['cut off, kept whole']}, "
          f"half: {figures['cut off, kept half']}, not at all: "
          f"{figures['cut off'] - figures['cut off, kept whole'] - figures['cut off, kept half']})")
    print(f"  the restarted Tusk answered /healthz {down:.1f} s after it was started again")
    procs.cleanup()
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--talkers", type=int, default=20)
    parser.add_argument("--kill-after", type=float, default=6.0)
    parser.add_argument("--after", type=float, default=6.0)
    parser.add_argument("--delay", type=float, default=0.05)
    args = parser.parse_args()
    from tests.pg_server import PgServer

    with PgServer() as server:
        await kill_nine(server.new_database(), args.talkers, args.kill_after, args.after, args.delay)


if __name__ == "__main__":
    asyncio.run(main())
