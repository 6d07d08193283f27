"""search.sqlite itself: where a chat's index is, its schema, and opening or deleting the file.

    docs   one row per HISTORY.md entry (negative ids, rising) or user/assistant message (ids 1, 2, ...
           in session order): kind, seq (message number in session.jsonl), ts (an entry's first
           time) and ts_end (its last: an entry dates the span of the messages it summarises), role,
           speaker (display name) and key (its lowercased form), body, around (the texts of
           the message before and after it); and one per passage of a kept document
           (memory/documents.py; ids below the history's, rising): seq its page (0: none),
           role its source ("file", "web"), speaker who sent it, around its name and URL
    files  the kept documents indexed: file name, its size and mtime then, its rows' ids
    fts    FTS5 over docs(body, around), porter stemming, accents folded (external content)
    words  every word the chat used, with a trigram FTS5 over it (spelling fallback)
    state  where the last read of HISTORY.md and session.jsonl stopped (inode, offset, the
           last bytes read), the message count and the consolidation pointer

The file is a cache of the chat's own files (memory/search_index.py fills it): created 0600, never
through a symlink; another `SCHEMA` means it is deleted and built again.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from memory.paths import ChatFiles

SCHEMA = 3  # 2: ts_end, the end of an entry's span; 3: kept documents' passages
HISTORY_IDS = -(1 << 40)  # history rows count up from here (FTS5 inserts fast only with rising ids), all < 0
DOCUMENT_IDS = -(1 << 50)  # document passages count up from here, all below the history's
DDL = """
CREATE TABLE state (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE docs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, seq INTEGER NOT NULL, ts REAL NOT NULL,
                   role TEXT, speaker TEXT, key TEXT, body TEXT NOT NULL, around TEXT NOT NULL DEFAULT '',
                   ts_end REAL);
CREATE INDEX docs_seq ON docs(kind, seq);
CREATE INDEX docs_ts ON docs(kind, ts);
CREATE TABLE members (name TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE files (name TEXT PRIMARY KEY, stamp TEXT NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE VIRTUAL TABLE fts USING fts5(body, around, content='docs', content_rowid='id',
                                    tokenize='porter unicode61 remove_diacritics 2');
CREATE TABLE words (id INTEGER PRIMARY KEY, word TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE grams USING fts5(word, content='words', content_rowid='id', tokenize='trigram');
"""


def index_path(files: ChatFiles) -> Path:
    return files.search_index


def delete_index(files: ChatFiles) -> None:
    """Delete the chat's index (and a journal left by an interrupted write)."""
    path = index_path(files)
    for stray in (path.with_name(path.name + "-journal"), path):
        stray.unlink(missing_ok=True)


def connect(files: ChatFiles) -> sqlite3.Connection:
    """The chat's index database, open and of the current schema: a new file, or one of another schema, is
    (deleted and) created with the tables above. A damaged file raises sqlite3.DatabaseError."""
    path = index_path(files)
    db = _open(path)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "state" in tables:
            row = db.execute("SELECT value FROM state WHERE key = 'schema'").fetchone()
            if row is not None and row[0] == SCHEMA:
                return db
    except BaseException:
        db.close()
        raise
    db.close()
    delete_index(files)
    db = _open(path)
    try:
        db.executescript(f"BEGIN; {DDL} COMMIT;")
        db.execute("INSERT INTO state VALUES ('schema', ?)", (SCHEMA,))
    except BaseException:
        db.close()
        raise
    return db


def _open(path: Path) -> sqlite3.Connection:
    """Open (creating it 0600, refusing a symlink) the index database."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    os.close(fd)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA synchronous = NORMAL")
    return db
