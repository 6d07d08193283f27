"""Never twice: a platform message delivered again (a retry, a replay, a redelivery after a restart) is
taken once.

    seen = SeenStore(home)                  # $TUSK_HOME/seen.sqlite (the files backend)
    if seen.seen("telegram", "42:1001"):    # recorded now; True: it was taken before, drop it
        return
    publish(msg)                            # the bus journals it (bot/inbox.py) in the same step

`Seen` is the seam: `seen(platform, message_id)` records the id and says, atomically, whether it was
there already. A channel asks it right before it publishes a message, with no await between the two, so
a message is either taken (recorded, then journaled by the bus: answered once, after a crash by the
journal's replay) or dropped as a repeat, never lost between them. The journal's replays are published
by the app, not a channel, so they are never mistaken for repeats. The ids each channel gives:

    telegram   "<chat id>:<message id>"  an update delivered again (polling after a restart, a webhook
                                         retry) carries the same message
    discord    "<message id>"            a MESSAGE_CREATE replayed after a gateway RESUME
    slack      "<channel>:<ts>"          an event retried (X-Slack-Retry-Num, the same event_id) or sent
                                         twice (`message` and `app_mention`); "<channel>:<ts>:overheard"
                                         for chatter kept with /listen, "command:<trigger_id>" for a
                                         slash command

The files backend is one small SQLite table (0600, never through a symlink), a row per id with when it
came, pruned to the last KEEP_DAYS days and at most KEEP_ROWS rows: platforms redeliver within minutes
(Slack), a day (Telegram keeps updates 24 hours), so a week is ample. It holds ids only, never text. A
commit survives the process being killed (WAL, no fsync per message: a power cut may forget the last
ids). A damaged file is set aside and started anew (logged): either can cost a repeat, never a message. The
database's (store/postgres/seen.py, chosen by bot/stores.py) is the same call on a table whose primary key is
(platform, message_id), which makes it hold across processes.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Protocol

from store.errors import StorageUnavailable

logger = logging.getLogger(__name__)

FILE = "seen.sqlite"
KEEP_DAYS = 7
KEEP_ROWS = 200_000
PRUNE_EVERY = 1_000  # inserts between two prunings
DDL = """
CREATE TABLE IF NOT EXISTS seen (platform TEXT NOT NULL, id TEXT NOT NULL, at REAL NOT NULL,
                                 PRIMARY KEY (platform, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS seen_at ON seen(at);
"""


class Seen(Protocol):
    """Which platform messages were taken already (the files backend: `SeenStore`)."""

    def seen(self, platform: str, message_id: str) -> bool:
        """Record `message_id` of `platform` as taken; True if it had been taken before (a repeat)."""
        ...

    def close(self) -> None:
        """Let go of what it holds (a file, a pool's connections)."""
        ...


class MemorySeen:
    """`Seen` for one process only (no home: tests, tools): the last `size` ids."""

    def __init__(self, size: int = 10_000) -> None:
        self._ids: dict[tuple[str, str], None] = {}
        self._size = size

    def seen(self, platform: str, message_id: str) -> bool:
        key = (platform, message_id)
        if key in self._ids:
            return True
        self._ids[key] = None
        while len(self._ids) > self._size:
            del self._ids[next(iter(self._ids))]
        return False

    def close(self) -> None:
        self._ids.clear()  # what it held goes with it, as a file's or a pool's connections do


def _connect(path: Path) -> sqlite3.Connection:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)  # private, never through a symlink
    os.close(fd)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")  # a commit survives the process being killed, with no fsync of its
    # own (bench/dedupe.py: ~5 ms each with one, on this disk); a power cut may forget the last ids: a repeat then
    db.executescript(DDL)
    db.execute("SELECT count(*) FROM seen").fetchone()  # a damaged file fails here, not mid-message
    return db


class SeenStore:
    """The files backend: `$TUSK_HOME/seen.sqlite`."""

    def __init__(self, home: Path, keep_days: float = KEEP_DAYS, keep_rows: int = KEEP_ROWS) -> None:
        self.path = Path(home) / FILE
        self.keep_seconds = keep_days * 86400
        self.keep_rows = keep_rows
        self._db: sqlite3.Connection | None = None
        self._since_prune = 0

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self._db = _connect(self.path)
            except sqlite3.OperationalError:
                raise
            except sqlite3.DatabaseError as exc:
                logger.warning("%s is damaged (%s): set aside as %s.damaged, starting anew (a message delivered "
                               "again soon may be answered again)", self.path, exc, self.path.name)
                for suffix in ("", "-wal", "-shm"):
                    stray = self.path.with_name(self.path.name + suffix)
                    if stray.exists():
                        os.replace(stray, stray.with_name(stray.name + ".damaged"))
                self._db = _connect(self.path)
            self._prune(self._db)
        return self._db

    def seen(self, platform: str, message_id: str) -> bool:
        db = self._open()
        taken = db.execute("INSERT OR IGNORE INTO seen VALUES (?, ?, ?)", (platform, message_id, time.time()))
        if taken.rowcount == 0:
            return True
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            self._prune(db)
        return False

    def _prune(self, db: sqlite3.Connection) -> None:
        self._since_prune = 0
        db.execute("DELETE FROM seen WHERE at < ?", (time.time() - self.keep_seconds,))
        db.execute("DELETE FROM seen WHERE at <= (SELECT at FROM seen ORDER BY at DESC LIMIT 1 OFFSET ?)",
                   (self.keep_rows,))

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def is_repeat(seen: Seen, platform: str, message_id: str) -> bool:
    """`seen.seen(...)`, but a store that fails (a full disk, a locked file) lets the message through, logged:
    a repeat answered again is better than a message lost."""
    try:
        repeat = seen.seen(platform, message_id)
    except (sqlite3.Error, OSError, StorageUnavailable):
        logger.exception("could not check whether a %s message was taken before; taking it", platform)
        return False
    if repeat:
        logger.info("a %s message delivered again was taken before: not answered twice", platform)
    return repeat
