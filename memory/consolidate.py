"""Consolidation's pure steps: how large a budget is, which chunk a round takes, how a model's answer
is read, and what a round writes. The runner that asks the model, backs off and has the store write a
round whole is bot/consolidation.py; the request itself is memory/round_request.py.

    budget = window - reply reserve       reserve = min(max reply tokens, window / 4)
    trigger: prompt estimate > budget     target: prompt estimate <= budget / 2

    choose_chunk(messages, start, excess, ask, window, failures, rest)   the leading whole turns one round
                                                                          takes, or None
    parse_summary(answer, old_memory, max_tokens)                        the model's answer read, else
                                                                          ConsolidationFailed saying why
    raw_summary(chunk, old_memory)                                       a chunk that failed too often: its
                                                                          transcript, marked [raw]
    settle(summary, old_memory, chunk, ...)                              what the round writes (`Settled`)

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
the model call raises `Deferred`, nothing of the round is written (its answer never came), and the
run waits for `idle` again and sends the same chunk. A turn over budget runs one round itself and
otherwise leaves its oldest turns out of that request.

Nothing here calls a model or touches a file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory import provenance, tombstones
from memory.round_request import (  # noqa: F401 (INSTRUCTIONS, SAVE_MEMORY: also read from here)
    INSTRUCTIONS, SAVE_MEMORY, Round, chunk_cut, pick_cut, transcript,
)
from memory.session import Message
from memory.tokens import count_text
from memory.wire import parse_lenient

ENTRY_TOKENS = 600  # room for the history entry (and the call's JSON) in a round's answer

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


class Deferred(Exception):
    """The model call did not answer so that a person's reply could go first (a one-slot model server:
    bot/llm/slots.py): nothing of the round is written, and the run waits and sends the same chunk again."""


class MemoryTooLong(ConsolidationFailed):
    pass


@dataclass(frozen=True, slots=True)
class Chunk:
    """The leading unconsolidated messages one round takes; `start`: the first one's index in the session."""

    start: int
    messages: tuple[Message, ...]

    @property
    def end(self) -> int:
        """The session's pointer once the chunk is consolidated."""
        return self.start + len(self.messages)


def choose_chunk(messages: Sequence[Message], start: int, excess: int, ask: Round, window: int, failures: int = 0,
                 rest: bool = False) -> Chunk | None:
    """The chunk of `messages` (the unconsolidated ones, the first at `start`) one round takes: whole turns
    removing about `excess` tokens, its request within `window` (room halved per failure); with `rest`, all
    of them where they fit (memory/round_request.py `chunk_cut`). None when there is no whole turn to take."""
    cut = chunk_cut(messages, excess, ask, window, failures, rest=rest)
    return Chunk(start, tuple(messages[:cut])) if cut else None


def raw_summary(chunk: Chunk, old_memory: str) -> Summary:
    """A chunk that failed `MAX_FAILURES` times (bot/consolidation.py) kept as its transcript, marked [raw],
    MEMORY.md unchanged: a broken model cannot make a chat overflow forever."""
    return Summary(f"[raw] {transcript(chunk.messages)}", old_memory)


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


@dataclass(frozen=True, slots=True)
class Settled:
    """What a round writes, once the model's answer is read and Tusk's own rules applied to it."""

    memory: str  # the new MEMORY.md, forgotten facts kept out
    entry: str  # the HISTORY.md entry, copied notices about forgotten facts taken out
    first: float  # the span of the messages it summarises
    last: float
    links: dict[str, dict[str, Any]]  # provenance.json's links after the round
    stones: list[tombstones.Tombstone]  # the tombstones left (those of facts said again are lifted)


def settle(summary: Summary, old_memory: str, chunk: Chunk, stones: Sequence[tombstones.Tombstone],
           links: dict[str, dict[str, Any]], older: Sequence[str]) -> Settled:
    """A round's result from the model's `summary` of `chunk`: tombstoned facts kept out (memory/tombstones.py),
    each fact linked to what said it (memory/provenance.py), the entry dated with its messages' span. Pure:
    the caller writes it whole."""
    numbered, (first, last) = list(enumerate(chunk.messages, chunk.start)), span(chunk.messages)
    memory, left = tombstones.enforce(stones, old_memory, summary.memory_update, numbered)
    entry = tombstones.clean_entry(stones, summary.history_entry)
    links = provenance.after_round(links, old_memory, memory, numbered, older,
                                   provenance.round_entry(first, entry, last))
    return Settled(memory, entry, first, last, links, left)
