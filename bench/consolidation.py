"""Consolidation on a long chat: a 1,000-turn scripted conversation at an 8k window.

Runs the real agent, budget guard and consolidator; the LLM is in-process (chat replies
of ~60 words, consolidation answers save_memory with a memory that grows a line per
round, capped), so the figures are Tusk's own: how many consolidation calls, how many
tokens they send, the peak prompt size against the window, and framework time per turn.

    python bench/consolidation.py [--turns 1000] [--window 8192]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from store import open_files  # noqa: E402
from memory.tokens import count_message, count_text  # noqa: E402

WORDS = " ".join(f"w{i}" for i in range(60))


class ScriptedLLM:
    def __init__(self, window: int) -> None:
        self.profile = ModelProfile("scripted", None, configured_window=window)  # what the agent budgets by
        self.peak_prompt = 0
        self.chat_calls = 0
        self.consolidations = 0
        self.consolidation_tokens = 0
        self.memory_lines: list[str] = []

    async def complete(self, messages, tools=None, **kw):
        self.chat_calls += 1
        size = sum(map(count_message, messages)) + (count_text(json.dumps(tools)) if tools else 0)
        self.peak_prompt = max(self.peak_prompt, size)
        return LLMReply(content=f"reply {WORDS}", tool_calls=(), model="scripted")

    async def consolidate(self, messages, tools, max_tokens=None):
        self.consolidations += 1
        self.consolidation_tokens += count_text(json.dumps(messages))
        self.memory_lines = (self.memory_lines + [f"- fact number {self.consolidations}"])[-40:]
        return {"history_entry": f"Round {self.consolidations}.", "memory_update": "\n".join(self.memory_lines)}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--window", type=int, default=8192)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        llm = ScriptedLLM(args.window)
        chats = open_files(home).chats
        tools = ToolBox(BUILTIN_TOOLS)
        budget = llm.profile.budget
        consolidator = Consolidator(chats, llm.consolidate, lambda: llm.profile.budget, lambda: llm.profile.memory_cap)
        bus = MessageBus(lambda m: agent.handle(m))
        agent = ChatAgent(AgentSettings(model="scripted"), chats, llm, tools,
                          ContextBuilder(home, "Tusk", tools.schemas), bus.send, consolidator=consolidator)

        class Sink:
            name = "bench"

            async def send(self, msg):
                pass

        bus.register(Sink())
        key = ChatKey("bench", "long")
        times = []
        for i in range(args.turns):
            start = time.perf_counter()
            await bus.publish(InboundMessage(key, f"turn {i}: {WORDS}", sender_id="u"))
            await agent.aclose()  # include the post-turn hook in the figure
            times.append(time.perf_counter() - start)
        session = (await chats.open(key)).session
    print(f"turns: {args.turns}, window: {args.window:,} (budget {budget.limit:,}, target {budget.target:,})")
    print(f"consolidation calls: {llm.consolidations} ({llm.consolidations / args.turns:.3f} per turn)")
    print(f"tokens sent to consolidation: {llm.consolidation_tokens:,} "
          f"({llm.consolidation_tokens / max(1, llm.consolidations):,.0f} per call)")
    print(f"peak chat prompt: {llm.peak_prompt:,} tokens, estimated as the budget does "
          f"({llm.peak_prompt / budget.limit:.0%} of the budget, {llm.peak_prompt / args.window:.0%} of the window)")
    print(f"messages in file: {session.total:,}, past the pointer: {len(session.unconsolidated)}")
    first, last = statistics.median(times[:100]) * 1000, statistics.median(times[-100:]) * 1000
    print(f"framework time per turn (median, incl. consolidation bookkeeping): first 100 turns {first:.2f} ms, "
          f"last 100 turns {last:.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
