"""The usage ledger: one row per LLM call in `$TUSK_HOME/usage.sqlite`.

    meta    key/value: `salt` (32 random bytes: the limit keys' HMAC key)
    calls   ts, channel, chat, person, purpose, model, input/output/cached tokens, estimated,
            cost_usd (NULL = unknown price, never 0), cost_source, latency_ms, erased,
            chat_key / person_key (limit keys, set only by erasure), characters (text read out by a
            speech engine, purpose `speech`; 0 for every other call)

The file is owner-only (0600, and its -wal/-shm too) and never opened through a symlink. It runs
in WAL mode with `synchronous=NORMAL`: a `record()` is committed without an fsync, so a `kill -9`
loses at most the call in flight (a power cut may lose the last few commits too). The schema
version is `PRAGMA user_version`: `MIGRATIONS` are named functions applied in order, each in its
own transaction. One writer and one reader connection, each behind a lock, serve every thread
of the process (a long report never holds up `record()`).

`input_tokens` includes `cached_tokens` (the OpenAI convention). Erasure (/forget) sets chat
and person to NULL and `erased` to 1, keeping an HMAC-SHA256 of each under the salt so the
day's and month's spend still count toward that chat's and person's limits (`spent`), until
`prune_limit_keys` drops keys older than `KEEP_KEYS_DAYS`. The hash is a pseudonym, not
anonymity: whoever holds the file (salt included) can test a guessed id against it.

The queries are `SqlLedger`'s (bot/usage/ledger_sql.py), shared with the PostgreSQL ledger
(bot/usage/ledger_pg.py); what is SQLite's own is here: the file, the PRAGMAs, the migrations, the index
hints, `limit_key` as an SQL function.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from bot.usage.ledger_sql import (BUCKET_S, COLUMNS, COST_SOURCES, KEEP_KEYS_DAYS, PURPOSES, SUMS, UNPRICED_TOKENS,
                                  Call, Row, Spent, SqlLedger, Totals, limit_key)
from memory.paths import open_private, private_dir

FILE = "usage.sqlite"
# The covering indexes' summed columns: as m001 made them, and since m002 (characters added).
SUMMED_V1 = "input_tokens, output_tokens, cached_tokens, cost_usd"
SUMMED = f"{SUMMED_V1}, characters"
INDEXED = (("ts", "ts"), ("chat", "channel, chat, ts"), ("person", "channel, person, ts"), ("model", "model, ts"),
           ("purpose", "purpose, ts"))


class LedgerTooNew(RuntimeError):
    """usage.sqlite was written by a newer Tusk (a schema version this one does not know)."""


def m001_calls(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID")
    db.execute("INSERT INTO meta VALUES ('salt', randomblob(32))")
    db.execute("""CREATE TABLE calls (id INTEGER PRIMARY KEY, ts REAL NOT NULL, channel TEXT, chat TEXT,
        person TEXT, purpose TEXT NOT NULL, model TEXT NOT NULL, input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL, estimated INTEGER NOT NULL,
        cost_usd REAL, cost_source TEXT, latency_ms REAL NOT NULL, erased INTEGER NOT NULL DEFAULT 0,
        chat_key BLOB, person_key BLOB)""")
    # Covering indexes (the summed columns included): reports and limit sums read an index, never the table.
    for name, lead in INDEXED:
        db.execute(f"CREATE INDEX calls_{name} ON calls({lead}, {SUMMED_V1})")
    db.execute("CREATE INDEX calls_chat_key ON calls(chat_key, ts) WHERE chat_key IS NOT NULL")
    db.execute("CREATE INDEX calls_person_key ON calls(person_key, ts) WHERE person_key IS NOT NULL")


def m002_characters(db: sqlite3.Connection) -> None:
    """Speech calls (issue 45) are charged by the character: a column for them, in the covering indexes too."""
    db.execute("ALTER TABLE calls ADD COLUMN characters INTEGER NOT NULL DEFAULT 0")
    for name, lead in INDEXED:
        db.execute(f"DROP INDEX calls_{name}")
        db.execute(f"CREATE INDEX calls_{name} ON calls({lead}, {SUMMED})")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (m001_calls, m002_characters)


class Ledger(SqlLedger):
    """The usage ledger of one $TUSK_HOME, opened on first use. Safe from any thread of one process;
    a `report` over many rows takes a while: from async code, call it in a thread."""

    hints = {name: f"INDEXED BY calls_{name}" for name in ("chat", "person", "model")}  # see _where

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.path = self.home / FILE
        self._open_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._salt = b""
        self._listeners: list[Callable[[int, Call], None]] = []

    def exists(self) -> bool:
        """Whether there is a ledger to read (usage.sqlite was made): a check that makes no file."""
        return self.path.is_file()

    def close(self) -> None:
        with self._write_lock, self._read_lock:
            for db in (self._reader, self._writer):
                if db is not None:
                    db.close()
            self._writer = self._reader = None

    @contextlib.contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """The file's connection (made and migrated), in one transaction of its own: committed when the block
        ends, rolled back if it raises. For the ledger moved whole between the stores (bot/usage/carry.py)."""
        self._open()
        with self._write_lock:
            db = self._writer
            assert db is not None  # _open made it
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- opening -------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA busy_timeout = 5000")
        db.execute("PRAGMA synchronous = NORMAL")
        return db

    def _open(self) -> tuple[sqlite3.Connection, sqlite3.Connection]:
        """The reader and the writer, opened on first use (the file made and migrated then)."""
        with self._open_lock:
            if self._reader is not None and self._writer is not None:
                return self._reader, self._writer
            private_dir(self.home, follow=True)
            for name in (FILE, f"{FILE}-wal", f"{FILE}-shm"):  # 0600 before SQLite sees them; no symlink
                fd = open_private(self.home / name, os.O_RDWR | os.O_CREAT)
                os.fchmod(fd, 0o600)
                os.close(fd)
            writer = self._connect()
            writer.execute("PRAGMA journal_mode = WAL")
            self._migrate(writer)
            self._salt = writer.execute("SELECT value FROM meta WHERE key = 'salt'").fetchone()[0]
            salt = self._salt
            writer.create_function("limit_key", 3, lambda kind, channel, ident: limit_key(salt, kind, channel, ident),
                                   deterministic=True)
            reader = self._connect()
            self._reader, self._writer = reader, writer
            return reader, writer

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")  # one process migrates; another waits and then finds it done
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise LedgerTooNew(f"{self.path} has schema version {version}; this Tusk knows up to "
                                   f"{len(MIGRATIONS)}: upgrade Tusk (or move the file away to start a new ledger)")
            for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
                migration(db)
                db.execute(f"PRAGMA user_version = {number}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- the dialect (bot/usage/ledger_sql.py) -------------------------------------------------

    def _key(self, kind: str, channel: str | None, ident: str | None) -> bytes | None:
        self._open()
        return limit_key(self._salt, kind, channel, ident)

    def _key_sql(self, kind: str) -> tuple[str, list]:
        return f"limit_key('{kind}', channel, {kind})", []  # the SQL function _open made

    def _insert(self, row: tuple) -> int:
        """Committed without an fsync (WAL with synchronous=NORMAL)."""
        _, writer = self._open()
        with self._write_lock:
            rowid = writer.execute(self.insert_sql(), row).lastrowid
        assert rowid is not None  # an INSERT's cursor has it
        return rowid

    def _update(self, sql: str, args: list) -> int:
        _, writer = self._open()
        with self._write_lock:
            return writer.execute(sql, args).rowcount

    def _rows(self, sql: str, args: list) -> list[tuple]:
        """A chat or person filter reads its own index (`hints`): without statistics SQLite would rather scan
        another one in its GROUP BY order, all of it."""
        reader, _ = self._open()
        with self._read_lock:
            return reader.execute(sql, args).fetchall()

    def _spent(self, sql: str, args: list) -> Spent:
        reader, _ = self._open()
        with self._read_lock:  # one snapshot: the sums and the id they reach (ids are committed in order)
            reader.execute("BEGIN")
            try:
                usd, tokens = reader.execute(sql, args).fetchone()
                upto = reader.execute("SELECT coalesce(max(id), 0) FROM calls").fetchone()[0]
            finally:
                reader.execute("COMMIT")
        return Spent(usd, tokens, upto)


__all__ = ["BUCKET_S", "COLUMNS", "COST_SOURCES", "FILE", "KEEP_KEYS_DAYS", "MIGRATIONS", "PURPOSES", "SUMS",
           "UNPRICED_TOKENS", "Call", "Ledger", "LedgerTooNew", "Row", "Spent", "Totals"]
