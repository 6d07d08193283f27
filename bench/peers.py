"""Tusk's own cost per turn beside nanobot's: the same turn through each, in one run, side by side.

One loopback model (tests/fakes/fake_llm.py's server, answering at once) serves both. Each framework runs
in a process of its own, so its CPU time is its own (the model server's is the parent's):

- Tusk: the real TuskApp (litellm loaded, the warm-up done), a message published on its bus for one chat
  and the reply delivered (session saved, usage recorded, the post-turn hook run); once with its own client
  on the OpenAI wire (the default) and once through litellm (TUSK_LLM_CLIENT=litellm);
- nanobot-ai 0.3.5 (installed in a virtualenv of its own: `--nanobot-python`), its SDK's `Nanobot.run` for
  one session, as its gateway calls it per message.

Both get the same messages; each turn's wall and CPU time is taken after a warm-up, and the two
alternate in batches so a busy machine weighs on both alike. The framework's cost per turn is the turn
less the model server's own time for its request (measured by the server). Prints the medians and the
ratio Tusk / nanobot.

    python3.11 -m venv /tmp/nb && /tmp/nb/bin/pip install nanobot-ai==0.3.5
    python bench/peers.py [--turns 200] [--batches 3] [--nanobot-python /tmp/nb/bin/python]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPLY = "Fine, thanks: a short answer, as a chat reply is."


def message(i: int) -> str:
    return f"Message {i}: how are you today? Tell me something short about the weather."


async def tusk_side(base: str, turns: int, warm: int) -> dict[str, list[float]]:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from bot.app import TuskApp
    from bot.config import load_settings
    from bot.events import ChatKey, InboundMessage

    class Sink:
        name = "bench"

        async def send(self, msg) -> None:
            pass

    home = Path(tempfile.mkdtemp(prefix="tusk-peers-"))
    os.environ["HOME"] = str(home)
    app = TuskApp(load_settings(TUSK_HOME=str(home / "data"), TUSK_MODEL="openai/fake-model", TUSK_API_BASE=base,
                                TUSK_API_KEY="sk-bench", TUSK_LOG_LEVEL="warning",
                                TUSK_LLM_CLIENT=os.environ.get("PEERS_CLIENT", "direct")))
    app.bus.register(Sink())
    await app.ready()
    wall, cpu = [], []
    for i in range(warm + turns):
        w, c = time.perf_counter(), time.process_time()
        await app.bus.publish(InboundMessage(ChatKey("bench", "c"), message(i), sender_id="u"))
        if i >= warm:
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
    await app.agent.aclose()
    await app.llm.aclose()
    return {"wall": wall, "cpu": cpu}


async def nanobot_side(base: str, turns: int, warm: int) -> dict[str, list[float]]:
    from nanobot import Nanobot

    home = Path(tempfile.mkdtemp(prefix="nanobot-peers-"))
    os.environ["HOME"] = str(home)
    (home / "workspace").mkdir()
    config = home / "config.json"
    config.write_text(json.dumps({
        "agents": {"defaults": {"workspace": str(home / "workspace"), "model": "fake-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "sk-bench", "apiBase": base}}}))
    bot = Nanobot.from_config(config)
    wall, cpu = [], []
    try:
        for i in range(warm + turns):
            w, c = time.perf_counter(), time.process_time()
            await bot.run(message(i), session_key="cli:bench", channel="cli", chat_id="bench", sender_id="u")
            if i >= warm:
                wall.append(time.perf_counter() - w)
                cpu.append(time.process_time() - c)
    finally:
        await bot.aclose()
    return {"wall": wall, "cpu": cpu}


def child(python: str, side: str, base: str, turns: int, warm: int, client: str = "direct") -> dict[str, list[float]]:
    out = subprocess.run([python, __file__, "--side", side, "--base", base, "--turns", str(turns),
                          "--warm", str(warm)], capture_output=True, text=True, timeout=1800, cwd=tempfile.gettempdir(),
                         env={**os.environ, "PEERS_CLIENT": client})
    if out.returncode != 0:
        raise SystemExit(f"the {side} side failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


async def main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fakes.fake_llm import FakeLLM, Reply

    sides = (("Tusk", sys.executable, "tusk", "direct"), ("Tusk+litellm", sys.executable, "tusk", "litellm"),
             ("nanobot", args.nanobot_python, "nanobot", ""))
    results = {name: {"wall": [], "cpu": [], "model": []} for name, *_ in sides}
    async with FakeLLM() as fake:
        fake.responder = lambda body: Reply(text=REPLY)
        for _ in range(args.batches):
            for name, python, side, client in sides:
                first = len(fake.requests)
                got = await asyncio.to_thread(child, python, side, fake.base_url, args.turns, args.warm, client)
                served = [fake.finished[i] - fake.arrivals[i] for i in range(first, len(fake.requests))
                          if i in fake.finished]
                results[name]["wall"] += got["wall"]
                results[name]["cpu"] += got["cpu"]
                results[name]["model"] += served[len(served) - len(got["wall"]):]  # the measured turns' requests
    rows = {}
    print(f"one turn, {args.turns} x {args.batches} per framework after {args.warm} warm-up turns, the model answering "
          "at once on 127.0.0.1 (medians):")
    for name, r in results.items():
        model = statistics.median(r["model"]) if r["model"] else 0.0
        rows[name] = (statistics.median(r["wall"]) - model, statistics.median(r["cpu"]))
        print(f"  {name:<12} turn {statistics.median(r['wall']) * 1000:7.2f} ms   model server {model * 1000:5.2f} ms   "
              f"framework {rows[name][0] * 1000:7.2f} ms   CPU {rows[name][1] * 1000:7.2f} ms   "
              f"requests per turn {len(r['model']) / max(1, len(r['wall'])):.1f}")
    for name in ("Tusk", "Tusk+litellm"):
        print(f"{name} / nanobot: framework time {rows[name][0] / rows['nanobot'][0]:.2f}, "
              f"CPU {rows[name][1] / rows['nanobot'][1]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--nanobot-python", default="/tmp/nb/bin/python")
    parser.add_argument("--side", choices=["tusk", "nanobot"], help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        run = tusk_side if args.side == "tusk" else nanobot_side
        print(json.dumps(asyncio.run(run(args.base, args.turns, args.warm))))
    else:
        asyncio.run(main(args))
