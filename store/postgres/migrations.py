"""The database's schema, versioned: `schema/NNNN_name.sql` applied in order, each in its own
transaction, recorded in `tusk_schema` (version, name, when). At start (and by `tusk db upgrade`) the
missing ones are applied under a transaction-level advisory lock, so two processes starting together
apply each once: the second waits for the first, then finds nothing left to do. A database whose schema
is newer than this Tusk knows is refused (`SchemaTooNew`) and never altered.

A migration's file is plain SQL; `procrastinate` (the job queue of several processes, docs: Scaling out)
is the one migration made in code: the job queue's own schema, as the installed procrastinate ships it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import psycopg

from store.errors import SchemaTooNew
from store.postgres.pool import Database

LOCK = 0x7475736B_6D6967  # pg_advisory_xact_lock key: "tuskmig"
FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: Callable[[], str]


def _procrastinate_schema() -> str:
    from procrastinate.schema import SchemaManager

    return SchemaManager.get_schema()


def known() -> list[Migration]:
    """Every migration this Tusk ships, in order."""
    found = []
    for entry in resources.files("store.postgres.schema").iterdir():
        if match := FILE.match(entry.name):
            found.append(Migration(int(match[1]), match[2], entry.read_text))
    found.sort(key=lambda m: m.version)
    return found


@dataclass(frozen=True, slots=True)
class Status:
    current: int  # 0: an empty database
    latest: int
    pending: tuple[Migration, ...]

    @property
    def too_new(self) -> bool:
        return self.current > self.latest


async def _current(conn: psycopg.AsyncConnection) -> int:
    exists = await (await conn.execute("SELECT to_regclass('tusk_schema') IS NOT NULL")).fetchone()
    if not exists or not exists[0]:
        return 0
    row = await (await conn.execute("SELECT coalesce(max(version), 0) FROM tusk_schema")).fetchone()
    return int(row[0]) if row else 0


async def status(db: Database) -> Status:
    migrations = known()
    async with db.connection() as conn:
        current = await _current(conn)
    return Status(current, migrations[-1].version, tuple(m for m in migrations if m.version > current))


def _refuse(current: int, latest: int) -> SchemaTooNew:
    return SchemaTooNew(f"the database's schema is version {current}, newer than this Tusk knows ({latest}): "
                        "it was upgraded by a newer Tusk. Upgrade this Tusk (pip install -U) instead; "
                        "the database was left as it is.")


async def upgrade(db: Database) -> list[Migration]:
    """Apply the missing migrations (under the advisory lock); returns those this call applied."""
    applied: list[Migration] = []
    migrations = known()
    latest = migrations[-1].version
    for migration in migrations:
        async with db.transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK,))
            await conn.execute("CREATE TABLE IF NOT EXISTS tusk_schema (version integer PRIMARY KEY, "
                               "name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())")
            current = await _current(conn)
            if current > latest:
                raise _refuse(current, latest)
            if migration.version <= current:
                continue
            sql = _procrastinate_schema() if migration.name == "procrastinate" else migration.sql()
            await conn.execute(sql.encode())  # several statements: the simple query protocol, no parameters
            await conn.execute("INSERT INTO tusk_schema (version, name) VALUES (%s, %s)",
                               (migration.version, migration.name))
            applied.append(migration)
    return applied


async def require_current(db: Database) -> None:
    """At start: apply what is missing, refuse a newer schema (SchemaTooNew)."""
    state = await status(db)
    if state.too_new:
        raise _refuse(state.current, state.latest)
    await upgrade(db)
