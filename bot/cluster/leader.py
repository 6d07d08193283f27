"""Duties one process of the cluster holds at a time (the consolidation sweep, the daily backup): whoever holds
a PostgreSQL session advisory lock on a connection of its own. PostgreSQL lets go of it with the connection,
so when the leader dies another process takes over at its next try (within TRY seconds).

    leader = Leader(url)
    await leader.start()
    if leader.held: ...        # the duty's periodic job asks at each run
    await leader.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg

from store.postgres.pool import CONNECT_TIMEOUT

logger = logging.getLogger(__name__)

LOCK = (0x7475736B, 1)  # ("tusk", the leader)
TRY = 5.0  # seconds between tries of a process that does not lead


class Leader:
    def __init__(self, url: str) -> None:
        self.url = url
        self.held = False
        self._conn: psycopg.AsyncConnection | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._hold(), name="leader")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._drop()

    async def _drop(self) -> None:
        self.held = False
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
            self._conn = None

    async def _hold(self) -> None:
        while True:
            try:
                if self._conn is None or self._conn.closed or self._conn.broken:
                    await self._drop()
                    self._conn = await psycopg.AsyncConnection.connect(
                        self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT, application_name="tusk-leader")
                if self.held:
                    await self._conn.execute("SELECT 1")  # still connected: still holding
                else:
                    row = await (await self._conn.execute("SELECT pg_try_advisory_lock(%s, %s)", LOCK)).fetchone()
                    self.held = bool(row and row[0])
                    if self.held:
                        logger.info("this process now leads the cluster's periodic duties")
            except psycopg.Error:
                if self.held:
                    logger.warning("lost the connection that held the cluster's lead; trying again")
                await self._drop()
            await asyncio.sleep(TRY)
