"""The OpenAI-compatible endpoint's cost (channels/http/openai_api.py) and /metrics' render time (bot/metrics.py).

    overhead    a whole turn over /v1/chat/completions against the same turn over the native
                /v1/chats/<name>/messages, alternated turn by turn in one run (Tusk's real app, litellm,
                tests/fakes/fake_llm.py answering at once); medians and their ratio. Each OpenAI request
                resends the whole conversation so far, as chat front ends do (reconciled, never stored twice)
    first chunk time to the first streamed chunk of `stream: true` (the model streams 60 words, 5 ms apart)
    metrics     GET /metrics' render time with `chats` chats' worth of traffic counted: labels are per channel
                and model, never per chat, so it is the registry's size that is measured, not the chats

    python bench/openai_api.py [--turns 200] [--chats 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


async def run(turns: int, chats: int) -> dict[str, float]:
    import aiohttp

    from bot import metrics
    from bot.config import load_settings
    from bot.logs import TurnStats
    from tests.conftest import running
    from tests.fakes.fake_llm import FakeLLM, Reply

    reply = " ".join(f"word{i}" for i in range(60)) + "."
    async with FakeLLM() as fake:
        fake.responder = lambda body: Reply(text=reply, token_delay=0.005 if body.get("stream") else 0.0)
        with tempfile.TemporaryDirectory() as home:
            settings = load_settings(TUSK_HOME=home, TUSK_MODEL="openai/fake-model", TUSK_API_BASE=fake.base_url,
                                     TUSK_API_KEY="sk-bench", TUSK_HTTP_PORT="0", TUSK_DM_POLICY="open")
            async with running(settings) as tusk:
                url = f"{tusk.url}/v1/chat/completions"
                head = {"X-Tusk-Chat": "bench-openai"}
                history: list[dict[str, str]] = []
                native: list[float] = []
                openai: list[float] = []
                for i in range(turns + 10):  # the first 10 warm up
                    started = time.perf_counter()
                    await tusk.say("bench-native", f"turn {i}")
                    took_native = time.perf_counter() - started
                    history.append({"role": "user", "content": f"turn {i}"})
                    started = time.perf_counter()
                    async with tusk.client.post(url, headers=head, json={"model": "openai/fake-model",
                                                                         "messages": history}) as resp:
                        body = await resp.json()
                    took_openai = time.perf_counter() - started
                    history.append({"role": "assistant", "content": body["choices"][0]["message"]["content"]})
                    if i >= 10:
                        native.append(took_native)
                        openai.append(took_openai)
                firsts = []
                for i in range(20):
                    started = time.perf_counter()
                    async with tusk.client.post(url, headers={"X-Tusk-Chat": "bench-stream"}, json={
                            "model": "openai/fake-model", "stream": True,
                            "messages": [{"role": "user", "content": f"stream {i}"}]}) as resp:
                        async for raw in resp.content:
                            if raw.startswith(b"data: {"):
                                firsts.append(time.perf_counter() - started)
                                break
                        await resp.read()
                for i in range(chats):  # every chat's turn and model call, counted as the hooks count them
                    metrics.turn_done("telegram" if i % 2 else "discord", TurnStats())
                    metrics.llm_call("reply", "openai/fake-model", 1200, 150, 0.0003, 0.9)
                renders = []
                async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {tusk.token}"}) as plain:
                    for _ in range(50):
                        started = time.perf_counter()
                        async with plain.get(f"{tusk.url}/metrics") as resp:
                            size = len(await resp.read())
                        renders.append(time.perf_counter() - started)
    return {"native": statistics.median(native), "openai": statistics.median(openai),
            "first": statistics.median(firsts), "render": statistics.median(renders), "size": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--chats", type=int, default=10_000)
    args = parser.parse_args()
    r = asyncio.run(run(args.turns, args.chats))
    print(f"turn, native API:        {r['native'] * 1000:.1f} ms (median of {args.turns})")
    print(f"turn, OpenAI endpoint:   {r['openai'] * 1000:.1f} ms (ratio {r['openai'] / r['native']:.2f})")
    print(f"first streamed chunk:    {r['first'] * 1000:.1f} ms (median of 20)")
    print(f"/metrics, {args.chats:,} chats: {r['render'] * 1000:.2f} ms to render and fetch ({r['size']:,} bytes)")


if __name__ == "__main__":
    main()
