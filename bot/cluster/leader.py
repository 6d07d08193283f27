"""Duties one process of the cluster holds at a time: whoever holds a PostgreSQL session advisory lock on a
connection of its own. PostgreSQL lets go of it with the connection, so when the holder dies another process
takes over at its next try (within TRY seconds).

    PERIODIC   the consolidation sweep, the check-ins, the daily backup (processes that run turns contend)
    POLLING    Telegram's long polling: Telegram answers one getUpdates at a time (processes that take
               platform traffic contend; with a webhook every ingress takes updates and none polls)

    leader = Leader(url, PERIODIC)
    await leader.start()
    if leader.held: ...        # a periodic job asks at each run
    Leader(url, POLLING, gained=start_polling, lost=stop_polling)   # or be told
    await leader.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import psycopg

from bot.threads import Spawned
from store.postgres.pool import CONNECT_TIMEOUT

logger = logging.getLogger(__name__)

PERIODIC, POLLING = 1, 2  # the second key of each duty's lock (the first is "tusk")
NAMES = {PERIODIC: "the cluster's periodic duties", POLLING: "Telegram's long polling"}
TRY = 5.0  # seconds between tries of a process that does not lead
Hook = Callable[[], Awaitable[object]]


class Leader:
    def __init__(self, url: str, duty: int = PERIODIC, gained: Hook | None = None, lost: Hook | None = None) -> None:
        self.url, self.duty, self.gained, self.lost = url, duty, gained, lost
        self.held = False
        self._conn: psycopg.AsyncConnection | None = None
        self._holding = Spawned()

    async def start(self) -> None:
        self._holding.start(self._hold(), NAMES[self.duty])

    async def stop(self) -> None:
        await self._holding.cancel()
        await self._drop()

    async def _drop(self) -> None:
        if self.held and self.lost is not None:
            with contextlib.suppress(Exception):  # the duty stops as well as it can; the lock goes anyway
                await self.lost()
        self.held = False
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
            self._conn = None

    async def _begin(self) -> None:
        """The duty started; one that cannot start lets the lock go (another process, or a later try, may)."""
        if self.gained is None:
            return
        try:
            await self.gained()
        except Exception:  # a duty's failure to start: logged, and the lock let go
            logger.exception("could not start %s; letting another process take it", NAMES[self.duty])
            await self._drop()

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
                    row = await (await self._conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                                          (0x7475736B, self.duty))).fetchone()
                    self.held = bool(row and row[0])
                    if self.held:
                        logger.info("this process now holds %s", NAMES[self.duty])
                        await self._begin()
            except psycopg.Error:
                if self.held:
                    logger.warning("lost the connection that held %s; trying again", NAMES[self.duty])
                await self._drop()
            await asyncio.sleep(TRY)
