"""Consolidation: summarise a chat's oldest whole turns into HISTORY.md and MEMORY.md, then
move the session's pointer past them.

    budget = window - reply reserve       reserve = min(max reply tokens, window / 4)
    trigger: prompt estimate > budget     target: prompt estimate <= budget / 2

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
each round until no chat turn is running (`idle`), so on a server that answers one request
at a time a reply waits behind at most the one round already sent. A turn over budget runs
one round itself and otherwise leaves its oldest turns out of that request.

This module knows nothing of the bot: the LLM call arrives as `complete`, a function
from (messages, tools, max_tokens) to the `save_memory` arguments (a dict or JSON text), the
reply's text when the model answered in text, or None; `tools_available()` says whether to
offer the tool at all, and `idle()` waits until no chat turn is running.
"""

from __future__ import annotations

import asyncio
import re
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memory import files as memfiles
from memory import provenance, tombstones
from memory.round_request import (  # noqa: F401 (INSTRUCTIONS, SAVE_MEMORY, transcript: also read from here)
    INSTRUCTIONS, SAVE_MEMORY, Round, chunk_cut, pick_cut, transcript,
)
from memory.paths import ChatFiles
from memory.session import Message, Session, SessionStore
from memory.tokens import count_text
from memory.wire import parse_lenient

logger = logging.getLogger(__name__)

MAX_ROUNDS = 5
MAX_FAILURES = 3
BACKOFF = 30.0  # seconds before a chat's next round after a failure, doubled per failure
MAX_BACKOFF = 900.0
ENTRY_TOKENS = 600  # room for the history entry (and the call's JSON) in a round's answer

Complete = Callable[[list[dict[str, Any]], list[dict[str, Any]], int], Awaitable[dict[str, Any] | str | None]]

_LABEL = re.compile(r"^[\s#*_>`-]*(history[ _]entry|summary|memory[ _]update|memory(?:\.md)?)[\s*_`]*:?[\s*_`]*(.*)$",
                    re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Budget:
    window: int
    reserve: int
    source: str = ""  # where the window figure came from (shown by /status and doctor)

    @classmethod
    def for_window(cls, window: int, max_reply_tokens: int | None = None, source: str = "") -> Budget:
        quarter = window // 4
        return cls(window, min(max_reply_tokens, quarter) if max_reply_tokens else quarter, source)

    @property
    def limit(self) -> int:
        return self.window - self.reserve

    @property
    def target(self) -> int:
        return self.limit // 2


@dataclass(frozen=True, slots=True)
class Summary:
    history_entry: str
    memory_update: str


class ConsolidationFailed(Exception):
    pass


class MemoryTooLong(ConsolidationFailed):
    pass


def parse_summary(raw: dict[str, Any] | str | None, old_memory: str, max_tokens: int) -> Summary:
    """Validate `save_memory` arguments, or the same two parts in labelled text; raises ConsolidationFailed."""
    args = parse_lenient(raw) if isinstance(raw, str) else raw
    if not isinstance(args, dict) and isinstance(raw, str):
        args = parse_text_summary(raw)
    if not isinstance(args, dict):
        raise ConsolidationFailed("the model did not call save_memory" if not raw else
                                  f"save_memory arguments could not be read: {str(raw)[:200]}")
    entry, memory = args.get("history_entry"), args.get("memory_update")
    if not isinstance(entry, str) or not entry.strip() or not isinstance(memory, str):
        raise ConsolidationFailed("save_memory needs history_entry and memory_update strings")
    if old_memory.strip() and not memory.strip():
        raise ConsolidationFailed("memory_update is empty while MEMORY.md was not")
    if count_text(memory) > max_tokens:
        raise MemoryTooLong(f"memory_update is over {max_tokens} tokens")
    return Summary(entry.strip(), memory.strip() + "\n" if memory.strip() else "")


def parse_text_summary(text: str) -> dict[str, str] | None:
    """The two labelled parts of `TEXT_FORMAT` (headings, bold or `key:` forms alike), or None."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.strip().strip("`").splitlines():
        if match := _LABEL.match(line):
            key = "history_entry" if match.group(1).lower().startswith(("history", "summary")) else "memory_update"
            current = parts.setdefault(key, [])
            if match.group(2).strip():
                current.append(match.group(2))
        elif current is not None:
            current.append(line)
    if "history_entry" not in parts or "memory_update" not in parts:
        return None
    return {key: "\n".join(lines).strip() for key, lines in parts.items()}


def span(chunk: Sequence[Message]) -> tuple[float, float]:
    """The times of a chunk's first and last dated message (an imported 2023 chat's entry is dated 2023,
    not with the day it was imported); now for a chunk without dates."""
    times = [m.ts for m in chunk if m.ts > 0] or [time.time()]
    return min(times), max(times)


@dataclass
class ChatStats:
    runs: int = 0  # successful rounds
    tokens_sent: int = 0  # estimated tokens of consolidation requests
    failures: int = 0  # consecutive failures on the current chunk
    last_error: str = ""
    shrink: bool = False  # the last memory_update was too long: ask for a shorter one
    last_run: float | None = None
    retry_at: float = 0.0  # after a failure, no round before this time (backoff)


@dataclass
class Consolidator:
    store: SessionStore
    complete: Complete
    budget: Budget
    max_memory_tokens: int
    stats: dict[Path, ChatStats] = field(default_factory=dict)
    tools_available: Callable[[], bool] = lambda: True
    idle: Callable[[], Awaitable[None]] | None = None  # returns once no chat turn is running
    # what a chat's own settings add to the instructions (its open items, with check-ins on: memory/open_items.py)
    instructions_for: Callable[[ChatFiles], str] = lambda files: ""
    rounds_ok: int = 0  # rounds since start, in every chat (/metrics)
    rounds_failed: int = 0
    _locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = field(default_factory=weakref.WeakValueDictionary)

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
        done = 0
        for _ in range(rounds):
            if not force and (not self.over_budget(session, fixed_tokens()) and done == 0
                              or time.time() < stats.retry_at):
                break
            if background and self.idle is not None:
                await self.idle()
            async with self.lock(session.files.dir):
                excess = session.tokens if force else fixed_tokens() + session.tokens - self.budget.target
                if excess <= 0 or not await self._round(session, excess, stats, whole=force):
                    break
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
        cut = chunk_cut(session.unconsolidated, excess, ask, self.budget.window, stats.failures, rest=whole or rest)
        if not cut:
            return False
        start, chunk = session.last_consolidated, session.unconsolidated[:cut]
        try:
            summary = await self._summarise(chunk, ask, stats)
        except ConsolidationFailed as exc:
            stats.failures += 1
            self.rounds_failed += 1
            stats.last_error, stats.shrink = str(exc), isinstance(exc, MemoryTooLong)
            stats.retry_at = time.time() + min(MAX_BACKOFF, BACKOFF * 2 ** (stats.failures - 1))
            logger.warning("consolidation failed (%d in a row): %s", stats.failures, exc)
            if stats.failures < MAX_FAILURES:
                return False
            summary = Summary(f"[raw] {transcript(chunk)}", old_memory)
        if self.store.cached(session.files) is not session or session.last_consolidated != start:
            logger.info("consolidation result discarded: the chat was reset while it ran")
            return False
        numbered, (first, last) = list(enumerate(chunk, start)), span(chunk)
        older = memfiles.history_entries(session.files)
        memory_update = tombstones.enforce(session.files, old_memory, summary.memory_update, numbered)
        entry = tombstones.clean_entry(session.files, summary.history_entry)
        memfiles.append_history(session.files, entry, first, last)
        memfiles.write_memory(session.files, memory_update)
        provenance.after_round(session.files, old_memory, memory_update, numbered, older,
                               provenance.round_entry(first, entry, last))
        self.store.set_pointer(session, start + cut)
        stats.failures, stats.last_error, stats.shrink, stats.runs = 0, "", False, stats.runs + 1
        self.rounds_ok += 1
        stats.last_run, stats.retry_at = time.time(), 0.0
        return True

    async def _summarise(self, chunk: Sequence[Message], ask: Round, stats: ChatStats) -> Summary:
        prompt = ask.prompt(chunk)
        stats.tokens_sent += sum(count_text(m["content"]) for m in prompt)
        try:
            raw = await self.complete(prompt, ask.tools, ask.answer_tokens)
        except Exception as exc:  # the LLM boundary already translated errors; any failure counts alike
            raise ConsolidationFailed(f"LLM call failed: {exc}") from exc
        return parse_summary(raw, ask.old_memory, self.max_memory_tokens)
