"""Ranked keyword search over one chat's past: its HISTORY.md entries and the session
messages already consolidated (the newer ones are in the prompt anyway).

Each searched chat gets an in-memory SQLite FTS5 index (porter stemming, accents folded,
bm25 ranking, history entries weighted a little above raw messages since they are the
summaries). The index follows both append-only files by reading only what was added since
the last search; a file that shrank, was replaced or changed before that point is read
again from the start. Indexes of the chats searched last are kept (LRU); nothing is
written to disk. Searches block (SQLite): callers run them in a thread.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from memory.files import ENTRY_HEADING
from memory.paths import ChatFiles, open_private
from memory.session import Message

HISTORY_WEIGHT = 1.25  # bm25 is negative (lower is better): history entries rank this much higher
FULL_TEXT_CHARS = 600  # longer documents are shown as an excerpt around the match
EXCERPT_TOKENS = 48
STOP_WORDS = frozenset(
    "a about an and are as at be but by did do does for from had has have how i in is it me my of on or our "
    "so that the their them then there they this to us was we were what when where which who why will with "
    "you your".split())

SCHEMA = """CREATE VIRTUAL TABLE docs USING fts5(
    body, source UNINDEXED, seq UNINDEXED, at UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2')"""
QUERY = """SELECT source, at, body, snippet(docs, 0, '', '', ' … ', ?),
                  bm25(docs) * (CASE source WHEN 'history' THEN ? ELSE 1.0 END) AS score
           FROM docs WHERE docs MATCH ? AND (source = 'history' OR seq < ?)
           ORDER BY score LIMIT ?"""


@dataclass(frozen=True, slots=True)
class Hit:
    source: str  # "history" (a HISTORY.md entry), "user" or "assistant" (a consolidated message)
    at: str  # "2026-11-12 18:40 UTC"
    text: str  # the whole entry or message, or an excerpt around the match when it is long


def match_expression(query: str) -> str | None:
    """An FTS5 expression matching any of the query's words (stop words dropped unless that is all)."""
    words = list(dict.fromkeys(re.findall(r"\w+", query.lower())))
    kept = [w for w in words if w not in STOP_WORDS] or words
    return " OR ".join(f'"{w}"' for w in kept) if kept else None


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


class _Tail:
    """Where the last read of an append-only file stopped, and the bytes just before it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ino: int | None = None
        self.offset = 0
        self.mark = b""  # the last bytes read: if they changed, the file was rewritten

    def read(self) -> tuple[bytes, bool]:
        """(the complete lines added since the last read, reset). `reset` is true when the file is
        new to us, gone or rewritten: the bytes are then all of it (none if it is gone)."""
        try:
            fh = os.fdopen(open_private(self.path, os.O_RDONLY), "rb")
        except FileNotFoundError:
            reset = self.ino is not None
            self.ino, self.offset, self.mark = None, 0, b""
            return b"", reset
        with fh:
            st = os.fstat(fh.fileno())
            fh.seek(max(0, self.offset - len(self.mark)))
            appended = st.st_ino == self.ino and st.st_size >= self.offset and fh.read(len(self.mark)) == self.mark
            if not appended:
                self.offset, self.mark = 0, b""
            fh.seek(self.offset)
            data = fh.read()
        data = data[:data.rfind(b"\n") + 1]  # a line still being written is left for the next read
        self.ino, self.offset = st.st_ino, self.offset + len(data)
        if data:
            self.mark = (self.mark + data)[-64:]
        return data, not appended


class ChatIndex:
    def __init__(self, files: ChatFiles) -> None:
        self.files = files
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute(SCHEMA)
        self.lock = threading.Lock()
        self.history = _Tail(files.history)
        self.session = _Tail(files.session)
        self.messages = 0  # messages seen in the session file (their index is `seq`)
        self.pointer = 0  # messages [0, pointer) are consolidated

    def refresh(self) -> None:
        """Index whatever was appended to HISTORY.md and session.jsonl since the last refresh."""
        data, reset = self.history.read()
        if data and not reset and not ENTRY_HEADING.match(data.decode("utf-8", "replace")):
            self.history = _Tail(self.files.history)  # not a whole new entry but an edit: read it all again
            data, reset = self.history.read()
        if reset:
            self.db.execute("DELETE FROM docs WHERE source = 'history'")
        if data:
            self._add_history(data.decode("utf-8", "replace"))
        data, reset = self.session.read()
        if reset:
            self.db.execute("DELETE FROM docs WHERE source != 'history'")
            self.messages = self.pointer = 0
        if data:
            self._add_messages(data)
        self.db.commit()

    def _add_history(self, text: str) -> None:
        starts = [m.start() for m in ENTRY_HEADING.finditer(text)]
        rows = []
        for a, b in zip(starts, [*starts[1:], len(text)]):
            entry = text[a:b].strip()
            heading, _, body = entry.partition("\n")
            rows.append((body.strip(), "history", -1, heading.removeprefix("## ").strip()))
        self.db.executemany("INSERT INTO docs (body, source, seq, at) VALUES (?, ?, ?, ?)", rows)

    def _add_messages(self, data: bytes) -> None:
        """The same lines `memory.session.load` counts as messages get the same numbers here."""
        rows = []
        for line in data.splitlines():
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    continue
                if rec.get("record") == "pointer":
                    self.pointer = int(rec["last_consolidated"])
                    continue
                if "record" in rec:
                    continue
                msg = Message.from_record(rec)
            except (ValueError, TypeError, KeyError):
                continue
            if msg.role in ("user", "assistant") and msg.content and msg.content.strip():
                rows.append((msg.content, msg.role, self.messages, _stamp(msg.ts)))
            self.messages += 1
        self.db.executemany("INSERT INTO docs (body, source, seq, at) VALUES (?, ?, ?, ?)", rows)

    def search(self, query: str, limit: int) -> list[Hit]:
        expression = match_expression(query)
        if expression is None:
            return []
        with self.lock:
            self.refresh()
            rows = self.db.execute(QUERY, (EXCERPT_TOKENS, HISTORY_WEIGHT, expression, self.pointer, limit))
            return [Hit(source, at, body if len(body) <= FULL_TEXT_CHARS else excerpt)
                    for source, at, body, excerpt, _ in rows.fetchall()]


class HistorySearch:
    """The indexes of the chats searched last (an LRU of `cache_size` chats)."""

    def __init__(self, cache_size: int = 4) -> None:
        self._indexes: OrderedDict[Path, ChatIndex] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def index(self, files: ChatFiles) -> ChatIndex:
        with self._lock:
            index = self._indexes.get(files.dir)
            if index is None:
                index = self._indexes[files.dir] = ChatIndex(files)
                while len(self._indexes) > self._cache_size:
                    self._indexes.popitem(last=False)[1].db.close()
            self._indexes.move_to_end(files.dir)
            return index

    def search(self, files: ChatFiles, query: str, limit: int = 5) -> list[Hit]:
        """The `limit` best matches for `query` in this chat, best first (blocking: run it in a thread)."""
        return self.index(files).search(query, limit)
