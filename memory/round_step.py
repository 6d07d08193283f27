"""One consolidation round as a pure step and its application.

    choose_chunk(messages, start, excess, ask, window, failures, rest)   pure: the leading messages one round
                                                                          takes (memory/round_request.py
                                                                          `chunk_cut`), or None
    result_of(chunk, old_memory, answer, max_tokens)                     pure: the model's answer read
                                                                          (memory/round_answer.py) into what the
                                                                          round will write; ConsolidationFailed
    raw_result(chunk, old_memory)                                        pure: the chunk's transcript marked
                                                                          [raw], memory unchanged (a chunk that
                                                                          failed too often)
    apply_round(store, session, result)                                  the one write: HISTORY.md's entry,
                                                                          MEMORY.md, provenance, then the pointer

`apply_round` writes the pointer last: a crash in between may repeat a summary but never loses one. What it
writes is what the result says, whatever produced it (a summary or the raw fallback): no flags.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from memory import files as memfiles
from memory import provenance, tombstones
from memory.round_answer import Summary, parse_summary
from memory.round_request import Round, chunk_cut, transcript
from memory.session import Message, Session, SessionStore


@dataclass(frozen=True, slots=True)
class Chunk:
    """The leading unconsolidated messages one round takes; `start`: the first one's index in the session."""
    start: int
    messages: tuple[Message, ...]

    @property
    def end(self) -> int:
        """The session's pointer once the chunk is consolidated."""
        return self.start + len(self.messages)


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one round writes: the chunk it consolidates, the memory it read, the summary it keeps."""
    chunk: Chunk
    old_memory: str
    summary: Summary
    raw: bool = False  # the chunk's transcript itself, after too many failures


def choose_chunk(messages: Sequence[Message], start: int, excess: int, ask: Round, window: int, failures: int = 0,
                 rest: bool = False) -> Chunk | None:
    """The chunk of `messages` (the unconsolidated ones, the first at `start`) one round takes: whole turns
    removing about `excess` tokens, its request within `window` (room halved per failure); with `rest`,
    all of them where they fit. None when there is no whole turn to take."""
    cut = chunk_cut(messages, excess, ask, window, failures, rest=rest)
    return Chunk(start, tuple(messages[:cut])) if cut else None


def result_of(chunk: Chunk, old_memory: str, answer: dict | str | None, max_memory_tokens: int) -> RoundResult:
    """The model's answer to the round's request, read; raises ConsolidationFailed when it cannot be used."""
    return RoundResult(chunk, old_memory, parse_summary(answer, old_memory, max_memory_tokens))


def raw_result(chunk: Chunk, old_memory: str) -> RoundResult:
    """The chunk kept as its raw transcript in HISTORY.md, MEMORY.md unchanged: a broken model cannot make a
    chat overflow forever."""
    return RoundResult(chunk, old_memory, Summary(f"[raw] {transcript(chunk.messages)}", old_memory), raw=True)


def span(chunk: Sequence[Message]) -> tuple[float, float]:
    """The times of a chunk's first and last dated message (an imported 2023 chat's entry is dated 2023,
    not with the day it was imported); now for a chunk without dates."""
    times = [m.ts for m in chunk if m.ts > 0] or [time.time()]
    return min(times), max(times)


def apply_round(store: SessionStore, session: Session, result: RoundResult) -> None:
    """Write a round's result whole: the entry appended to HISTORY.md (dated by its messages' span), MEMORY.md
    replaced atomically (forgotten facts kept out: memory/tombstones.py), each fact linked to the messages that
    say it (memory/provenance.py), then the session's pointer moved past the chunk."""
    files, chunk = session.files, result.chunk
    numbered, (first, last) = list(enumerate(chunk.messages, chunk.start)), span(chunk.messages)
    older = memfiles.history_entries(files)
    memory_update = tombstones.enforce(files, result.old_memory, result.summary.memory_update, numbered)
    entry = tombstones.clean_entry(files, result.summary.history_entry)
    memfiles.append_history(files, entry, first, last)
    memfiles.write_memory(files, memory_update)
    provenance.after_round(files, result.old_memory, memory_update, numbered, older,
                           provenance.round_entry(first, entry, last))
    store.set_pointer(session, chunk.end)
