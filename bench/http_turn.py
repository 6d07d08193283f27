"""A whole turn over the HTTP API against a provider that answers at once: Tusk's real app (TuskApp, the
HTTP channel, litellm) with tests/fakes/fake_llm.py on 127.0.0.1, its default TUSK_STREAM=auto.

Two ways of asking, alternated turn by turn in one run: a plain request (nobody watches the reply being
written: one plain model request) and `stream: true` (Server-Sent Events: the model streams). Prints
the median turn of each and how many streamed requests the provider saw for the plain turns (0).

    python bench/http_turn.py [--turns 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


async def http_turns(turns: int) -> dict[str, float]:
    from bot.config import load_settings
    from tests.conftest import running
    from tests.fakes.fake_llm import FakeLLM, Reply

    reply = " ".join(f"word{i}" for i in range(60)) + "."
    async with FakeLLM() as fake:
        fake.responder = lambda body: Reply(text=reply)
        with tempfile.TemporaryDirectory() as home:
            settings = load_settings(TUSK_HOME=home, TUSK_MODEL="openai/fake-model", TUSK_API_BASE=fake.base_url,
                                     TUSK_API_KEY="sk-bench", TUSK_HTTP_PORT="0", TUSK_DM_POLICY="open")
            async with running(settings) as tusk:
                times: dict[str, list[float]] = {"plain": [], "streamed": []}
                plain_streams = 0
                for i in range(turns + 10):  # the first 10 warm up
                    for way, say in (("plain", tusk.say), ("streamed", tusk.say_streamed)):
                        before = fake.streams
                        started = time.perf_counter()
                        await say(f"bench-{way}", f"turn {i}")
                        if i >= 10:
                            times[way].append(time.perf_counter() - started)
                        plain_streams += fake.streams - before if way == "plain" else 0
    return {"plain": statistics.median(times["plain"]), "streamed": statistics.median(times["streamed"]),
            "plain_streams": plain_streams}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    figures = asyncio.run(http_turns(args.turns))
    print(f"HTTP turn, provider answering at once, median of {args.turns}:")
    print(f"  plain request (nobody watches)   {figures['plain'] * 1000:7.1f} ms")
    print(f"  stream: true (SSE)               {figures['streamed'] * 1000:7.1f} ms")
    print(f"  streamed model requests made for the plain turns: {figures['plain_streams']}")


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
