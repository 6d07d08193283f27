"""The schedules in PostgreSQL (TUSK_DATABASE_URL): bot/schedules/store.py's `ScheduleStore` with rows of
`schedules` (store/postgres/schema/0006_schedules.sql) instead of reminders.json.

    store = PgScheduleStore(db)      # db: store.postgres.pool.SyncDatabase, its schema current
    store.load()                     # every schedule, in the order they were added
    store.add / update / remove      # one row each, committed at once
    store.claim(schedule, due)       # one UPDATE ... WHERE due = <the due read>: True for the one process
                                     # whose update found it unchanged (a run starts at most once)
    store.record_run(id, run, soon)  # the run's outcome put into the row (soon: at the next flush)
    with store.batch(): ...          # the changes made inside committed together, in one transaction

A row keeps what a line of reminders.json keeps (`Schedule.to_record`, its last runs with their outcomes),
as json; the next run is also a column, `due`, so that the claim is a compare-and-set on it. Inside a batch
each write is a savepoint of the batch's transaction: one that fails (and is reported to the caller, who
may go on, as after a failed file write) leaves the others. Outcomes left for later (`soon=True`) are kept
in this process until `flush`, which writes them in one transaction; a kill before it leaves those runs
`fired`, as on files.

It lives in bot/ beside its file twin because its rows are `Schedule`s; store/ imports nothing of bot/.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Json

from bot.commands.base import Owned, counted
from bot.events import ChatKey
from bot.schedules.model import Run, Schedule
from store.postgres.pool import SyncDatabase

logger = logging.getLogger(__name__)

WHERE = "the database's schedules"


def _row(s: Schedule) -> tuple[Any, ...]:
    return s.id, s.key.channel, s.key.chat_id, s.due, Json(s.to_record())


class PgScheduleStore:
    """The schedules of every process on one database."""

    where = WHERE

    def __init__(self, db: SyncDatabase) -> None:
        self.db = db
        self._tx: psycopg.Connection | None = None  # the open batch's connection
        self._later: dict[str, list[Run]] = {}  # outcomes recorded with soon=True, until flush

    @contextlib.contextmanager
    def _writing(self) -> Iterator[psycopg.Connection]:
        """A connection to write one change on: a savepoint of the open batch, or a transaction of its own."""
        if self._tx is not None:
            with self._tx.transaction():
                yield self._tx
            return
        with self.db.transaction() as conn:
            yield conn

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        if self._tx is not None:  # nested: part of the open one
            yield
            return
        with self.db.transaction() as conn:
            self._tx = conn
            try:
                yield
            finally:
                self._tx = None

    def records(self) -> list[tuple[str, Any]]:
        """Every row's id and record as kept, readable or not (`tusk doctor` counts those that are not)."""
        with self.db.connection() as conn:
            return conn.execute("SELECT id, record FROM schedules ORDER BY n").fetchall()

    def load(self) -> list[Schedule]:
        with self.db.connection() as conn:
            rows = conn.execute("SELECT id, record FROM schedules ORDER BY n").fetchall()
        loaded = []
        for sid, rec in rows:
            try:
                loaded.append(Schedule.from_record(rec))
            except (ValueError, KeyError, TypeError) as exc:
                logger.error("%s: skipping schedule %s, which cannot be read (%s)", WHERE, sid, exc)
        return loaded

    def add(self, schedule: Schedule) -> None:
        with self._writing() as conn:
            conn.execute("INSERT INTO schedules (id, channel, chat_id, due, record) VALUES (%s, %s, %s, %s, %s) "
                         "ON CONFLICT (id) DO UPDATE SET channel = excluded.channel, chat_id = excluded.chat_id, "
                         "due = excluded.due, record = excluded.record", _row(schedule))

    def update(self, schedule: Schedule) -> None:
        sid, channel, chat_id, due, record = _row(schedule)
        with self._writing() as conn:
            conn.execute("UPDATE schedules SET channel = %s, chat_id = %s, due = %s, record = %s WHERE id = %s",
                         (channel, chat_id, due, record, sid))

    def remove(self, schedule_id: str) -> None:
        self._later.pop(schedule_id, None)
        with self._writing() as conn:
            conn.execute("DELETE FROM schedules WHERE id = %s", (schedule_id,))

    def claim(self, schedule: Schedule, due: datetime) -> bool:
        sid, channel, chat_id, new_due, record = _row(schedule)
        with self._writing() as conn:
            moved = conn.execute("UPDATE schedules SET channel = %s, chat_id = %s, due = %s, record = %s "
                                 "WHERE id = %s AND due = %s", (channel, chat_id, new_due, record, sid, due))
            return moved.rowcount == 1

    def record_run(self, schedule_id: str, run: Run, soon: bool = False) -> None:
        self._later.setdefault(schedule_id, []).append(run)
        if not soon:
            self.flush()

    def flush(self) -> None:
        """Write the outcomes kept for later, in one transaction (a row gone meanwhile takes none)."""
        if not self._later or self._tx is not None:
            return
        later, self._later = self._later, {}
        try:
            with self.db.transaction() as conn:
                for sid, runs in later.items():
                    row = conn.execute("SELECT record FROM schedules WHERE id = %s FOR UPDATE", (sid,)).fetchone()
                    if row is None:
                        continue
                    stored = Schedule.from_record(row[0])
                    for run in runs:
                        stored = stored.with_run(run)
                    conn.execute("UPDATE schedules SET record = %s WHERE id = %s", (Json(stored.to_record()), sid))
        except BaseException:
            for sid, runs in later.items():  # kept for the next flush
                self._later.setdefault(sid, [])[:0] = runs
            raise


class PgSavedSchedules:
    """The database's schedules as /forget sees them without a running Tusk (`tusk forget`)."""

    def __init__(self, db: SyncDatabase) -> None:
        self.db = db

    def owned(self, key: ChatKey) -> list[Owned]:
        args = (key.channel, key.chat_id)
        with self.db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM schedules WHERE channel = %s AND chat_id = %s",
                               args).fetchone()
        assert row is not None  # count(*) gives one row
        count = row[0]
        if not count:
            return []

        def delete() -> None:
            with self.db.transaction() as conn:
                conn.execute("DELETE FROM schedules WHERE channel = %s AND chat_id = %s", args)

        return [Owned(f"{counted(count, 'reminder or schedule', 'reminders and schedules')} "
                      f"(removed from {WHERE})", delete)]
