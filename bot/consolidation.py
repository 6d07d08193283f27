"""The consolidation runner: when a chat's rounds run, which chunk each takes, the model's answer, the
backoff after a failure, and the store writing a round whole (store/base.py `commit_round`). What a
round writes is memory/consolidate.py's pure step; its request is memory/round_request.py.

    run(chat, fixed_tokens)   over budget? rounds down to the target (the post-turn hook, the sweep, /new)
    fold(chat, keep)          an imported history, in bounded rounds (bot/ops/imports/fold.py)
    lock(key)                 the chat's memory lock: a round holds it from reading MEMORY.md to its commit;
                              whatever else rewrites MEMORY.md (remember, /memory forget, the console) takes it

Replies first: a background run waits before each round until no chat turn is running (`idle`), so on
a server that answers one request at a time a reply waits behind at most the one round already sent. A
failed round moves nothing; after `MAX_FAILURES` on the same chunk its raw transcript goes to HISTORY.md
marked `[raw]` and the pointer moves anyway, so a broken model cannot make a chat overflow forever; after
a failure the chat's next round waits (30 s, doubling to 15 min) and takes half the chunk. Only a failed
model call counts as a failure: a programming error propagates (and is logged by the hook that ran it).
A round whose chat moved on meanwhile (/forget, /new, another process) is discarded by the store's
compare-and-set: nothing of it is written.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from bot import remembering
from bot.errors import LLMError
from memory import provenance, tombstones
from memory.consolidate import (ENTRY_TOKENS, Budget, Chunk, ConsolidationFailed, Deferred, MemoryTooLong, Summary,
                                choose_chunk, parse_summary, raw_summary, settle)
from memory.keys import ChatKey
from memory.round_request import SAVE_MEMORY, Round
from memory.tokens import count_text
from store.base import FORGOTTEN, PROVENANCE, Chat, ChatStore, Entry, RoundCommit
from store.errors import StaleWrite

logger = logging.getLogger(__name__)

MAX_ROUNDS = 5
MAX_FAILURES = 3
MAX_DEFERRED = 100  # rounds of one run sent again after a reply went first, before the run gives way
BACKOFF = 30.0  # seconds before a chat's next round after a failure, doubled per failure
MAX_BACKOFF = 900.0

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
        """A round written: the failures forgotten, the backoff lifted."""
        self.failures, self.last_error, self.shrink, self.runs = 0, "", False, self.runs + 1
        self.last_run, self.retry_at = now, 0.0


class Consolidator:
    def __init__(self, chats: ChatStore, complete: Complete, budget: Callable[[], Budget],
                 memory_cap: Callable[[], int], *, tools_available: Callable[[], bool] = lambda: True,
                 idle: Callable[[], Awaitable[None]] | None = None,
                 instructions_for: Callable[[Chat], str] = lambda chat: "") -> None:
        """`complete`: the model call (bot/consolidation_call.py); `budget()` and `memory_cap()`: the model's
        figures now (bot/llm/profile.py: a window learned mid-run applies to the next round); `tools_available()`:
        whether to offer save_memory; `idle()` returns once no chat turn is running; `instructions_for(chat)`: what
        a chat's own settings add to the instructions (its open items, with check-ins on: memory/open_items.py)."""
        self.chats, self.complete = chats, complete
        self._budget, self._memory_cap = budget, memory_cap
        self.tools_available, self.idle, self.instructions_for = tools_available, idle, instructions_for
        self.stats: dict[ChatKey, ChatStats] = {}
        self.rounds_ok = 0  # rounds since start, in every chat (/metrics)
        self.rounds_failed = 0
        self._locks: weakref.WeakValueDictionary[ChatKey, asyncio.Lock] = weakref.WeakValueDictionary()

    @property
    def budget(self) -> Budget:
        """The model's budget now."""
        return self._budget()

    @property
    def max_memory_tokens(self) -> int:
        """MEMORY.md's cap now."""
        return self._memory_cap()

    def rounds(self) -> tuple[int, int]:
        """Rounds since start: (ok, failed)."""
        return self.rounds_ok, self.rounds_failed

    def lock(self, key: ChatKey) -> asyncio.Lock:
        """The chat's memory lock (see the module's docstring); weak: gone once nobody holds it."""
        return self._locks.setdefault(key, asyncio.Lock())

    def over_budget(self, chat: Chat, fixed_tokens: int) -> bool:
        return fixed_tokens + chat.session.tokens > self.budget.limit

    async def run(self, chat: Chat, fixed_tokens: Callable[[], int], force: bool = False,
                  rounds: int = MAX_ROUNDS, background: bool = False) -> int:
        """Consolidate `chat` if it is over budget, down to the target; returns rounds that succeeded.

        `fixed_tokens()` is the rest of the prompt (system prompt with MEMORY.md, tools, pending message),
        asked again before each round because MEMORY.md changes. `force` (for /new) consolidates every whole
        turn, over budget or not, and ignores a backoff. `background` runs wait for `idle()` before each round."""
        stats = self.stats.setdefault(chat.key, ChatStats())
        session, done, deferred = chat.session, 0, 0
        while done < rounds:
            if not force and (not self.over_budget(chat, fixed_tokens()) and done == 0
                              or time.time() < stats.retry_at):
                break
            if background and self.idle is not None:
                await self.idle()
            try:
                async with self.lock(chat.key):
                    if not force and time.time() < stats.retry_at:  # a round that failed while this one waited
                        break
                    excess = session.tokens if force else fixed_tokens() + session.tokens - self.budget.target
                    if excess <= 0 or not await self._round(chat, excess, stats, whole=force):
                        break
            except Deferred:  # a reply went first (bot/llm/slots.py): the same chunk again once it is out
                deferred += 1
                if not background or self.idle is None or deferred > MAX_DEFERRED:
                    break  # the next turn's hook or the sweep starts it again
                continue
            done += 1
        return done

    async def fold(self, chat: Chat, keep: int = 0) -> int:
        """Consolidate `chat` in rounds of bounded chunks until at most `keep` tokens of it are left
        unconsolidated (`keep=0`: all of it, the last round taking the whole rest): an imported history.
        Not over budget, not waiting for replies, no backoff: the caller is the owner at a terminal. A chunk
        that fails twice raises ConsolidationFailed, so a dead model never turns an import into raw
        transcripts. Returns the messages folded."""
        stats = self.stats.setdefault(chat.key, ChatStats())
        session, folded = chat.session, 0
        while session.unconsolidated and session.tokens > keep:
            before = session.last_consolidated
            async with self.lock(chat.key):
                done = await self._round(chat, session.tokens - keep, stats, rest=keep == 0)
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

    async def _round(self, chat: Chat, excess: int, stats: ChatStats, whole: bool = False,
                     rest: bool = False) -> bool:
        """One round, its request within the window; `whole` (/new) takes every message that fits, `rest`
        the whole rest where it fits or holds no earlier cut (an import's last round)."""
        session, handle = chat.session, self.chats.handle(chat.key)
        # MEMORY.md as it is now, under the lock: the chat may have been opened before another round (the turn's
        # own, while this one waited for replies to go first) or a remember() rewrote it
        chat.memory = memory = await handle.memory()
        stones = await remembering.stones(handle)
        ask = self._ask(memory.text, stats, tombstones.request_note(stones) + self.instructions_for(chat))
        chunk = choose_chunk(session.unconsolidated, session.last_consolidated, excess, ask, self.budget.window,
                             stats.failures, rest=whole or rest)
        if chunk is None:
            return False
        summary = await self._answer(chunk, ask, stats)
        if summary is None:
            return False
        older = [e.heading for e in await handle.history()]
        done = settle(summary, memory.text, chunk, stones, await remembering.links(handle), older)
        docs: dict[str, str | None] = {PROVENANCE: provenance.dump(done.links)}
        if stones:
            docs[FORGOTTEN] = tombstones.dump(done.stones)
        entry = Entry(done.first, done.entry, done.last if done.last != done.first else None)
        try:
            await self.chats.commit_round(chat, RoundCommit(chunk.start, chunk.end, memory.version, done.memory,
                                                            entry, docs))
        except StaleWrite as exc:
            logger.info("consolidation result discarded: %s", exc)
            return False
        stats.succeeded(time.time())
        self.rounds_ok += 1
        return True

    async def _answer(self, chunk: Chunk, ask: Round, stats: ChatStats) -> Summary | None:
        """The model's summary of `chunk`; after a failure None (the round waits, then takes less), and after
        the `MAX_FAILURES`th the chunk's raw transcript, so the chat cannot stay over budget forever. Only a
        failed call or an unusable answer is a failure: anything else raises, and nothing is written."""
        try:
            return await self._summarise(chunk, ask, stats)
        except ConsolidationFailed as exc:
            self.rounds_failed += 1
            last = stats.failed(exc, time.time())
            logger.warning("consolidation failed (%d in a row): %s", stats.failures, exc)
            return raw_summary(chunk, ask.old_memory) if last else None

    async def _summarise(self, chunk: Chunk, ask: Round, stats: ChatStats) -> Summary:
        prompt = ask.prompt(chunk.messages)
        stats.tokens_sent += sum(count_text(m["content"]) for m in prompt)
        try:
            raw = await self.complete(prompt, ask.tools, ask.answer_tokens)
        except LLMError as exc:  # the LLM boundary translated every failure of the call into one of these
            raise ConsolidationFailed(f"LLM call failed: {exc}") from exc
        return parse_summary(raw, ask.old_memory, self.max_memory_tokens)
