"""Where Tusk keeps what it knows: the store seam and its two backends.

    store/files/      today's files under $TUSK_HOME (the default: one process, nothing to install)
    store/postgres/   one PostgreSQL database (TUSK_DATABASE_URL): several processes on several machines

    store = open_store(home, database_url)   # files unless a database URL is given
    await store.start()                      # the database: connected, its schema brought up to date
    store.chats, store.search, store.doc("pairing.json")
    await store.close()

`memory/` holds the pure logic (what a session, a consolidation round, a fact is); this package holds
where it is kept. Nothing here imports `bot/` or `channels/`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from store.base import ChatSearch, ChatStore
from store.shared import SharedDoc


@dataclass
class Store:
    """One backend's parts, as bot/app.py hands them out."""

    kind: Literal["files", "postgres"]
    chats: ChatStore  # what each chat keeps
    search: ChatSearch  # search_history over it
    home: Path  # where the process keeps what is its own (the console token, logs; all of it for files)
    databases: tuple[Any, ...] = field(default=())  # the database's pools (postgres): `Database`, `SyncDatabase`

    def doc(self, name: str) -> SharedDoc:
        """A shared document (store/shared.py): pairing.json, api-keys.json, models.json, budgets.json."""
        if self.kind == "files":
            from store.files.shared import FileDoc

            return FileDoc(self.home, name)
        from store.postgres.shared import PgDoc

        return PgDoc(self.sync_db, name)

    @property
    def db(self) -> Any:
        """The database's async pool (postgres: `Database`); None on files."""
        return self.databases[0] if self.databases else None

    @property
    def sync_db(self) -> Any:
        """The database's sync pool (the shared stores whose callers are synchronous); None on files."""
        return self.databases[1] if self.databases else None

    async def start(self) -> None:
        """Connect and bring the schema up to date (under an advisory lock: once across processes); a setting
        that cannot work raises StoreSetupError naming TUSK_DATABASE_URL, a database that does not answer
        StorageUnavailable. Nothing to do on files."""
        if self.kind == "postgres":
            from store.postgres import migrations

            await self.db.open()
            await migrations.require_current(self.db)

    def prepare(self) -> None:
        """`start`'s work from synchronous code, before any event loop of the caller's runs it: the database
        reached and its schema brought up to date (in a thread of its own, on a connection of its own), so
        that the shared stores a constructor reads (models.json, budgets.json) find their tables. Errors as
        `start`'s. Nothing to do on files."""
        if self.kind != "postgres":
            return
        import concurrent.futures

        from store.postgres import migrations
        from store.postgres.pool import Database

        async def upgrade() -> None:
            db = Database(self.db.url, min_size=0, max_size=1, name="tusk-migrate")
            await db.open()
            try:
                await migrations.require_current(db)
            finally:
                await db.close()

        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own event loop, whoever's runs here
            pool.submit(asyncio.run, upgrade()).result()

    def close_sync(self) -> None:
        """Close what synchronous callers opened (the sync pool); for a store that `prepare` alone started."""
        if self.sync_db is not None:
            self.sync_db.close()

    async def close(self) -> None:
        for db in self.databases:
            result = db.close()
            if hasattr(result, "__await__"):
                await result


def open_files(home: Path) -> Store:
    """The files backend over `home` ($TUSK_HOME)."""
    from store.files.chats import FileChats
    from store.files.search import FileSearch

    return Store("files", FileChats(home), FileSearch(home), Path(home))


def open_store(home: Path, database_url: str | None = None) -> Store:
    """The database backend when `database_url` is given (TUSK_DATABASE_URL), else the files under `home`."""
    if not database_url:
        return open_files(home)
    from store.postgres.chats import PgChats
    from store.postgres.pool import Database, SyncDatabase

    from store.fence import check, claim

    db, sync_db = Database(database_url), SyncDatabase(database_url)
    return Store("postgres", PgChats(db, guard=check, claim=claim), _pg_search(db), Path(home), (db, sync_db))


@contextlib.asynccontextmanager
async def opened(home: Path, database_url: str | None = None) -> AsyncIterator[Store]:
    """`open_store`, started, and closed when the block ends (for a command that runs and exits)."""
    store = open_store(home, database_url)
    try:
        await store.start()
        yield store
    finally:
        await store.close()


@contextlib.contextmanager
def prepared(home: Path, database_url: str | None = None) -> Iterator[Store]:
    """`open_store`, prepared (the schema current) for synchronous callers (`tusk usage`, `tusk budget`, the
    doctor), and its sync pool closed when the block ends."""
    store = open_store(home, database_url)
    try:
        store.prepare()
        yield store
    finally:
        store.close_sync()


def _pg_search(db: Any) -> ChatSearch:
    from store.postgres.search import PgSearch

    return PgSearch(db)
