"""Which Tusk processes serve this database, for `tusk status` (bot/ops/status.py): a `processes` row per
process (store/postgres/schema/0010_processes.sql), its heartbeat kept by the process itself.

    processes = Processes(db, "worker", in_flight=lambda: turns.running, url="http://10.0.0.5:8765")
    await processes.start()        # the row written, then a beat every `beat_every` seconds
    ...
    await processes.stop()         # the row deleted
    rows = await listing(db)       # every row, the stale ones (a process that died) marked

A beat sets the row's heartbeat to the database's clock (machines' clocks never compared) and its turns in
flight, and deletes the rows of processes dead for an hour (PRUNE_AFTER). A row is stale once its heartbeat is
older than STALE_BEATS of its own beats: the process died (`kill -9`, a machine lost) or is paused. A process
whose row was pruned meanwhile (paused for an hour, then resumed) writes it again at its next beat. A beat that
fails (the database restarting) is logged once and tried again at the next; the process goes on meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import psycopg

from bot.version import installed
from store.errors import StorageUnavailable
from store.postgres.pool import Database

logger = logging.getLogger(__name__)

STALE_BEATS = 3  # a row whose heartbeat is older than this many of its beats is stale
PRUNE_AFTER = 3600.0  # seconds after its last heartbeat a dead process's row is deleted

_INSERT = ("INSERT INTO processes (role, host, pid, version, url, started, beat_seconds, in_flight) "
           "VALUES (%s, %s, %s, %s, %s, coalesce(%s, now()), %s, %s) RETURNING id, started")
_BEAT = "UPDATE processes SET heartbeat = now(), in_flight = %s WHERE id = %s RETURNING id"
_PRUNE = "DELETE FROM processes WHERE heartbeat < now() - make_interval(secs => %s)"
_LIST = ("SELECT id, role, host, pid, version, url, started, extract(epoch FROM now() - heartbeat)::float8, "
         "beat_seconds, in_flight FROM processes ORDER BY role, host, pid, id")


@dataclass(frozen=True, slots=True)
class Process:
    """One row of `processes`, as `tusk status` shows it."""

    id: int
    role: str
    host: str
    pid: int
    version: str
    url: str | None
    started: datetime
    age: float  # seconds since its last heartbeat, by the database's clock
    beat_every: float
    in_flight: int

    @property
    def stale(self) -> bool:
        """No heartbeat for STALE_BEATS of its beats: it died, or is paused."""
        return self.age > STALE_BEATS * self.beat_every


async def listing(db: Database) -> list[Process]:
    """Every registered process, by role, host and pid (StorageUnavailable when the database does not answer)."""
    async with db.transaction() as conn:
        rows = await (await conn.execute(_LIST)).fetchall()
    return [Process(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5], r[6], max(0.0, float(r[7])), float(r[8]),
                    int(r[9])) for r in rows]


class Processes:
    """This process's row: written by `start`, kept alive by a heartbeat task, deleted by `stop`."""

    def __init__(self, db: Database, role: str, in_flight: Callable[[], int], url: str | None = None,
                 beat_every: float = 5.0, prune_after: float = PRUNE_AFTER) -> None:
        if beat_every <= 0:
            raise ValueError(f"beat_every must be positive, not {beat_every}")
        self.db = db
        self.role = role
        self.url = url
        self.beat_every = beat_every
        self.prune_after = prune_after
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.version = installed()
        self.id: int | None = None  # the row's id, once written
        self._in_flight = in_flight
        self._started: datetime | None = None  # the first row's start, kept if the row is written again
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    async def __aenter__(self) -> Processes:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Write this process's row (StorageUnavailable if the database does not answer), then beat."""
        if self._task is not None:
            return
        async with self.db.transaction() as conn:
            await self._register(conn)
            await conn.execute(_PRUNE, (self.prune_after,))
        logger.info("registered as process %d (%s) for `tusk status`", self.id, self.role)
        self._task = asyncio.create_task(self._beating(), name="tusk-heartbeat")

    async def beat(self) -> None:
        """One heartbeat: the row's heartbeat and turns in flight set (the row written again if it was pruned),
        and the rows of processes dead for `prune_after` seconds deleted."""
        async with self.db.transaction() as conn:
            found = None
            if self.id is not None:
                found = await (await conn.execute(_BEAT, (self._count(), self.id))).fetchone()
            if found is None:  # pruned while this process was paused, or deleted by hand: here again
                await self._register(conn)
            await conn.execute(_PRUNE, (self.prune_after,))

    async def stop(self) -> None:
        """Stop beating and delete the row; if the database does not answer, the row goes stale and is pruned."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.id is None:
            return
        try:
            async with self.db.transaction() as conn:
                await conn.execute("DELETE FROM processes WHERE id = %s", (self.id,))
        except (StorageUnavailable, psycopg.Error) as exc:
            logger.warning("could not remove this process's row %d (%s): it shows as stale in `tusk status` "
                           "until pruned", self.id, exc)
        self.id = None

    def _count(self) -> int:
        return max(0, int(self._in_flight()))

    async def _register(self, conn: psycopg.AsyncConnection) -> None:
        row = await (await conn.execute(_INSERT, (self.role, self.host, self.pid, self.version, self.url,
                                                  self._started, self.beat_every, self._count()))).fetchone()
        assert row is not None  # INSERT ... RETURNING gives its row
        self.id, self._started = int(row[0]), row[1]

    async def _beating(self) -> None:
        while True:
            await asyncio.sleep(self.beat_every)
            try:
                await self.beat()
            except (StorageUnavailable, psycopg.Error) as exc:  # the loop's boundary: the next beat tries again
                if not self._failing:
                    logger.warning("heartbeat failed (%s): trying again every %g s", exc, self.beat_every)
                self._failing = True
            except Exception:  # a bug: told with its traceback, and the next beat tries again
                logger.exception("heartbeat failed")
            else:
                if self._failing:
                    logger.info("heartbeat written again")
                self._failing = False
