"""The connection pool (psycopg_pool's `AsyncConnectionPool`) and the one place psycopg's connection errors
become the store's: a database that is down, restarting or unreachable is `StorageUnavailable` (the
caller may try again: a turn answers "storage unavailable, try again", HTTP 503); one that cannot be
used as configured (bad host, refused password, no such database) is `StoreSetupError`, one line that
names TUSK_DATABASE_URL and never its password.

    db = Database(url)
    await db.open()                      # the first connection made at once: a bad setting fails here
    async with db.transaction() as conn: # one transaction: committed whole, or rolled back
        await conn.execute(...)
    await db.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from store.errors import StorageUnavailable, StoreSetupError
from store.postgres.url import SETTING, check, redact

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5  # seconds a new connection may take before the database counts as unreachable
WAIT = 10.0  # seconds a caller waits for a pooled connection before StorageUnavailable
WAIT_WHILE_DOWN = 1.0  # the same for a synchronous caller (it holds the event loop) once a connection failed
REVIVE = 0.5  # seconds between new connections tried while the database is down


def setup_error(url: str, exc: BaseException) -> StoreSetupError | StorageUnavailable:
    """What a failed first connection means, in one line without the password."""
    text = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    where = redact(url)
    lowered = text.lower()
    if "password authentication failed" in lowered or "no password supplied" in lowered:
        return StoreSetupError(f"{SETTING}: the database refused the login ({where}): check the user and password")
    if "does not exist" in lowered and "database" in lowered:
        return StoreSetupError(f"{SETTING}: {text} ({where}): create it (createdb) or fix the name")
    if "could not translate host name" in lowered or "name or service not known" in lowered:
        return StoreSetupError(f"{SETTING}: host not found ({where}): check the host name")
    if "permission denied" in lowered or "not permitted" in lowered:
        return StoreSetupError(f"{SETTING}: {text} ({where}): grant the role access to the database")
    return StorageUnavailable(f"{SETTING}: the database does not answer ({where}): {text}; "
                              "is PostgreSQL running there?")


def _connection_lost(exc: psycopg.OperationalError) -> bool:
    """Whether the error means the connection or the server went (not a statement refused on a live one)."""
    state = exc.sqlstate or ""
    # 08: connection exceptions; 57P: the server shutting down or restarting; 53: out of resources; none: the
    # client lost the socket before any answer
    return not state or state.startswith(("08", "57P", "53"))


@contextlib.contextmanager
def outage(where: str) -> Iterator[None]:
    """A lost connection or a database that does not answer, inside the block, as StorageUnavailable."""
    try:
        yield
    except PoolTimeout as exc:
        raise StorageUnavailable(f"the database does not answer ({where})") from exc
    except psycopg.OperationalError as exc:
        if not _connection_lost(exc):  # a statement the server refused (a limit): a bug to see, not an outage
            raise
        raise StorageUnavailable(f"the database connection was lost ({where}): {exc}".strip()) from exc


class Database:
    """The pool gives up a new connection that failed at once (so a caller hears StorageUnavailable within
    WAIT); while the database is down a new one is tried every REVIVE s, so the callers waiting for one get
    it as soon as the database is back, not when their WAIT ends."""

    def __init__(self, url: str, min_size: int = 1, max_size: int = 10, name: str = "tusk") -> None:
        self.url = check(url)
        self.where = redact(url)
        self.down = False  # the last new connection failed
        self._reviving: asyncio.Task[None] | None = None
        self.pool = AsyncConnectionPool(url, min_size=min_size, max_size=max_size, open=False, name=name,
                                        timeout=WAIT, kwargs={"connect_timeout": CONNECT_TIMEOUT,
                                                              "application_name": name},
                                        check=AsyncConnectionPool.check_connection, reconnect_timeout=0,
                                        configure=self._connected, reconnect_failed=self._failed)

    async def _connected(self, conn: psycopg.AsyncConnection) -> None:
        self.down = False

    def _failed(self, pool: object) -> None:
        self.down = True
        if self._reviving is None or self._reviving.done():
            self._reviving = asyncio.get_running_loop().create_task(self._revive(), name=f"{self.pool.name} revive")

    async def _revive(self) -> None:
        while self.down:
            await asyncio.sleep(REVIVE)
            try:
                await self.pool.check()  # (a pool without an idle connection grows: one new connection tried)
            except Exception as exc:  # a pool closing under it; the next failure starts this again
                logger.debug("could not try a new connection: %s", exc)
                return

    async def open(self) -> None:
        """Connect once directly (so a wrong setting is told precisely), then open the pool."""
        try:
            conn = await psycopg.AsyncConnection.connect(self.url, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error as exc:
            raise setup_error(self.url, exc) from None
        await conn.close()
        await self.pool.open(wait=False)

    async def close(self) -> None:
        if self._reviving is not None:
            self._reviving.cancel()
        await self.pool.close()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled connection (autocommit off: use `transaction` to write)."""
        with outage(self.where):
            async with self.pool.connection() as conn:
                yield conn

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """One transaction on a pooled connection: committed when the block ends, rolled back if it raises."""
        async with self.connection() as conn:
            async with conn.transaction():
                yield conn

    async def ready(self) -> bool:
        """Whether the database answers now (/readyz)."""
        try:
            async with self.connection() as conn:
                await conn.execute("SELECT 1")
            return True
        except StorageUnavailable:
            return False


class SyncDatabase:
    """The same database for the small shared stores whose callers are synchronous (the usage ledger, the
    pairing and API-key documents, what was learned about models, the schedules, the ingress's queueing):
    each call is one short statement on a pooled connection, bounded by CONNECT_TIMEOUT; errors as
    `Database`'s. Its callers hold the event loop, so once a new connection failed (the database is down)
    a caller waits at most WAIT_WHILE_DOWN for one, not WAIT, until a connection is made again."""

    def __init__(self, url: str, max_size: int = 4, name: str = "tusk-shared") -> None:
        from psycopg_pool import ConnectionPool

        self.url = check(url)
        self.where = redact(url)
        self.down = False  # the last new connection failed
        self.pool = ConnectionPool(url, min_size=0, max_size=max_size, open=False, name=name, timeout=WAIT,
                                   kwargs={"connect_timeout": CONNECT_TIMEOUT, "application_name": name},
                                   check=ConnectionPool.check_connection, reconnect_timeout=0,
                                   configure=self._connected, reconnect_failed=self._failed)
        self._opened = False

    def _connected(self, conn: psycopg.Connection) -> None:
        self.down = False

    def _failed(self, pool: object) -> None:
        self.down = True

    def _open(self) -> None:
        if not self._opened:
            self.pool.open(wait=False)
            self._opened = True

    def close(self) -> None:
        if self._opened:
            self.pool.close()
            self._opened = False

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        self._open()
        conn = self._get()
        try:
            with outage(self.where), conn:  # (a pooled connection's block commits or rolls back; it stays open)
                yield conn
        finally:
            self.pool.putconn(conn)

    def _get(self) -> psycopg.Connection:
        """A pooled connection, waited for up to WAIT, in steps of WAIT_WHILE_DOWN: once a new connection failed
        (the database is down) the caller hears so at the end of the step, not of WAIT."""
        deadline = time.monotonic() + WAIT
        while True:
            try:
                return self.pool.getconn(timeout=WAIT_WHILE_DOWN)
            except PoolTimeout as exc:
                if self.down or time.monotonic() >= deadline:
                    raise StorageUnavailable(f"the database does not answer ({self.where})") from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        with self.connection() as conn, conn.transaction():
            yield conn
