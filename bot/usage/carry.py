"""The usage ledger moved whole between usage.sqlite and the database, for a move between the stores by
`tusk backup` and `tusk restore` (bot/ops/carried.py):

    dump(sync_db, into)   the database's `usage_calls` and salt written as into/usage.sqlite (none: no file)
    load(sync_db, home)   home/usage.sqlite (just restored) into the database, and out of the home
    calls(sync_db)        how many calls the database keeps (a restore over them needs --force)
    empty(sync_db)        the database's ledger deleted (a forced restore replaces it)

Every call comes over as it was, its id too, and an erased one with its limit keys; so does the salt those
keys were made under (`usage_meta`, `meta` in the file), so a forgotten chat's or person's spend still counts
toward its limits after the move, and `/usage` and `tusk usage` give the same figures on either side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.usage.ledger import FILE, Ledger
from bot.usage.ledger_sql import COLUMNS

CARRIED = f"id, {COLUMNS}, erased, chat_key, person_key"  # every column of a call, in one order on both sides
BATCH = 2_000  # rows read from the database at a time


def dump(sync_db: Any, into: Path) -> int:
    """The database's ledger written as `into`'s usage.sqlite, in one snapshot; how many calls. A database
    that has recorded nothing (no call, no salt) makes no file."""
    with sync_db.connection() as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        salt = conn.execute("SELECT value FROM usage_meta WHERE key = 'salt'").fetchone()
        (count,) = conn.execute("SELECT count(*) FROM usage_calls").fetchone()
        if salt is None and not count:
            return 0
        ledger = Ledger(Path(into))
        try:
            with ledger.writing() as db, conn.cursor("tusk_usage_dump") as cur:
                if salt is not None:  # else the file's own: no call was erased under any (keys need a salt)
                    db.execute("UPDATE meta SET value = ? WHERE key = 'salt'", (bytes(salt[0]),))
                cur.itersize = BATCH
                cur.execute(f"SELECT {CARRIED} FROM usage_calls ORDER BY id")
                db.executemany(f"INSERT INTO calls ({CARRIED}) VALUES ({', '.join('?' * _width())})",
                               (_sqlite(row) for row in cur))
        finally:
            ledger.close()
    return count


def load(sync_db: Any, home: Path) -> int:
    """`home`'s usage.sqlite (just restored; an older schema is brought up to date first) into the database,
    ids and salt kept, then removed from the home; how many calls. None there: nothing to do."""
    path = Path(home) / FILE
    if not path.is_file():
        return 0
    ledger = Ledger(Path(home))
    try:
        with ledger.writing() as db:
            salt = db.execute("SELECT value FROM meta WHERE key = 'salt'").fetchone()[0]
            rows = db.execute(f"SELECT {CARRIED} FROM calls ORDER BY id")
            with sync_db.transaction() as conn:
                conn.execute("INSERT INTO usage_meta (key, value) VALUES ('salt', %s) "
                             "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (bytes(salt),))
                count = 0
                with conn.cursor().copy(f"COPY usage_calls ({CARRIED}) FROM STDIN") as copy:
                    for row in rows:  # COPY keeps the ids given (as OVERRIDING SYSTEM VALUE would)
                        copy.write_row(row)
                        count += 1
                conn.execute("SELECT setval(pg_get_serial_sequence('usage_calls', 'id'), coalesce(max(id), 1), "
                             "max(id) IS NOT NULL) FROM usage_calls")  # the next call numbered after them
    finally:
        ledger.close()
    for suffix in ("", "-wal", "-shm", "-journal"):
        path.with_name(FILE + suffix).unlink(missing_ok=True)
    return count


def calls(sync_db: Any) -> int:
    with sync_db.connection() as conn:
        return conn.execute("SELECT count(*) FROM usage_calls").fetchone()[0]


def empty(sync_db: Any) -> int:
    """Every call and the salt deleted; how many calls."""
    with sync_db.transaction() as conn:
        gone = conn.execute("DELETE FROM usage_calls").rowcount
        conn.execute("DELETE FROM usage_meta")
    return gone


def _width() -> int:
    return len(CARRIED.split(","))


def _sqlite(row: tuple) -> tuple:
    """A database row as SQLite takes it (bytea arrives as memoryview or bytes: a BLOB either way)."""
    return tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
