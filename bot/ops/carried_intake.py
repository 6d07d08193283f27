"""What Tusk keeps of the platforms' messages it took, carried between its files and the database for a move
between the stores (bot/ops/carried.py):

    seen ids    seen.sqlite (bot/dedupe.py)   <->  `seen` (store/postgres/seen.py): a message a platform
                delivers again after the move is still known as taken, and not answered twice
    the inbox   inbox.jsonl (bot/inbox.py)    <->  `inbox` (bot/inbox_pg.py): a message taken and not yet
                answered when the backup was made is answered by the first Tusk that serves its channel

The seen ids keep their order and when each came (the pruning reads both). The inbox carries the messages
still waiting, each its journal record as it was; answered ones are not carried. Rows restored into the
database belong to run 0, which no process holds (bot/inbox_pg.py draws runs from 1 up), so the next Tusk
takes them as a crash's leftovers; lines dumped from it carry ids of their own, which no run of
bot/inbox.py makes, so a files Tusk replays them the same way.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from psycopg.types.json import Json

from bot import dedupe
from bot.inbox import Inbox, record_of
from bot.running import Claim
from memory.paths import open_private

INBOX = "inbox.jsonl"
RESTORED_RUN = 0  # the run of a restore's inbox rows: never a live process's
BATCH = 2_000


def _seen_file(path: Path) -> sqlite3.Connection:
    os.close(open_private(path, os.O_RDWR | os.O_CREAT))  # 0600, never through a symlink
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(dedupe.DDL)
    return db


def dump_seen(sync_db: Any, into: Path) -> int:
    """The database's seen ids written as `into`'s seen.sqlite, oldest first; how many (none: no file)."""
    with sync_db.connection() as conn, conn.transaction():
        (count,) = conn.execute("SELECT count(*) FROM seen").fetchone()
        if not count:
            return 0
        db = _seen_file(Path(into) / dedupe.FILE)
        try:
            with conn.cursor("tusk_seen_dump") as cur:
                cur.itersize = BATCH
                cur.execute("SELECT platform, id, extract(epoch FROM at)::float8 FROM seen ORDER BY n")
                db.execute("BEGIN")
                db.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?, ?)", cur)
                db.execute("COMMIT")
        finally:
            db.close()
    return count


def load_seen(sync_db: Any, home: Path) -> int:
    """`home`'s seen.sqlite (just restored) into the database, oldest first, then removed from the home; how
    many ids it held. An id the database knows already stays as it is (a union: taken is taken)."""
    path = Path(home) / dedupe.FILE
    if not path.is_file():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT platform, id, at FROM seen ORDER BY at")
        count = 0
        with sync_db.transaction() as conn, conn.cursor() as cur:
            while batch := rows.fetchmany(BATCH):
                cur.executemany("INSERT INTO seen (platform, id, at) VALUES (%s, %s, to_timestamp(%s)) "
                                "ON CONFLICT DO NOTHING", batch)
                count += len(batch)
    finally:
        db.close()
    for suffix in ("", "-wal", "-shm", "-journal"):
        path.with_name(dedupe.FILE + suffix).unlink(missing_ok=True)
    return count


def dump_inbox(sync_db: Any, into: Path) -> int:
    """The messages waiting in the database's inbox written as `into`'s inbox.jsonl, oldest first; how many
    (none: no file)."""
    with sync_db.connection() as conn:
        rows = conn.execute("SELECT run, seq, record FROM inbox ORDER BY id").fetchall()
    if not rows:
        return 0
    lines = "".join(json.dumps({**record, "id": f"db.{run:x}:{seq}"}, ensure_ascii=False, separators=(",", ":"))
                    + "\n" for run, seq, record in rows)
    with os.fdopen(open_private(Path(into) / INBOX, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w",
                   encoding="utf-8") as fh:
        fh.write(lines)
    return len(rows)


def load_inbox(sync_db: Any, home: Path, held: Claim) -> int:
    """The messages waiting in `home`'s inbox.jsonl (just restored: those without a `done`) into the
    database's inbox, then the file removed; how many. `held`: the restore's claim on the home, which
    bot/inbox.py asks of whoever takes a journal's open turns."""
    path = Path(home) / INBOX
    if not path.is_file():
        return 0
    messages = Inbox(path).take_pending(held)
    with sync_db.transaction() as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO inbox (run, seq, channel, chat_id, sender_id, record) "
                        "VALUES (%s, %s, %s, %s, %s, %s)",
                        [(RESTORED_RUN, n, m.key.channel, m.key.chat_id, m.sender_id, Json(record_of(m)))
                         for n, m in enumerate(messages, 1)])
    path.unlink()
    return len(messages)


def waiting(sync_db: Any) -> int:
    """How many messages wait in the database's inbox (a restore over them needs --force)."""
    with sync_db.connection() as conn:
        return conn.execute("SELECT count(*) FROM inbox").fetchone()[0]


def empty_inbox(sync_db: Any) -> int:
    """The database's inbox emptied (a forced restore replaces it); how many messages."""
    with sync_db.transaction() as conn:
        return conn.execute("DELETE FROM inbox").rowcount
