"""Ranked search over one chat's past, built for questions: its HISTORY.md entries, the
session messages already consolidated (the newer ones are in the prompt anyway), and the text
of the documents and web pages read in it (memory/documents.py), whenever they came.

    hits = HistorySearch().search(files, "What are Ana's plans for the summer?", limit=5, zone=zone)
    hits[0].speaker, hits[0].text, hits[0].before, hits[0].after, hits[0].at

Each chat has a persisted SQLite FTS5 index in its folder, `search.sqlite` (0600; a cache:
deleted by /forget, rebuilt from the files if it is gone, damaged or of an older schema;
see memory/search_index.py, memory/search_db.py). Ranking is bm25 over a message's own words and, weighted
below them, the words of its neighbours (the message before and after), so a question
finds the reply that answers it and not only the line that shares its words. On top:

- the question is read by memory/question.py: stop words dropped, members named in it
  boost their own messages, its dates (in the chat's time zone) boost what was said then;
- a word that matches nothing is replaced by the closest word the chat has used
  (trigram candidates, then edit similarity), so "educaton" finds "education";
- HISTORY.md entries (dated summaries, denser), messages and document passages rank in one
  list; a document hit carries its name, page and sender.

Searches block (SQLite): callers run them in a thread. What does not depend on SQLite (the weights,
respelling, the hits) is memory/search_core.py, shared with the PostgreSQL backend (store/postgres/search.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime, timezone, tzinfo
from pathlib import Path

from memory import question as questions
from memory.paths import ChatFiles
from memory.search_core import (EXCERPT_TOKENS, FULL_TEXT_CHARS, MAX_TERMS, Hit, Line, Weights, distance, hit,
                                line, respell, stamp)
from memory.search_db import delete_index, index_path
from memory.search_index import ChatIndex

__all__ = ["Hit", "HistorySearch", "Line", "Weights", "delete_index", "distance", "match_expression", "respell"]


def match_expression(terms: str | list[str] | tuple[str, ...]) -> str | None:
    """An FTS5 expression matching any of `terms` (or of a question's terms), each quoted so no
    FTS5 syntax gets through."""
    if isinstance(terms, str):
        terms = questions.read(terms).terms
    quoted = [f'"{t}"' for t in terms if t and '"' not in t]
    return " OR ".join(quoted) if quoted else None


class HistorySearch:
    """The open indexes of the chats searched last (an LRU of `cache_size` chats)."""

    def __init__(self, cache_size: int = 4, weights: Weights = Weights()) -> None:
        self._indexes: OrderedDict[Path, ChatIndex] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.weights = weights

    def index(self, files: ChatFiles) -> ChatIndex:
        with self._lock:
            index = self._indexes.get(files.dir)
            if index is None:
                index = self._indexes[files.dir] = ChatIndex(files)
                while len(self._indexes) > self._cache_size:
                    self._indexes.popitem(last=False)[1].close()
            self._indexes.move_to_end(files.dir)
            return index

    def search(self, files: ChatFiles, query: str, limit: int = 5, zone: tzinfo = timezone.utc,
               now: datetime | None = None) -> list[Hit]:
        """The `limit` best matches for the question `query` in this chat, best first (blocking).

        Dates in the question are read in `zone`, relative ones from `now` (default: the present)."""
        index = self.index(files)
        with index.lock:
            if not index.refresh():
                return []
            q = questions.read(query, index.members(), now or datetime.now(zone))
            terms = respell(index, q.terms[:MAX_TERMS])
            expression = match_expression(terms)
            if expression is None:
                return []
            rows = index.query(expression, q.names, q.since, q.until, self.weights, limit, FULL_TEXT_CHARS,
                               EXCERPT_TOKENS)
            return [self._hit(index, row) for row in rows]

    def _hit(self, index: ChatIndex, row: tuple) -> Hit:
        doc_id, kind, seq, ts, role, speaker, text, ts_end, around = row
        if kind == "history":
            return hit(kind, role, seq, ts, ts_end, speaker, text)
        if kind == "document":
            return Hit("document", stamp(ts), text, speaker, document=around, page=seq, web=role == "web")
        before, after = (line(*n) for n in index.neighbours(doc_id))
        return hit(kind, role, seq, ts, ts_end, speaker, text, before, after)

    def has(self, files: ChatFiles) -> bool:
        """Does this chat have an index (it holds copies of the chat's text)?"""
        return files.dir in self._indexes or index_path(files).exists()

    def drop(self, files: ChatFiles) -> None:
        """Delete this chat's index (`/forget me`): the next search builds it again from the files."""
        with self._lock:
            index = self._indexes.pop(files.dir, None)
        if index is not None:
            with index.lock:
                index.close()
        delete_index(files)
