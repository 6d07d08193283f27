"""The usage ledger in PostgreSQL (TUSK_DATABASE_URL): `usage_calls` and `usage_meta`
(store/postgres/schema/0005_usage.sql), the same interface and the same figures as usage.sqlite's `Ledger`.

    ledger = PgLedger(db)        # db: store.postgres.pool.SyncDatabase, its schema current (migrations.py)

It lives in bot/ beside its SQLite twin because it speaks in bot/usage's values (`Call`, `Totals`, ...),
and store/ imports nothing of bot/. The queries are `SqlLedger`'s (bot/usage/ledger_sql.py); what is
PostgreSQL's own is here:

- a record is one INSERT committed at once (durable: a kill -9 loses at most the call in flight);
- a quarter-hour bucket is `floor(ts / 900)` (a cast to an integer would round, SQLite's truncates);
- an erased id's limit key is the same HMAC-SHA256 as SQLite's, computed inside the one UPDATE from
  PostgreSQL's own `sha256()`: HMAC(K, m) = sha256((K ^ opad) || sha256((K ^ ipad) || m)) with the two
  padded keys made here from the salt, so every row of a chat gets its person's key in one statement
  (no extension such as pgcrypto needed, no row read out and written back);
- `Spent.upto_id`: ids come from a sequence and commit out of order across processes, so the highest id
  in the table says nothing about which of this process's calls a sum included; records of this process
  commit one at a time under a lock, and `spent` reads under it, so the last id it recorded is exact.

No index hints: PostgreSQL's planner has statistics.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from bot.usage.ledger_sql import BUCKET_S, Call, Spent, SqlLedger, limit_key
from store.postgres.pool import SyncDatabase

BLOCK = 64  # SHA-256's block: an HMAC key shorter than it is padded with zeros


def _pg(sql: str) -> str:
    """`?` placeholders as psycopg's `%s` (no query of the ledger holds a literal `?` or `%`)."""
    return sql.replace("?", "%s")


class PgLedger(SqlLedger):
    """The usage ledger of a database. Safe from any thread; each call is one short statement."""

    table = "usage_calls"
    bucket = f"floor(ts / {BUCKET_S})::bigint"

    def __init__(self, db: SyncDatabase) -> None:
        self.db = db
        self.where = f"the database ({db.where})"
        self._lock = threading.Lock()  # this process's records commit in id order; `spent` reads between them
        self._last = 0  # the id of the last call this process recorded
        self._salt: bytes | None = None
        self._listeners: list[Callable[[int, Call], None]] = []

    def exists(self) -> bool:
        """The database's ledger is always there (its table made by the migrations)."""
        return True

    def close(self) -> None:
        """Nothing of its own to close: the pool is the caller's."""

    def salt(self) -> bytes:
        """The limit keys' HMAC key: made once per database (the first process to ask stores it)."""
        if self._salt is None:
            with self.db.transaction() as conn:
                conn.execute("INSERT INTO usage_meta (key, value) VALUES ('salt', %s) ON CONFLICT (key) DO NOTHING",
                             (os.urandom(32),))
                row = conn.execute("SELECT value FROM usage_meta WHERE key = 'salt'").fetchone()
            assert row is not None  # inserted above, or there before
            self._salt = bytes(row[0])
        return self._salt

    # -- the dialect (bot/usage/ledger_sql.py) -------------------------------------------------

    def _key(self, kind: str, channel: str | None, ident: str | None) -> bytes | None:
        return limit_key(self.salt(), kind, channel, ident)

    def _key_sql(self, kind: str) -> tuple[str, list]:
        """HMAC-SHA256(salt, "<kind>\\0<channel>\\0<id>") of the row's `kind` column, as `limit_key` makes it."""
        key = self.salt().ljust(BLOCK, b"\0")  # 32 bytes: shorter than a block, so padded (RFC 2104)
        inner = bytes(b ^ 0x36 for b in key) + f"{kind}\0".encode()
        outer = bytes(b ^ 0x5C for b in key)
        message = f"convert_to(channel, 'UTF8') || '\\x00'::bytea || convert_to({kind}, 'UTF8')"
        return f"sha256(?::bytea || sha256(?::bytea || {message}))", [outer, inner]

    def _insert(self, row: tuple) -> int:
        with self._lock:
            with self.db.transaction() as conn:
                inserted = conn.execute(_pg(self.insert_sql() + " RETURNING id"), row).fetchone()
                assert inserted is not None  # RETURNING gives the row inserted
                (rowid,) = inserted
            self._last = rowid  # committed (the transaction's block ended), and still under the lock
        return rowid

    def _update(self, sql: str, args: list) -> int:
        with self.db.transaction() as conn:
            return conn.execute(_pg(sql), args).rowcount

    def _rows(self, sql: str, args: list) -> list[tuple]:
        with self.db.connection() as conn:
            return conn.execute(_pg(sql), args).fetchall()

    def _spent(self, sql: str, args: list) -> Spent:
        with self._lock:
            usd, tokens = self._rows(sql, args)[0]
            return Spent(usd, tokens, self._last)
