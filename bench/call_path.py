"""The cost of one chat request's call path (used by bench/turn_overhead.py; runnable alone).

Against a real OpenAI-compatible server on 127.0.0.1 that answers at once (tests/fakes/fake_llm.py):
the same request (Tusk's system prompt and tool schemas, a short conversation) sent directly with
aiohttp, through `bot.llm.LLM.complete` with its own client on the OpenAI wire (bot/llm/direct.py, the
default) and through `LLM.complete` with litellm (TUSK_LLM_CLIENT=litellm), whole and streamed, litellm
with its defaults and with its documented logging switches off. Medians over `calls` requests after a
warm-up.

    python bench/call_path.py [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import aiohttp  # noqa: E402

from bot.context import ContextBuilder  # noqa: E402
from bot.events import ChatKey, InboundMessage  # noqa: E402
from bot.llm import LLM, LLMSettings, litellm, load_litellm  # noqa: E402
from bot.stream import Live  # noqa: E402
from bot.tools.box import BUILTIN_TOOLS, ToolBox  # noqa: E402
from memory.session import Message  # noqa: E402
from store import open_files  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, Reply  # noqa: E402

ANSWER = " ".join(f"word{i}" for i in range(60))
TUNED = {"turn_off_message_logging": True, "disable_streaming_logging": True}


async def request(home: Path) -> tuple[list[dict], list[dict]]:
    tools = ToolBox(BUILTIN_TOOLS)
    chat = await open_files(home).chats.open(ChatKey("bench", "c"))
    history = [Message("user" if i % 2 == 0 else "assistant", f"message {i} of an ordinary chat") for i in range(20)]
    msg = InboundMessage(ChatKey("bench", "c"), "how are you?", sender_id="u")
    return ContextBuilder(home, "Tusk", tools.schemas).build(chat, history, msg), tools.schemas


async def direct(http: aiohttp.ClientSession, url: str, body: dict) -> None:
    async with http.post(url, json=body, headers={"Authorization": "Bearer sk-bench"}) as resp:
        if body.get("stream"):
            async for line in resp.content:
                if line.startswith(b"data: [DONE]"):
                    break
        else:
            await resp.json()


async def timed(calls: int, once) -> float:
    for _ in range(10):
        await once()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await once()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def call_path(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        messages, tools = await request(Path(tmp))
    async with FakeLLM() as fake, aiohttp.ClientSession() as http:
        fake.responder = lambda body: Reply(text=ANSWER)
        llm = LLM(LLMSettings(model="openai/fake-model", api_base=fake.base_url, api_key="sk-bench", retries=0,
                              direct=False))
        own = LLM(LLMSettings(model="openai/fake-model", api_base=fake.base_url, api_key="sk-bench", retries=0))
        load_litellm().result()  # loaded before the measures (the litellm path needs it)
        url = f"{fake.base_url}/chat/completions"
        rows = []
        for stream in (False, True):
            body = {"model": "fake-model", "messages": messages, "tools": tools,
                    **({"stream": True, "stream_options": {"include_usage": True}} if stream else {})}
            plain = await timed(calls, lambda: direct(http, url, body))
            mine = await timed(calls, lambda: own.complete(messages, tools, live=Live(None) if stream else None))
            through = []
            for switches in ({}, TUNED):
                lib = litellm()
                before = {k: getattr(lib, k) for k in switches}
                for k, v in switches.items():
                    setattr(lib, k, v)
                through.append(await timed(calls, lambda: llm.complete(messages, tools,
                                                                       live=Live(None) if stream else None)))
                for k, v in before.items():
                    setattr(lib, k, v)
            rows.append(("streamed" if stream else "whole", plain, mine, *through))
        await llm.aclose()
        await own.aclose()
    print(f"one chat request ({len(json.dumps(messages)) // 1024} KiB prompt, {len(tools)} tools), median of {calls}:")
    print(f"{'reply':>9} {'raw aiohttp':>12} {'Tusk direct':>12} {'share':>8} {'via litellm':>12} {'share':>8} "
          f"{'logging off':>12}")
    for kind, plain, mine, default, tuned in rows:
        print(f"{kind:>9} {plain:>9.2f} ms {mine:>9.2f} ms {mine - plain:>5.2f} ms {default:>9.2f} ms "
              f"{default - plain:>5.2f} ms {tuned:>9.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    asyncio.run(call_path(parser.parse_args().calls))
