"""`tusk db status` and `tusk db upgrade`: the database's schema (store/postgres/migrations.py).

    tusk db status     which store, the schema's version against this Tusk's, the migrations still to apply
    tusk db upgrade    apply them (a running Tusk applies them at its start as well, under the same lock)

Without TUSK_DATABASE_URL there is no database: both say where the files are instead. A setting that
cannot work, or a database that does not answer, is one line (exit 2 and 1); a database of a newer schema
is refused and left as it is.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from store.errors import SchemaTooNew


async def _run(action: str, url: str) -> str:
    from store.postgres import migrations
    from store.postgres.pool import Database
    from store.postgres.url import redact

    db = Database(url, max_size=2, name="tusk-db")
    await db.open()
    try:
        if action == "upgrade":
            before = await migrations.status(db)
            if before.too_new:
                raise SchemaTooNew(f"the database's schema is version {before.current}, newer than this Tusk "
                                   f"knows ({before.latest}): upgrade Tusk instead; the database was left as it is")
            applied = await migrations.upgrade(db)
            names = ", ".join(f"{m.version:04d} {m.name}" for m in applied)
            return (f"Applied {len(applied)} migration(s) to {redact(url)}: {names}." if applied
                    else f"{redact(url)} is up to date (schema version {before.current}).")
        state = await migrations.status(db)
        lines = [f"Store: PostgreSQL at {redact(url)}",
                 f"Schema: version {state.current}; this Tusk knows up to {state.latest}"]
        if state.too_new:
            lines.append("The database was upgraded by a newer Tusk: upgrade this Tusk (it will not change it).")
        elif state.pending:
            lines.append("To apply (`tusk db upgrade`, or the next start): "
                         + ", ".join(f"{m.version:04d} {m.name}" for m in state.pending))
        else:
            lines.append("Up to date.")
        return "\n".join(lines)
    finally:
        await db.close()


def text(action: str, settings: Any) -> str:
    """What `tusk db <action>` prints; StoreSetupError and StorageUnavailable for bot/ops/cli.py to map."""
    if settings.database_url is None:
        return (f"Tusk keeps its data in files under {settings.home} (TUSK_DATABASE_URL is not set): "
                "there is no database schema to " + ("upgrade." if action == "upgrade" else "show."))
    return asyncio.run(_run(action, settings.database_url.get_secret_value()))


def command(args: argparse.Namespace, settings: Any) -> int:
    print(text(args.action, settings))
    return 0
