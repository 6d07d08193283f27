"""The inbox journal in PostgreSQL (TUSK_DATABASE_URL): bot/inbox.py's `Inbox` with rows of `inbox`
(store/postgres/schema/0007_inbox.sql) instead of inbox.jsonl, for the bus (bot/bus.py's `Journal`).

    inbox = PgInbox(db)          # db: store.postgres.pool.SyncDatabase, its schema current
    inbox.record(msg)            # a committed row before the platform is acknowledged: survives kill -9
    inbox.done(msg)              # the turn ended: the row is deleted (its text does not linger)
    inbox.take_pending(held, channels)   # at start: the rows a dead process left, for these channels

Whose turn is open: every process that records holds a session advisory lock (INBOX_LOCK, run) on a
connection of its own for as long as it lives, and stamps its rows with its `run`. PostgreSQL drops the
lock with the connection, so when a process is killed its rows have a run whose lock is free: a crash's
leftovers. `take_pending` takes exactly those (never the open turns of another live Tusk on the same
database), re-stamps them with its own run in one transaction (`FOR UPDATE SKIP LOCKED`: two Tusks starting
together never both take a row), and returns them oldest first, with new ids; `record` does not write them
again when they are published. Rows of channels this Tusk does not serve stay as they were for one that
does. The claim on the home (`held`) must still be held, as the files backend asks.

It lives in bot/ beside inbox.py because its rows are `InboundMessage`s (bot/events.py) and /forget's
`Owned` (bot/commands/base.py); store/ imports nothing of bot/.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Collection, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Json

from bot.cluster.wire import ANSWERING
from bot.commands.base import CommandContext, Owned, counted
from bot.events import ChatKey, InboundMessage
from bot.inbox import message_of, record_of
from bot.running import Claim
from memory.session import Message
from store.errors import StorageUnavailable
from store.postgres.pool import CONNECT_TIMEOUT, SyncDatabase, setup_error

logger = logging.getLogger(__name__)

INBOX_LOCK = 0x7475736B  # the advisory lock's first key ("tusk"); the second is the run


def _one(row: tuple[Any, ...] | None) -> Any:
    """The one value of a query that always returns one row (a count, a lock's answer)."""
    assert row is not None
    return row[0]


class PgInbox:
    """The journal of every process on one database; each instance is one run (one process's turns)."""

    where = "the database's inbox"

    def __init__(self, db: SyncDatabase) -> None:
        self.db = db
        self.run = 0  # set with the lock, on first use
        self._lock_conn: psycopg.Connection | None = None
        self._guard = threading.Lock()
        self._open: set[int] = set()  # ids of this run's messages recorded and not done
        self._written: set[int] = set()  # replayed messages take_pending already stamped with this run

    # -- this run's lock -------------------------------------------------------------------------

    def _hold_run(self) -> psycopg.Connection:
        """The connection holding this run's lock (made, or made again after it was lost, same run)."""
        with self._guard:
            conn = self._lock_conn
            if conn is not None and not conn.closed and not conn.broken:
                return conn
            try:
                conn = psycopg.Connection.connect(self.db.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                                                  application_name="tusk-inbox")
                self.run = self._lock_run(conn)
            except psycopg.Error as exc:
                raise setup_error(self.db.url, exc) from None
            self._lock_conn = conn
            return conn

    def _lock_run(self, conn: psycopg.Connection) -> int:
        """This run's lock taken on `conn`: a new random run, or the one this instance had (its rows carry it)."""
        while True:
            run = self.run or secrets.randbelow(2**31 - 1) + 1
            if _one(conn.execute("SELECT pg_try_advisory_lock(%s::int, %s::int)", (INBOX_LOCK, run)).fetchone()):
                return run
            if self.run:  # ours went with a lost connection, and another Tusk is taking our rows as leftovers
                conn.close()
                raise StorageUnavailable(f"{self.where}: this process's open turns were taken over by another Tusk")

    def close(self) -> None:
        """Let go of this run (its rows left unanswered become a crash's leftovers)."""
        with self._guard:
            if self._lock_conn is not None:
                self._lock_conn.close()
                self._lock_conn = None

    # -- the journal -----------------------------------------------------------------------------

    def record(self, msg: InboundMessage) -> None:
        """One committed row for `msg` (with this run's lock held first, so it is never taken as a leftover)."""
        self._open.add(msg.id)
        if msg.id in self._written:
            self._written.discard(msg.id)
            return
        self._hold_run()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO inbox (run, seq, channel, chat_id, sender_id, record) "
                         "VALUES (%s, %s, %s, %s, %s, %s)",
                         (self.run, msg.id, msg.key.channel, msg.key.chat_id, msg.sender_id, Json(record_of(msg))))

    def done(self, msg: InboundMessage) -> None:
        if msg.id not in self._open:
            return
        self._open.discard(msg.id)
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM inbox WHERE run = %s AND seq = %s", (self.run, msg.id))

    def take_pending(self, held: Claim, channels: Collection[str] | None = None) -> list[InboundMessage]:
        """The messages whose turn a dead process left, of `channels` (None: all), oldest first, with new ids."""
        if not held.held:
            raise PermissionError(f"{self.where}: open turns are taken only by a Tusk holding its home's lock")
        lock = self._hold_run()
        runs = [r for (r,) in lock.execute("SELECT DISTINCT run FROM inbox WHERE run <> %s", (self.run,))]
        dead = [r for r in runs
                if _one(lock.execute("SELECT pg_try_advisory_lock(%s::int, %s::int)", (INBOX_LOCK, r)).fetchone())]
        try:
            messages, later = self._take(dead, channels)
        finally:
            for r in dead:
                lock.execute("SELECT pg_advisory_unlock(%s::int, %s::int)", (INBOX_LOCK, r))
        self._written = {m.id for m in messages}
        if later:
            logger.warning("%d message(s) cut short by a crash wait for a Tusk that serves %s (`tusk run`)",
                           sum(later.values()), ", ".join(sorted(later)))
        return messages

    def _take(self, dead: list[int], channels: Collection[str] | None) -> tuple[list[InboundMessage], dict[str, int]]:
        """Within one transaction: the dead runs' rows of `channels` re-stamped with this run, and how many of
        other channels are left (by channel)."""
        wanted = None if channels is None else list(channels)
        messages: list[InboundMessage] = []
        with self.db.transaction() as conn:
            rows = conn.execute("SELECT id, record FROM inbox WHERE run = ANY(%s) AND (%s::text[] IS NULL OR "
                                "channel = ANY(%s)) ORDER BY id FOR UPDATE SKIP LOCKED", (dead, wanted, wanted))
            taken, unreadable = [], []
            for row_id, rec in rows.fetchall():
                try:
                    msg = message_of(rec)
                except (ValueError, TypeError, KeyError) as exc:
                    logger.error("%s: cannot replay a message (%s)", self.where, exc)
                    unreadable.append(row_id)
                    continue
                messages.append(msg)
                taken.append((row_id, msg.id))
            conn.execute("DELETE FROM inbox WHERE id = ANY(%s)", (unreadable,))
            conn.execute("UPDATE inbox AS i SET run = %s, seq = m.seq FROM unnest(%s::bigint[], %s::bigint[]) "
                         "AS m(id, seq) WHERE i.id = m.id",
                         (self.run, [t[0] for t in taken], [t[1] for t in taken]))
            later = {} if wanted is None else dict(conn.execute(
                "SELECT channel, count(*) FROM inbox WHERE run = ANY(%s) AND NOT (channel = ANY(%s)) GROUP BY channel",
                (dead, wanted)).fetchall())
        return messages, later

    # -- /forget ---------------------------------------------------------------------------------

    def owned(self, key: ChatKey) -> list[Owned]:
        """For /forget (and `tusk forget`): every row of this chat, waiting or being answered now."""
        with self.db.connection() as conn:
            rows = [(run, seq, rec.get("text") if isinstance(rec, dict) else None) for run, seq, rec in conn.execute(
                "SELECT run, seq, record FROM inbox WHERE channel = %s AND chat_id = %s AND id IS DISTINCT FROM %s",
                (key.channel, key.chat_id, ANSWERING.get()))]
        if not rows:
            return []
        running = {(run, seq) for run, seq, _ in rows if run == self.run and seq in self._open}
        # only commands (never saved anywhere else) and turns still running, such as this /forget itself
        quiet = all((run, seq) in running or str(text or "").startswith("/") for run, seq, text in rows)
        waiting = sum(run != self.run for run, _, _ in rows)
        if waiting == len(rows):
            label = f"{counted(len(rows), 'message')} waiting to be answered after a crash ({self.where})"
        else:
            label = f"{counted(len(rows), 'message')} in the inbox journal ({self.where})" + (
                f", {waiting} of them waiting to be answered after a crash" if waiting else "")

        def delete() -> None:
            with self.db.transaction() as conn:
                gone = conn.execute("DELETE FROM inbox WHERE channel = %s AND chat_id = %s RETURNING run, seq",
                                    (key.channel, key.chat_id)).fetchall()
            self._open -= {seq for run, seq in gone if run == self.run}  # their turns end with nothing to delete

        return [Owned(label, delete, quiet=quiet)]

    def members(self) -> PgInboxMembers:
        """/forget me and /forget @name: a member's rows of a chat (bot/commands/erasure.py's `MemberHolder`)."""
        return PgInboxMembers(self)


class PgInboxMembers:
    """A member's messages in the database's inbox (as `InboxMembers` does for inbox.jsonl)."""

    def __init__(self, inbox: PgInbox) -> None:
        self.inbox = inbox

    async def owned_by(self, ctx: CommandContext, messages: Sequence[Message], member_id: str) -> list[Owned]:
        key, db = ctx.key, self.inbox.db
        where = "channel = %s AND chat_id = %s AND sender_id = %s"
        args: tuple[Any, ...] = (key.channel, key.chat_id, member_id)
        with db.connection() as conn:
            count = _one(conn.execute(f"SELECT count(*) FROM inbox WHERE {where}", args).fetchone())
        if not count:
            return []

        def delete() -> None:
            with db.transaction() as conn:
                conn.execute(f"DELETE FROM inbox WHERE {where}", args)

        return [Owned(f"{count} {'message' if count == 1 else 'messages'} of theirs from the journal "
                      f"({self.inbox.where})", delete)]
