"""Folding an imported history into its chat's memory: the estimate shown before anything is written, then
consolidation in bounded chunks while the messages land, with a progress bar.

The rounds go through the same path as a running Tusk's (bot/app.py: the LLM client, its usage ledger and
spend limits, the consolidator, the window learned from the server), recorded under the chat with the
purpose "import". Each chat is folded whenever it holds more than `FOLD_AT` chunks of unconsolidated
messages (so memory stays bounded whatever the export's size) and, once its messages are all written,
down to nothing: MEMORY.md and HISTORY.md then hold the whole history, as after `/new`. A round moves the
session's pointer only once its summary is written (memory/consolidate.py), so an import stopped by
Ctrl-C, `kill -9` or a spend limit goes on from there when run again.

The estimate is what a user needs to say yes: rounds, input and output tokens (each message's transcript
line counted with the tokenizer, its date and speaker included, and per round the instructions, the memory
and its rewrite, as memory/round_request.py sizes a round) and their price (bot/usage/prices.py:
litellm's table, else the owner's TUSK_MODELS price, else unknown).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.config import Settings
from bot.events import ChatKey
from bot.usage import meter as usage
from memory.consolidate import ConsolidationFailed
from memory.round_request import line_costs

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

FOLD_AT = 4  # chunks of unconsolidated messages a chat may hold while its import is written
ENTRY_TOKENS = 300  # a round's history entry, beside the memory it rewrites


@dataclass(frozen=True)
class Estimate:
    rounds: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    model: str

    def line(self) -> str:
        cost = (f"about ${self.cost_usd:,.2f}" if self.cost_usd is not None
                else "cost unknown (no price for this model: give one in TUSK_MODELS)")
        return (f"Memory: about {self.rounds:,} consolidation round(s) with {self.model}, ~{self.input_tokens:,} "
                f"input and ~{self.output_tokens:,} output tokens, {cost}")


class Folder:
    """The running Tusk's model path, for one import: estimate, fold as messages land, close."""

    def __init__(self, settings: Settings) -> None:
        from bot.app import TuskApp  # every part of Tusk: only once an import is really going to run

        self.app = TuskApp(settings)
        self.chats = self.app.chats  # the messages go through the store's seam (writer.py), as a turn's do
        self.settings = settings
        self.model = settings.consolidation_model or settings.model or ""
        self.folded = 0
        self._progress: tuple[Progress, TaskID] | None = None  # the bar and its "folded" task, while shown

    async def ready(self) -> None:
        """The store started (the database's pool open), litellm loaded and the model's window settled, as at
        a Tusk's start."""
        from bot import parts

        await parts.started(self.app.store)
        self.app.warmup.start()
        await self.app.warmup.ready()

    async def estimate(self, chats: dict[tuple[str, str], tuple[int, int]]) -> Estimate:
        """For {chat: (new messages, their transcript lines' tokens)}, and what the chats hold unconsolidated
        already (an import stopped before its folding was done)."""
        from bot.usage.prices import configured_prices, price

        consolidator = self.app.consolidator
        memory = consolidator.max_memory_tokens // 2  # on average, as it fills up
        window, room = consolidator.budget.window, consolidator.transcript_room("")
        overhead = window - room - consolidator.answer_tokens  # instructions, headings, tool schema
        room = max(1, room - memory)
        rounds = input_tokens = 0
        for key, (messages, tokens) in chats.items():
            waiting = (await self.chats.open(ChatKey(*key))).session.unconsolidated
            tokens += sum(line_costs(waiting, math.inf)) if waiting else 0
            n = max(1, math.ceil(tokens / room)) if messages or waiting else 0
            rounds += n
            input_tokens += tokens + n * (overhead + memory)
        output_tokens = rounds * (memory + ENTRY_TOKENS)
        cost, _ = price(self.model, input_tokens, output_tokens, 0, None, configured_prices(self.app.models))
        return Estimate(rounds, input_tokens, output_tokens, cost, self.model)

    async def fold(self, key: tuple[str, str], last: bool = False) -> None:
        """Fold the chat if it holds too much unconsolidated (or, `last`, all of it); raises ConsolidationFailed
        to stop."""
        consolidator = self.app.consolidator
        cap = consolidator.transcript_room("")  # a round's chunk, in the session's own counts at most
        chat = await self.chats.open(ChatKey(*key))
        if not last and chat.session.tokens <= FOLD_AT * cap:
            return
        with usage.scope(ChatKey(*key), None, "import", self.settings.timezone):
            folded = await consolidator.fold(chat, keep=0 if last else cap)
        self.folded += folded
        if self._progress is not None:
            self._progress[0].advance(self._progress[1], folded)

    @contextmanager
    def progress(self, total: int) -> Iterator[object]:
        """A progress bar on a terminal's stderr (messages read and folded); nothing when not a terminal."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       console=Console(stderr=True), disable=not sys.stderr.isatty(), transient=False)
        with bar:
            reading = bar.add_task("messages read  ", total=total)
            self._progress = (bar, bar.add_task("folded into memory", total=total))
            try:
                yield lambda n=1: bar.advance(reading, n)
            finally:
                self._progress = None

    async def aclose(self) -> None:
        await self.app.warmup.aclose()
        await self.app.llm.aclose()
        self.app.ledger.close()
        await self.app.store.close()


def stopped(exc: ConsolidationFailed) -> str:
    return (f"Memory: consolidation stopped ({exc}). The messages written so far are kept; "
            "run the same command again to go on where it stopped")
