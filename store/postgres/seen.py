"""Never twice, across processes: the platform message ids already taken (bot/dedupe.py's `Seen`), as rows of
`seen` (store/postgres/schema/0007_inbox.sql).

    seen = PgSeen(db)                       # db: store.postgres.pool.SyncDatabase, its schema current
    if seen.seen("telegram", "42:1001"):    # True: taken before, by this process or any other
        return

One statement answers: `INSERT ... ON CONFLICT DO NOTHING` on the primary key (platform, id) inserts a new
id and reports a known one, atomically, whichever process asks first. It holds ids only, never text.

Pruning, as the files backend (seen.sqlite) bounds itself: ids older than `keep_days` go, and at most
`keep_rows` are kept. Both are index range deletes that touch only the rows they remove: the age by the
index on `at` (the database's clock, so processes on hosts whose clocks differ agree), the count by the
row's insertion number `n` (the newest `keep_rows` numbers stay; a repeat consumes a number too, so it
may keep a few fewer, never more), with no count(*) or OFFSET walk over the table. Each process prunes
when it first asks and then every `prune_every` ids it inserted.

It lives in store/ because it needs nothing of bot/: `seen(platform, message_id) -> bool` is the whole
interface (bot/dedupe.py's `Seen` protocol), and the defaults below are bot/dedupe.py's.
"""

from __future__ import annotations

import threading

from store.postgres.pool import SyncDatabase

KEEP_DAYS = 7  # as bot/dedupe.py: platforms redeliver within minutes (Slack) or a day (Telegram)
KEEP_ROWS = 200_000
PRUNE_EVERY = 1_000


class PgSeen:
    """Which platform messages were taken already, kept in the database for every process on it."""

    def __init__(self, db: SyncDatabase, keep_days: float = KEEP_DAYS, keep_rows: int = KEEP_ROWS,
                 prune_every: int = PRUNE_EVERY) -> None:
        self.db = db
        self.keep_seconds = keep_days * 86400
        self.keep_rows = keep_rows
        self.prune_every = prune_every
        self._since_prune: int | None = None  # None: not pruned yet by this process
        self._lock = threading.Lock()

    def seen(self, platform: str, message_id: str) -> bool:
        """Record `message_id` of `platform` as taken; True if it had been taken before (by any process)."""
        if self._since_prune is None:
            self.prune()
        with self.db.transaction() as conn:
            inserted = conn.execute("INSERT INTO seen (platform, id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                                    (platform, message_id)).rowcount
        if not inserted:
            return True
        with self._lock:
            self._since_prune = (self._since_prune or 0) + 1
            due = self._since_prune >= self.prune_every
        if due:
            self.prune()
        return False

    def prune(self) -> int:
        """Drop the ids past their days and past the row cap; how many went."""
        with self._lock:
            self._since_prune = 0
        with self.db.transaction() as conn:
            old = conn.execute("DELETE FROM seen WHERE at < now() - make_interval(secs => %s)",
                               (self.keep_seconds,)).rowcount
            over = conn.execute("DELETE FROM seen WHERE n <= (SELECT max(n) FROM seen) - %s",
                                (self.keep_rows,)).rowcount
        return old + over

    def close(self) -> None:
        """Nothing of its own to close: the pool is the caller's."""
