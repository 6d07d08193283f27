"""Consolidation: summarise a chat's oldest whole turns into HISTORY.md and MEMORY.md, then
move the session's pointer past them.

    trigger: prompt estimate > budget     target: prompt estimate <= budget / 2     (memory/budget.py)
    a round: choose_chunk -> the model asked -> result_of (or raw_result) -> apply_round
             (pure steps and the one write: memory/round_step.py; the answer read: memory/round_answer.py)

A chunk always ends just before a user message, so no turn is split, and is small enough for the
whole request (instructions, MEMORY.md, the chunk's transcript, the tool schema and the answer's
room) to fit the window, counted with the tokenizer as memory/round_request.py builds it. Each round
is one LLM request offering one tool, `save_memory(history_entry, memory_update)`; a model without
tools is asked for the same two parts as labelled plain text (`TEXT_FORMAT`), and that text is
accepted from any model that answers in text instead of calling the tool. Arguments are read
leniently (memory/wire.py: control characters, fences, trailing commas). On success the entry is
appended to HISTORY.md, MEMORY.md is replaced atomically (old text kept as a version; Tusk links
each fact to the messages that say it, memory/provenance.py, and drops facts forgotten on request,
memory/tombstones.py), and only then is the pointer moved: a crash in between may repeat a summary
but never loses one. The entry's heading is the span of its messages' own times. A failed round
moves nothing; after `MAX_FAILURES` failures on the same chunk its raw transcript goes to HISTORY.md
marked `[raw]` and the pointer moves anyway, so a broken model cannot make a chat overflow forever.
After a failure the chat's next round waits (30 s, doubling to 15 min) and takes half the chunk.

Replies first: a run started in the background (the post-turn hook, the sweep) waits before
each round until no chat turn is running (`idle`). On a server that answers one request at a time
the LLM boundary also cuts off a round in flight when a reply's request comes (bot/llm/slots.py):
`complete` raises `Deferred`, nothing of the round is written (its answer never came), and the run
waits for `idle` again and sends the same chunk. A turn over budget runs one round itself and
otherwise leaves its oldest turns out of that request.

This module knows nothing of the bot: the LLM call arrives as `complete`, a function
from (messages, tools, max_tokens) to the `save_memory` arguments (a dict or JSON text), the
reply's text when the model answered in text, or None; it raises `ConsolidationFailed` for a call that
failed (the caller translates its own errors: bot/consolidation_call.py) and `Deferred` for one that gave
way. Anything else it raises is a bug and goes up, never into HISTORY.md. The figures are asked at use
time: `budget()` (the model's window may be learned smaller mid-run), `memory_cap()`, `tools_available()`
(whether to offer the tool at all); `idle()` waits until no chat turn is running.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memory import files as memfiles
from memory import tombstones
from memory.budget import Budget
from memory.paths import ChatFiles
from memory.round_answer import (  # noqa: F401 (parse_summary: also read from here)
    ConsolidationFailed, Deferred, MemoryTooLong, parse_summary,
)
from memory.round_request import INSTRUCTIONS, SAVE_MEMORY, Round, pick_cut  # noqa: F401 (also read from here)
from memory.round_step import Chunk, RoundResult, apply_round, choose_chunk, raw_result, result_of
from memory.session import Session, SessionStore
from memory.tokens import count_text

logger = logging.getLogger(__name__)

MAX_ROUNDS = 5
MAX_FAILURES = 3
MAX_DEFERRED = 100  # rounds of one run sent again after a reply went first, before the run gives way
BACKOFF = 30.0  # seconds before a chat's next round after a failure, doubled per failure
MAX_BACKOFF = 900.0
ENTRY_TOKENS = 600  # room for the history entry (and the call's JSON) in a round's answer

Complete = Callable[[list[dict[str, Any]], list[dict[str, Any]], int], Awaitable[dict[str, Any] | str | None]]


@dataclass
class ChatStats:
    runs: int = 0  # successful rounds
    tokens_sent: int = 0  # estimated tokens of consolidation requests
    failures: int = 0  # consecutive failures on the current chunk
    last_error: str = ""
    shrink: bool = False  # the last memory_update was too long: ask for a shorter one
    last_run: float | None = None
    retry_at: float = 0.0  # after a failure, no round before this time (backoff)

    def failed(self, exc: ConsolidationFailed, now: float) -> bool:
        """Count a failed round and back off (30 s, doubling to 15 min); True once the chunk failed too often
        and goes to HISTORY.md raw."""
        self.failures += 1
        self.last_error, self.shrink = str(exc), isinstance(exc, MemoryTooLong)
        self.retry_at = now + min(MAX_BACKOFF, BACKOFF * 2 ** (self.failures - 1))
        return self.failures >= MAX_FAILURES

    def succeeded(self, now: float) -> None:
        self.failures, self.last_error, self.shrink, self.runs = 0, "", False, self.runs + 1
        self.last_run, self.retry_at = now, 0.0


class Consolidator:
    def __init__(self, store: SessionStore, complete: Complete, budget: Callable[[], Budget],
                 memory_cap: Callable[[], int], *, tools_available: Callable[[], bool] = lambda: True,
                 idle: Callable[[], Awaitable[None]] | None = None,
                 instructions_for: Callable[[ChatFiles], str] = lambda files: "") -> None:
        """`budget()` and `memory_cap()`: the model's figures now; `idle()` returns once no chat turn is running;
        `instructions_for(files)`: what a chat's own settings add to the instructions (its open items, with
        check-ins on: memory/open_items.py)."""
        self.store, self.complete = store, complete
        self._budget, self._memory_cap = budget, memory_cap
        self.tools_available, self.idle, self.instructions_for = tools_available, idle, instructions_for
        self.stats: dict[Path, ChatStats] = {}
        self.rounds_ok = 0  # rounds since start, in every chat (/metrics)
        self.rounds_failed = 0
        self._locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = weakref.WeakValueDictionary()

    @property
    def budget(self) -> Budget:
        return self._budget()

    @property
    def max_memory_tokens(self) -> int:
        return self._memory_cap()

    def rounds(self) -> tuple[int, int]:
        """Rounds since start: (ok, failed)."""
        return self.rounds_ok, self.rounds_failed

    def lock(self, chat_dir: Path) -> asyncio.Lock:
        """The chat's MEMORY.md lock, held by a round from reading MEMORY.md to rewriting it: anything
        else that rewrites MEMORY.md (the remember tool) takes it too, so neither loses the other's write."""
        return self._locks.setdefault(chat_dir, asyncio.Lock())  # weak: gone once nobody holds it

    def over_budget(self, session: Session, fixed_tokens: int) -> bool:
        return fixed_tokens + session.tokens > self.budget.limit

    async def run(self, session: Session, fixed_tokens: Callable[[], int], force: bool = False,
                  rounds: int = MAX_ROUNDS, background: bool = False) -> int:
        """Consolidate `session` if it is over budget, down to the target; returns rounds that succeeded.

        `fixed_tokens()` is the rest of the prompt (system prompt with MEMORY.md, tools, pending
        message); it is asked again before each round because MEMORY.md changes. `force` (for /new)
        consolidates every whole turn, over budget or not, and ignores a backoff. `background` runs
        wait for `idle()` before each round, so replies go first."""
        stats = self.stats.setdefault(session.files.dir, ChatStats())
        done = deferred = 0
        while done < rounds:
            if not force and (not self.over_budget(session, fixed_tokens()) and done == 0
                              or time.time() < stats.retry_at):
                break
            if background and self.idle is not None:
                await self.idle()
            try:
                async with self.lock(session.files.dir):
                    excess = session.tokens if force else fixed_tokens() + session.tokens - self.budget.target
                    if excess <= 0 or not await self._round(session, excess, stats, whole=force):
                        break
            except Deferred:
                deferred += 1
                if not background or self.idle is None or deferred > MAX_DEFERRED:
                    break  # the next turn's hook or the sweep starts it again
                continue
            done += 1
        return done

    async def fold(self, session: Session, keep: int = 0) -> int:
        """Consolidate `session` in rounds of bounded chunks until at most `keep` tokens of it are left
        unconsolidated (`keep=0`: all of it, the last round taking the whole rest): an imported history
        (bot/ops/imports/fold.py). Not over budget, not waiting for replies, no backoff: the caller is the
        owner at a terminal. A chunk that fails twice raises ConsolidationFailed, so a dead model never turns
        an import into raw transcripts. Returns the messages folded."""
        stats = self.stats.setdefault(session.files.dir, ChatStats())
        folded = 0
        while session.unconsolidated and session.tokens > keep:
            before = session.last_consolidated
            async with self.lock(session.files.dir):
                done = await self._round(session, session.tokens - keep, stats, rest=keep == 0)
            if not done and stats.failures == 0:
                raise ConsolidationFailed("no whole turn to consolidate")
            if not done and stats.failures >= MAX_FAILURES - 1:  # before the raw fallback of the next failure
                raise ConsolidationFailed(stats.last_error)
            folded += session.last_consolidated - before  # a first failure: tried again with half the chunk
        return folded

    def transcript_room(self, old_memory: str = "") -> int:
        """Tokens of transcript one round's request has room for beside the instructions, `old_memory`, the
        tool schema and the answer (memory/round_request.py)."""
        return max(1, self._ask(old_memory, ChatStats()).room(self.budget.window))

    @property
    def answer_tokens(self) -> int:
        """max_tokens of a round's request: the whole new memory and the history entry."""
        return self.max_memory_tokens + ENTRY_TOKENS

    def _ask(self, old_memory: str, stats: ChatStats, forgotten: str = "") -> Round:
        return Round(datetime.now(timezone.utc).strftime("%Y-%m-%d"), old_memory, self.max_memory_tokens,
                     self.answer_tokens, [SAVE_MEMORY] if self.tools_available() else [], stats.shrink, forgotten)

    async def _round(self, session: Session, excess: int, stats: ChatStats, whole: bool = False,
                     rest: bool = False) -> bool:
        """One round, its request within the window; `whole` (/new) takes every message that fits, `rest`
        the whole rest where it fits or holds no earlier cut (an import's last round)."""
        old_memory = memfiles.read_memory(session.files)
        ask = self._ask(old_memory, stats, tombstones.request_note(session.files) + self.instructions_for(session.files))
        chunk = choose_chunk(session.unconsolidated, session.last_consolidated, excess, ask, self.budget.window,
                             stats.failures, rest=whole or rest)
        if chunk is None:
            return False
        result = await self._result(chunk, ask, stats)
        if result is None:
            return False
        if self.store.cached(session.files) is not session or session.last_consolidated != chunk.start:
            logger.info("consolidation result discarded: the chat was reset while it ran")
            return False
        apply_round(self.store, session, result)
        stats.succeeded(time.time())
        self.rounds_ok += 1
        return True

    async def _result(self, chunk: Chunk, ask: Round, stats: ChatStats) -> RoundResult | None:
        """The round's result from the model's answer; after a failure None (nothing is written), or once the
        chunk failed `MAX_FAILURES` times its raw transcript. `Deferred` goes up: not a failure."""
        prompt = ask.prompt(chunk.messages)
        stats.tokens_sent += sum(count_text(m["content"]) for m in prompt)
        try:
            return result_of(chunk, ask.old_memory, await self.complete(prompt, ask.tools, ask.answer_tokens),
                             self.max_memory_tokens)
        except ConsolidationFailed as exc:  # the answer could not be used, or the call failed (`complete`)
            self.rounds_failed += 1
            last = stats.failed(exc, time.time())
            logger.warning("consolidation failed (%d in a row): %s", stats.failures, exc)
            return raw_result(chunk, ask.old_memory) if last else None
