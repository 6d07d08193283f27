"""One chat's persisted search index, `search.sqlite` in the chat's folder, kept up to date with its files.

The file, its tables and their id ranges are memory/search_db.py. `ChatIndex.refresh()` follows both
append-only files (memory/tail.py) by reading only what was added since the last refresh; a
file that shrank, was replaced or changed before that point is read again from the start. The
`documents/` folder is compared with `files` at each refresh: a new or changed document is
indexed in passages (memory/passages.py), a removed one (/forget me, the chat's cap) leaves the index.
A new message costs O(1) index work: its own row, plus the previous message's `around`
updated in place to include it. The file is a cache of the chat's own files: created 0600
(never through a symlink), deleted by /forget and `tusk forget`, and rebuilt when it is
missing, damaged or of another schema. Then the reads a search makes (memory/search.py): ranked
matches, a message's neighbours, the chat's members and words.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from memory import documents
from memory.files import ENTRY_HEADING, entry_span
from memory.passages import passages
from memory.paths import ChatFiles, open_private
from memory.question import words
from memory.search_core import vocabulary
from memory.search_db import DOCUMENT_IDS, HISTORY_IDS, connect, delete_index, index_path
from memory.session import Message
from memory.tail import Tail

logger = logging.getLogger(__name__)

AROUND_CHARS = 400  # each neighbour contributes at most this much text to `around`
RANK = """SELECT rowid, bm25(fts, 1.0, :around)
       * (CASE WHEN rowid < :documents_end THEN :document WHEN rowid < 0 THEN :history ELSE 1.0 END)
       * (CASE WHEN rowid BETWEEN :m0 AND :m1 OR rowid BETWEEN :h0 AND :h1 OR rowid BETWEEN :d0 AND :d1
               THEN :dated ELSE 1.0 END) AS score
   FROM fts WHERE fts MATCH :match AND rowid <= :last ORDER BY score LIMIT :limit"""
EXCERPT = "SELECT snippet(fts, 0, '', '', ' … ', ?) FROM fts WHERE fts MATCH ? AND rowid = ?"


class ChatIndex:
    """The index of one chat; call `refresh()` (under `lock`) before reading it."""

    def __init__(self, files: ChatFiles) -> None:
        self.files = files
        self.path = index_path(files)
        self.lock = threading.Lock()
        self.db: sqlite3.Connection | None = None
        self.ino: int | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        """The open index database: `refresh()` (which returned True) opens it."""
        if self.db is None:
            raise RuntimeError(f"{self.path} is not open: refresh() it first")
        return self.db

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
        self.db = None

    # -- opening -------------------------------------------------------------------------------

    def _open(self) -> bool:
        """Make sure `db` is this chat's current index file; False when the chat has no files."""
        try:
            ino = os.stat(self.path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            ino = None
        if self.db is not None and ino == self.ino:
            return True
        self.close()  # the file went away (/forget) or was replaced under us
        if ino is None and not (self.files.session.exists() or self.files.history.exists()
                                or self.files.documents.is_dir()):
            return False
        try:
            self._connect()
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as exc:  # damaged: it is only a cache
            logger.warning("%s is unreadable (%s); rebuilding it", self.path, exc)
            self.close()
            delete_index(self.files)
            self._connect()
        return True

    def _connect(self) -> None:
        self.db = connect(self.files)  # of the current schema (memory/search_db.py)
        self.ino = os.stat(self.path).st_ino

    def _get(self, key: str, default: Any = None) -> Any:  # the state table's values are of any SQLite type
        row = self.conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def _load_state(self) -> None:
        self.history = Tail(self.files.history, self._get("history.ino"), self._get("history.offset", 0),
                            self._get("history.mark", b""))
        self.session = Tail(self.files.session, self._get("session.ino"), self._get("session.offset", 0),
                            self._get("session.mark", b""))
        self.messages = self._get("messages", 0)  # messages seen in session.jsonl (their number is `seq`)
        self.pointer = self._get("pointer", 0)  # messages [0, pointer) are consolidated
        self.last_id = self._get("last_id", 0)  # the id of the newest message row
        self.history_id = self._get("history_id", HISTORY_IDS)  # the id of the newest history row
        self.document_id = self._get("document_id", DOCUMENT_IDS)  # the id of the newest document passage

    def _save_state(self) -> None:
        rows = [*self.history.state("history"), *self.session.state("session"), ("messages", self.messages),
                ("pointer", self.pointer), ("last_id", self.last_id), ("history_id", self.history_id),
                ("document_id", self.document_id)]
        self.conn.executemany("INSERT OR REPLACE INTO state VALUES (?, ?)", rows)

    # -- following the files -------------------------------------------------------------------

    def refresh(self) -> bool:
        """Index what was appended to HISTORY.md and session.jsonl; False if the chat has no files."""
        if not self._open():
            return False
        try:
            self._follow()
        except sqlite3.OperationalError:  # locked, disk full, ...: not a damaged file, so nothing is deleted
            raise
        except sqlite3.DatabaseError as exc:
            logger.warning("%s failed (%s); rebuilding it", self.path, exc)
            self.close()
            delete_index(self.files)
            self._open()
            self._follow()
        return True

    def _follow(self) -> None:
        """Under the database's write lock, from the state it holds (so another process or index
        object that indexed meanwhile is never indexed twice), read and index what was appended."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._load_state()
            history, h_reset = self.history.read()
            if history and not h_reset and not ENTRY_HEADING.match(history.decode("utf-8", "replace")):
                self.history = Tail(self.files.history)  # not a whole new entry but an edit: read it all again
                history, h_reset = self.history.read()
            session, s_reset = self.session.read()
            if h_reset:
                self._delete("kind = 'history'")
                self.history_id = HISTORY_IDS
            if history:
                self._add_history(history.decode("utf-8", "replace"))
            if s_reset:
                self._delete("kind = 'message'")
                self.conn.execute("DELETE FROM members")
                self.messages = self.pointer = self.last_id = 0
            if session:
                self._add_messages(session)
            changed = self._follow_documents()
            if history or session or h_reset or s_reset or changed:
                self._save_state()
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _follow_documents(self) -> bool:
        """Index the kept documents that are new or changed since the last refresh, and drop those gone."""
        now = {}
        folder = self.files.documents
        paths = sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")) \
            if folder.is_dir() else []
        for path in paths:
            try:
                info = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                continue
            now[path.name] = f"{info.st_mtime_ns}:{info.st_size}"
        indexed = {name: (stamp, first, last) for name, stamp, first, last
                   in self.conn.execute("SELECT name, stamp, first, last FROM files")}
        stale = [name for name, (stamp, _, _) in indexed.items() if now.get(name) != stamp]
        for name in stale:
            _, first, last = indexed[name]
            self._delete(f"kind = 'document' AND id BETWEEN {int(first)} AND {int(last)}")
            self.conn.execute("DELETE FROM files WHERE name = ?", (name,))
        fresh = [doc for name, stamp in now.items() if indexed.get(name, ("",))[0] != stamp
                 and (doc := self._read_document(folder / name)) is not None]
        for doc in sorted(fresh, key=lambda d: d.ts):  # ids follow time, as the dated boost needs
            self._add_document(doc, now[f"{doc.id}.json"])
        return bool(stale or fresh)

    @staticmethod
    def _read_document(path: Path) -> documents.KeptDocument | None:
        try:
            with os.fdopen(open_private(path, os.O_RDONLY), encoding="utf-8") as fh:
                return documents.parse(path.stem, fh.read())
        except (OSError, UnicodeDecodeError):
            return None

    def _add_document(self, doc: documents.KeptDocument, stamp: str) -> None:
        speaker = doc.sender_name or doc.sender_id or None  # the id where the platform gave no name (the HTTP API)
        key = " ".join(words(speaker)) if speaker else None
        where = " ".join(filter(None, (doc.name, doc.url)))
        first = self.document_id + 1
        rows = []
        for page, passage in passages(doc.text):
            self.document_id += 1
            rows.append((self.document_id, "document", page, doc.ts, doc.source, speaker, key, passage, where, None))
        if not rows:
            return
        self._insert(rows)
        self.conn.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", (f"{doc.id}.json", stamp, first,
                                                                              self.document_id))

    def _delete(self, where: str) -> None:
        self.conn.execute(f"INSERT INTO fts(fts, rowid, body, around) SELECT 'delete', id, body, around FROM docs "
                          f"WHERE {where}")
        self.conn.execute(f"DELETE FROM docs WHERE {where}")

    def _insert(self, rows: list[tuple]) -> None:
        """rows: (id, kind, seq, ts, role, speaker, key, body, around, ts_end)."""
        self.conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        self.conn.executemany("INSERT INTO fts(rowid, body, around) VALUES (?, ?, ?)",
                              [(r[0], r[7], r[8]) for r in rows])
        self._add_words(r[7] for r in rows)

    def _add_words(self, texts) -> None:
        new = vocabulary(texts)  # the words the spelling fallback may offer
        if not new:
            return
        before = self.conn.execute("SELECT coalesce(max(id), 0) FROM words").fetchone()[0]
        self.conn.executemany("INSERT OR IGNORE INTO words(word) VALUES (?)", [(w,) for w in new])
        self.conn.execute("INSERT INTO grams(rowid, word) SELECT id, word FROM words WHERE id > ?", (before,))

    def _add_history(self, text: str) -> None:
        starts = [m.start() for m in ENTRY_HEADING.finditer(text)]
        rows = []
        for a, b in zip(starts, [*starts[1:], len(text)]):
            heading, _, body = text[a:b].strip().partition("\n")
            self.history_id += 1
            first, last = entry_span(heading)
            rows.append((self.history_id, "history", -1, first, None, None, None, body.strip(), "", last))
        self._insert(rows)

    def _parse(self, data: bytes) -> list[tuple[int, Message]]:
        """The text messages among the new lines, numbered as `memory.session.load` numbers them."""
        out = []
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
                out.append((self.messages, msg))
            self.messages += 1
        return out

    def _add_messages(self, data: bytes) -> None:
        new = self._parse(data)
        if not new:
            return
        prev = self.conn.execute("SELECT id, body FROM docs WHERE id IN (?, ?) ORDER BY id",
                                 (self.last_id - 1, self.last_id)).fetchall() if self.last_id else []
        texts = [b[:AROUND_CHARS] for _, b in prev] + [(m.content or "")[:AROUND_CHARS] for _, m in new]
        first = len(prev)  # where the new messages start in `texts`
        if prev:  # the previous newest message now has a next neighbour: update it in place
            last_id = prev[-1][0]
            around = " ".join(texts[first - 2:first - 1] + texts[first:first + 1])
            old = self.conn.execute("SELECT body, around FROM docs WHERE id = ?", (last_id,)).fetchone()
            self.conn.execute("INSERT INTO fts(fts, rowid, body, around) VALUES ('delete', ?, ?, ?)", (last_id, *old))
            self.conn.execute("UPDATE docs SET around = ? WHERE id = ?", (around, last_id))
            self.conn.execute("INSERT INTO fts(rowid, body, around) VALUES (?, ?, ?)", (last_id, old[0], around))
        rows = []
        for i, (seq, msg) in enumerate(new, first):
            around = " ".join(texts[max(0, i - 1):i] + texts[i + 1:i + 2])
            speaker = msg.sender_name if msg.role == "user" else None
            key = " ".join(words(speaker)) if speaker else None
            self.last_id += 1
            rows.append((self.last_id, "message", seq, msg.ts, msg.role, speaker, key, msg.content, around, None))
        self._insert(rows)
        self.conn.executemany("INSERT OR IGNORE INTO members VALUES (?)", {(r[5],) for r in rows if r[5]})

    # -- reading -------------------------------------------------------------------------------

    def members(self) -> list[str]:
        """The display names of everyone who wrote here."""
        return [r[0] for r in self.conn.execute("SELECT name FROM members")]

    def has_word(self, word: str) -> bool:
        """Whether the chat ever used `word` (4+ letters) as it is written."""
        return self.conn.execute("SELECT 1 FROM words WHERE word = ?", (word,)).fetchone() is not None

    def words_sharing(self, grams: list[str], limit: int) -> list[str]:
        """The used words sharing the most of `grams` (three-letter pieces), best first."""
        expression = " OR ".join(f'"{g}"' for g in grams if '"' not in g)
        if not expression:
            return []
        rows = self.conn.execute("SELECT word FROM grams WHERE grams MATCH ? ORDER BY rank LIMIT ?",
                                 (expression, limit))
        return [r[0] for r in rows]

    def _span(self, kind: str, since: float | None, until: float | None) -> tuple[int, int]:
        """The ids of the `kind` docs dated within [since, until) as a range (ids follow time)."""
        if since is None or until is None:
            return 1, 0
        lo, hi = self.conn.execute("SELECT min(id), max(id) FROM docs WHERE kind = ? AND coalesce(ts_end, ts) >= ? "
                                   "AND ts < ?", (kind, since, until)).fetchone()
        return (lo, hi) if lo is not None else (1, 0)

    def query(self, match: str, names: tuple[str, ...], since: float | None, until: float | None, weights,
              limit: int, long: int, tokens: int) -> list[tuple]:
        """(id, kind, seq, ts, role, speaker, text, ts_end, around) of the best `limit` docs, best first; a body
        longer than `long` characters is replaced by an excerpt of about `tokens` words around the match.

        Only consolidated messages count: ids up to the newest one before the pointer. The member
        boost re-ranks a pool of the best candidates (the rest are too far behind to catch up)."""
        last = self.conn.execute("SELECT max(id) FROM docs WHERE kind = 'message' AND seq < ?",
                                 (self.pointer,)).fetchone()[0] or 0
        (m0, m1), (h0, h1) = self._span("message", since, until), self._span("history", since, until)
        d0, d1 = self._span("document", since, until)
        pool = max(50, limit * 5) if names else limit
        params = {"around": weights.around, "history": weights.history, "dated": weights.dated, "m0": m0, "m1": m1,
                  "h0": h0, "h1": h1, "d0": d0, "d1": d1, "document": weights.document, "documents_end": HISTORY_IDS,
                  "match": match, "last": last, "limit": pool}
        scored = self.conn.execute(RANK, params).fetchall()
        if names:
            keys = dict(self.conn.execute(f"SELECT id, key FROM docs WHERE id IN ({', '.join('?' * len(scored))})",
                                          [i for i, _ in scored]).fetchall())
            scored = sorted(((i, s * (weights.named if keys.get(i) in names else 1.0)) for i, s in scored),
                            key=lambda r: r[1])[:limit]
        ids = [i for i, _ in scored]
        rows = {r[0]: r for r in self.conn.execute(
            f"SELECT id, kind, seq, ts, role, speaker, body, ts_end, around FROM docs "
            f"WHERE id IN ({', '.join('?' * len(ids))})",
            ids)}
        out = []
        for doc_id in ids:
            row = rows[doc_id]
            if len(row[6]) > long:
                row = (*row[:6], self.conn.execute(EXCERPT, (tokens, match, doc_id)).fetchone()[0], *row[7:])
            out.append(row)
        return out

    def neighbours(self, doc_id: int) -> list[tuple[str | None, str | None, str | None]]:
        """(role, speaker, text) of the messages just before and after message `doc_id` (Nones at the ends)."""
        rows = {r[0]: r[1:] for r in self.conn.execute(
            "SELECT id, role, speaker, body FROM docs WHERE id IN (?, ?)", (doc_id - 1, doc_id + 1))}
        return [rows.get(doc_id - 1, (None, None, None)), rows.get(doc_id + 1, (None, None, None))]

