"""Framework time per turn, without the LLM: bus + load + prompt build + save + reply.

The LLM is replaced by an in-process object that answers at once, so the figure is
Tusk's own cost, including the budget check and the post-turn consolidation hook (the
chats stay under the 65,536-token budget, so no consolidation request is made). Chats hold 10, 1,000 and 10,000 messages of which only the last 50 are
past the consolidation pointer. Reports the warm turn (session cached, the common case)
and the cold first turn after a restart (the file is read once).

Then the cost of the call path: one chat request with Tusk's usual prompt and tools against
a real OpenAI-compatible server on 127.0.0.1 (tests/fakes/fake_llm.py, which answers at once),
sent directly over HTTP and through `LLM.complete` (litellm), whole and streamed (a 60-word
reply, a word per chunk), with litellm's defaults and with its documented logging switches off
(`turn_off_message_logging`, `disable_streaming_logging`). litellm's share = through litellm
minus direct.

    python bench/turn_overhead.py [--turns 300] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.agent import AgentSettings, ChatAgent  # noqa: E402
from bot.bus import MessageBus  # noqa: E402
from bot.context import ContextBuilder  # noqa: E402
from bot.events import ChatKey, InboundMessage  # noqa: E402
from bot.llm import LLMReply  # noqa: E402
from bot.tools.box import BUILTIN_TOOLS, ToolBox  # noqa: E402
from bot.consolidation import Consolidator  # noqa: E402
from bot.llm.profile import ModelProfile  # noqa: E402
from memory.consolidate import Budget  # noqa: E402
from memory.session import Message  # noqa: E402
from store import open_files  # noqa: E402
from bench.call_path import call_path  # noqa: E402


class InstantLLM:
    profile = ModelProfile("instant", None, configured_window=65_536)  # what the agent budgets by

    async def complete(self, messages, tools=None, **kw):
        return LLMReply(content="fine, thanks", tool_calls=(), model="instant")


class Sink:
    name = "bench"

    async def send(self, msg):
        pass


async def seed(home: Path, chat: str, n: int) -> None:
    chats = open_files(home).chats
    opened = await chats.open(ChatKey("bench", chat))
    text = "a message of ordinary length, about as long as people write in a chat " * 2
    await chats.append(opened, [Message("user" if i % 2 == 0 else "assistant", f"{i}: {text}") for i in range(n)])
    await chats.set_pointer(opened, n - 50)


async def measure(home: Path, chat: str, turns: int) -> tuple[float, float]:
    chats = open_files(home).chats
    tools = ToolBox(BUILTIN_TOOLS)
    bus = MessageBus(lambda m: agent.handle(m))
    consolidator = Consolidator(chats, InstantLLM().complete, lambda: Budget.for_window(65_536), lambda: 6_553)
    agent = ChatAgent(AgentSettings(model="instant"), chats, InstantLLM(), tools,
                      ContextBuilder(home, "Tusk", tools.schemas), bus.send, consolidator=consolidator)
    bus.register(Sink())
    key = ChatKey("bench", chat)
    start = time.perf_counter()
    await bus.publish(InboundMessage(key, "hello", sender_id="u"))
    cold = time.perf_counter() - start
    times = []
    for i in range(turns):
        start = time.perf_counter()
        await bus.publish(InboundMessage(key, f"how are you {i}", sender_id="u"))
        times.append(time.perf_counter() - start)
        opened = await chats.open(key)
        await chats.set_pointer(opened, opened.session.total - 50)  # keep 50 unconsolidated
    return cold, statistics.median(times)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        rows = []
        for n in (10, 1_000, 10_000):
            await seed(home, f"c{n}", n)
            cold, warm = await measure(home, f"c{n}", args.turns)
            rows.append((n, cold, warm))
    print(f"{'messages in file':>17} {'first turn (cold)':>18} {'turn (warm, median)':>20}")
    for n, cold, warm in rows:
        print(f"{n:>17,} {cold * 1000:>15.2f} ms {warm * 1000:>17.3f} ms")
    print(f"warm 10,000 / warm 10 = {rows[2][2] / rows[0][2]:.2f}x")
    print()
    await call_path(args.calls)


if __name__ == "__main__":
    asyncio.run(main())
