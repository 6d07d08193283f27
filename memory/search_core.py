"""What search_history does whatever keeps a chat's index: the ranking's weights, respelling a word the
chat never used, and the hits a search returns. Pure: both indexes use it.

    memory/search.py + search_index.py   the files backend: search.sqlite (SQLite FTS5, bm25)
    store/postgres/search.py             the PostgreSQL backend: tsvector columns, the same bm25 in SQL

Both read the question with memory/question.py, respell its terms with `respell` (or, asking the
database once for all of them, `respellable` + `closest`), rank with `Weights`, and build each result
with `hit`. An index that answers respelling's two questions synchronously is a `Words`.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

from memory.files import entry_stamp

FULL_TEXT_CHARS = 600  # longer texts are shown as an excerpt around the match
NEIGHBOUR_CHARS = 200  # each neighbour is shown up to this long
EXCERPT_TOKENS = 48
CANDIDATES = 30  # trigram candidates looked at for a misspelt word
MIN_RESPELL = 5  # shorter unknown words are left alone (too many real words are one edit apart)
MIN_WORD = 4  # the words a chat used, as respelling may offer them: 4+ letters
MAX_TERMS = 64  # a question of more words is searched for its first 64
SPACES = str.maketrans({c: " " for c in string.punctuation + "’‘“”…–—"})


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


# -- the words of a chat, and respelling -----------------------------------------------------------


def vocabulary(texts: Iterable[str]) -> set[str]:
    """The words respelling may offer from these texts: lowercased, 4+ letters, letters only."""
    return {w for w in "\n".join(texts).lower().translate(SPACES).split() if len(w) >= MIN_WORD and w.isalpha()}


def trigrams(word: str) -> list[str]:
    return list(dict.fromkeys(word[i:i + 3] for i in range(len(word) - 2)))


def distance(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap two neighbours) from `a` to `b` (optimal string alignment)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[-1]


def respellable(term: str) -> bool:
    """Whether `term`, if the chat never used it, is worth replacing (5+ characters, not a number)."""
    return len(term) >= MIN_RESPELL and not term.isdigit()


def closest(term: str, candidates: Iterable[str]) -> str:
    """The candidate a typo away from `term` (same first letter, one edit, two from 8 letters on), else `term`."""
    allowed = 1 if len(term) < 8 else 2
    close = [(distance(term, w), w) for w in candidates
             if w and w[0] == term[0] and abs(len(w) - len(term)) <= allowed]
    best = min(close, default=None)
    return best[1] if best and best[0] <= allowed else term


class Words(Protocol):
    """What respelling asks of a chat's index."""

    def has_word(self, word: str) -> bool:
        """Whether the chat ever used `word` (4+ letters) as it is written."""

    def words_sharing(self, grams: list[str], limit: int) -> list[str]:
        """The used words sharing the most of `grams` (three-letter pieces), best first."""


def respell(index: Words, terms: Sequence[str]) -> tuple[str, ...]:
    """`terms` with each word the chat never used (5+ letters) replaced by the closest word it did use,
    when one is a typo away: same first letter, one edit (two from 8 letters on)."""
    return tuple(closest(t, index.words_sharing(trigrams(t), CANDIDATES))
                 if respellable(t) and not index.has_word(t) else t for t in terms)


# -- hits ------------------------------------------------------------------------------------------


def stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def line(role: str | None, speaker: str | None, text: str | None) -> Line | None:
    """A neighbour as shown beside a hit (None where there is none)."""
    return None if role is None or text is None else Line(role, speaker, short(text, NEIGHBOUR_CHARS))


def hit(kind: str, role: str | None, seq: int, ts: float, ts_end: float | None, speaker: str | None, text: str,
        before: Line | None = None, after: Line | None = None) -> Hit:
    """One result: a HISTORY.md entry dated with its span, or a message with its speaker and neighbours."""
    if kind == "history":
        return Hit("history", entry_stamp(ts, ts_end), text)
    return Hit(role or "user", stamp(ts), text, speaker, before, after, seq)
