"""Ranked search over one chat's past, built for questions: its HISTORY.md entries, the
session messages already consolidated (the newer ones are in the prompt anyway), and the text
of the documents and web pages read in it (memory/documents.py), whenever they came.

    hits = HistorySearch().search(files, "What are Ana's plans for the summer?", limit=5, zone=zone)
    hits[0].speaker, hits[0].text, hits[0].before, hits[0].after, hits[0].at

Each chat has a persisted SQLite FTS5 index in its folder, `search.sqlite` (0600; a cache:
deleted by /forget, rebuilt from the files if it is gone, damaged or of an older schema;
see memory/search_index.py). Ranking is bm25 over a message's own words and, weighted
below them, the words of its neighbours (the message before and after), so a question
finds the reply that answers it and not only the line that shares its words. On top:

- the question is read by memory/question.py: stop words dropped, members named in it
  boost their own messages, its dates (in the chat's time zone) boost what was said then;
- a word that matches nothing is replaced by the closest word the chat has used
  (trigram candidates, then edit similarity), so "educaton" finds "education";
- HISTORY.md entries (dated summaries, denser), messages and document passages rank in one
  list; a document hit carries its name, page and sender.

Searches block (SQLite): callers run them in a thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from pathlib import Path

from memory import question as questions
from memory.files import entry_stamp
from memory.paths import ChatFiles
from memory.search_index import ChatIndex, delete_index, index_path

__all__ = ["Hit", "HistorySearch", "Line", "Weights", "delete_index", "match_expression"]

FULL_TEXT_CHARS = 600  # longer texts are shown as an excerpt around the match
NEIGHBOUR_CHARS = 200  # each neighbour is shown up to this long
EXCERPT_TOKENS = 48
CANDIDATES = 30  # trigram candidates looked at for a misspelt word
MIN_RESPELL = 5  # shorter unknown words are left alone (too many real words are one edit apart)


@dataclass(frozen=True, slots=True)
class Weights:
    """Ranking knobs (tuned on the dev split of bench/recall.py only)."""

    around: float = 0.5  # a neighbour's words, against the message's own (1.0)
    history: float = 2.0  # HISTORY.md entries (dated summaries, denser) against messages
    named: float = 3.0  # a message by a member the question names
    dated: float = 3.0  # something said within the question's dates
    document: float = 1.0  # a passage of a kept document, against a message (not tuned: bench/recall.py has none)


@dataclass(frozen=True, slots=True)
class Line:
    role: str  # "user" or "assistant"
    speaker: str | None  # the user's display name (None: unknown, or the assistant)
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    source: str  # "history" (a HISTORY.md entry), "user" or "assistant" (a consolidated message), "document"
    at: str  # "2026-11-12 18:40 UTC"; an entry's span "2023-06-01 10:09 UTC – 2023-06-03 18:40 UTC"
    text: str  # the whole entry or message, or an excerpt around the match when it is long
    speaker: str | None = None  # who wrote a user message, when the platform said
    before: Line | None = None  # the message just before (messages only)
    after: Line | None = None  # the message just after
    seq: int = -1  # the message's number in session.jsonl (-1 for history entries)
    document: str = ""  # a document hit: the file's name (or the page's title and URL)
    page: int = 0  # a document hit: its page, when the document has pages
    web: bool = False  # a document hit: a web page web_fetch read (else a file sent in the chat)


def match_expression(terms: str | list[str] | tuple[str, ...]) -> str | None:
    """An FTS5 expression matching any of `terms` (or of a question's terms), each quoted so no
    FTS5 syntax gets through."""
    if isinstance(terms, str):
        terms = questions.read(terms).terms
    quoted = [f'"{t}"' for t in terms if t and '"' not in t]
    return " OR ".join(quoted) if quoted else None


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _trigrams(word: str) -> list[str]:
    return list(dict.fromkeys(word[i:i + 3] for i in range(len(word) - 2)))


def distance(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap two neighbours) from `a` to `b` (optimal string alignment)."""
    prev2, prev = [], list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[-1]


def respell(index: ChatIndex, terms: tuple[str, ...]) -> tuple[str, ...]:
    """`terms` with each word the chat never used (5+ letters) replaced by the closest word it did use,
    when one is a typo away: same first letter, one edit (two from 8 letters on)."""
    out = []
    for term in terms:
        if len(term) < MIN_RESPELL or term.isdigit() or index.has_word(term):
            out.append(term)
            continue
        allowed = 1 if len(term) < 8 else 2
        close = [(distance(term, w), w) for w in index.words_sharing(_trigrams(term), CANDIDATES)
                 if w[0] == term[0] and abs(len(w) - len(term)) <= allowed]
        best = min(close, default=None)
        out.append(best[1] if best and best[0] <= allowed else term)
    return tuple(out)


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
            terms = respell(index, q.terms)
            expression = match_expression(terms)
            if expression is None:
                return []
            rows = index.query(expression, q.names, q.since, q.until, self.weights, limit, FULL_TEXT_CHARS,
                               EXCERPT_TOKENS)
            return [self._hit(index, row) for row in rows]

    def _hit(self, index: ChatIndex, row: tuple) -> Hit:
        doc_id, kind, seq, ts, role, speaker, text, ts_end, around = row
        if kind == "history":
            return Hit("history", entry_stamp(ts, ts_end), text)
        if kind == "document":
            return Hit("document", _stamp(ts), text, speaker, document=around, page=seq, web=role == "web")
        before, after = (Line(r, s, _short(t, NEIGHBOUR_CHARS)) if t is not None else None
                         for r, s, t in index.neighbours(doc_id))
        return Hit(role, _stamp(ts), text, speaker, before, after, seq)

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
