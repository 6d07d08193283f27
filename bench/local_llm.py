"""A long chat against a real local llama.cpp server, Tusk told nothing but the model name and base URL.

Uses ../shared/tools/local-llm/serve (llama-cpp-python's OpenAI-compatible server with a tiny model,
one request at a time): if nothing answers on the port, the script starts it (the first start builds
llama.cpp, ~8 minutes). Runs `tusk`'s real app in-process (TuskApp, the HTTP channel) with
TUSK_MODEL=openai/tiny and TUSK_API_BASE only, then a long chat of substantial messages, and prints:
turns answered, consolidations that wrote MEMORY.md (and raw fallbacks), the window Tusk ended on
and its source, reply latency p50/p95, the longest generation against the reply reserve. The reply
times are measured here only: tests/test_local_llm_real.py runs the same chat and asserts what holds
on any machine (every turn answered, the window learned, MEMORY.md written), never how fast.

With `--stream` each turn is asked for as Server-Sent Events (someone watches: the model streams, and
a prompt over the window fails inside the stream, asked again whole); without it, plainly.

Replies before housekeeping (issue 44): `--slots 1` sets TUSK_MODEL_SLOTS=1 (this server answers one
request at a time and does not say so), `--no-consolidation` runs the same chat with no consolidation
round at all (prompts fitted by leaving the oldest turns out), `--pause S` waits S seconds between a reply
and the next message (a person reading and typing; 0: back to back), `--compare` runs the chat with
consolidation and without, one after the other, and prints both. Reply latency p50 / p95 / max, the
rounds cut off, and the process's CPU time are printed.

    python bench/local_llm.py [--turns 40] [--ctx 2048] [--stream] [--ramble] [--port 18790]
                              [--slots 1] [--pause 2] [--no-consolidation | --compare]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SERVE = ROOT.parent / "shared" / "tools" / "local-llm" / "serve"


def reachable(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def start_server(port: int, ctx: int, ramble: bool) -> subprocess.Popen | None:
    base = f"http://127.0.0.1:{port}/v1"
    if reachable(base):
        return None
    args = [str(SERVE), "--port", str(port), "--ctx", str(ctx), *(["--ramble"] if ramble else [])]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 900
    while not reachable(base):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the local server did not start ({' '.join(args)})")
        time.sleep(1)
    return proc


async def run(base: str, turns: int, streamed: bool = False, slots: int | None = None, pause: float = 0.0,
              consolidation: bool = True) -> dict[str, object]:
    from bot.config import load_settings
    from memory import files as memfiles
    from tests.conftest import running
    from tests.test_local_llm_real import message  # the same substantial messages as the real-server tests

    home = Path(tempfile.mkdtemp(prefix="tusk-local-"))
    settings = load_settings(TUSK_HOME=str(home), TUSK_MODEL="openai/tiny", TUSK_API_BASE=base,
                             TUSK_API_KEY="sk-local", TUSK_HTTP_PORT="0", TUSK_LLM_TIMEOUT="120",
                             **({"TUSK_MODEL_SLOTS": str(slots)} if slots else {}))
    latencies, generations, failures = [], [], 0
    cpu = time.process_time()
    async with running(settings) as tusk:
        if not consolidation:  # no round at all: each prompt fitted by leaving its oldest turns out
            async def none(*args, **kwargs) -> int:
                return 0
            tusk.consolidator.run = none
        llm_complete = tusk.llm.complete

        async def recorded(messages, tools=None, **kw):
            reply = await llm_complete(messages, tools, **kw)
            if not kw.get("tool_choice"):
                generations.append(reply.completion_tokens)
            return reply
        tusk.llm.complete = recorded
        for i in range(turns):
            started = time.monotonic()
            (reply,) = await (tusk.say_streamed if streamed else tusk.say)("bench", message(i))
            latencies.append(time.monotonic() - started)
            failures += reply.startswith(("The model", "I can't", "Something went wrong", "This conversation"))
            if pause:
                await asyncio.sleep(pause)
        await tusk.agent.aclose()
        files = tusk.store.get("http", "bench").files
        entries = memfiles.history_entries(files)
        budget = tusk.consolidator.budget
        raw = sum("\n[raw] " in e for e in entries)  # each entry starts with its dated heading
        return {"turns": turns, "answered": turns - failures, "consolidations written by the model": len(entries) - raw,
                "raw fallbacks": raw,
                "MEMORY.md tokens": len(memfiles.read_memory(files).split()),
                "window": f"{budget.window} ({budget.source})", "reserve": budget.reserve,
                "reply p50 s": round(statistics.median(latencies), 2),
                "reply p95 s": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 2),
                "reply max s": round(max(latencies), 2),
                "rounds cut off": tusk.llm.slots.cuts,
                "Tusk CPU s": round(time.process_time() - cpu, 1),
                "longest generation": max(generations or [0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--ramble", action="store_true", help="the model that never stops talking")
    parser.add_argument("--stream", action="store_true", help="ask for each reply as Server-Sent Events")
    parser.add_argument("--slots", type=int, default=None, help="TUSK_MODEL_SLOTS")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between a reply and the next message")
    parser.add_argument("--no-consolidation", action="store_true", help="no consolidation round at all")
    parser.add_argument("--compare", action="store_true", help="with consolidation, then without")
    args = parser.parse_args()
    port = args.port or (18792 if args.ramble else 18790)
    proc = start_server(port, args.ctx, args.ramble)
    kinds = [True, False] if args.compare else [not args.no_consolidation]
    try:
        results = [(kind, asyncio.run(run(f"http://127.0.0.1:{port}/v1", args.turns, args.stream, args.slots,
                                          args.pause, kind))) for kind in kinds]
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    for kind, figures in results:
        print(f"local llama.cpp server, window {args.ctx}{' (ramble)' if args.ramble else ''}, "
              f"{'streamed (SSE)' if args.stream else 'plain requests'}, slots {args.slots or 'unset'}, "
              f"pause {args.pause:g} s, consolidation {'on' if kind else 'off'}:")
        for key, value in figures.items():
            print(f"  {key:<36} {value}")


if __name__ == "__main__":
    main()
