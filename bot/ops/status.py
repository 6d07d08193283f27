"""`tusk status`: which Tusk processes run.

    tusk status            on PostgreSQL: every process registered on the database (bot/cluster/processes.py):
                           role, host, pid, version, last heartbeat, turns in flight, where it listens; a process
                           that stopped beating (died, or paused) marked STALE
                           on files: whether a Tusk runs on this home (its lock's record, bot/running.py)
    tusk status --json     the same as one JSON object, for scripts

It only reads: nothing is migrated or written. Exit codes as every admin command's: 0 with the answer (also
when nothing runs), 2 for a database setting that cannot work, 1 when the database does not answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # psycopg is the postgres extra's: imported only on PostgreSQL
    from bot.cluster.processes import Process


def command(args: argparse.Namespace, settings: Any) -> int:
    url = settings.store_url()
    print(database(url, args.json) if url is not None else home(settings.home, args.json))
    return 0


# -- files: the home's lock --------------------------------------------------------------------------------
def home(path: Path, as_json: bool) -> str:
    """Whether a Tusk runs on the home at `path`, as its lock and record say."""
    from bot import running

    there = running.holder(path)
    where = path.absolute()
    if as_json:
        return json.dumps({"store": "files", "home": str(where), "running": there is not None and there.engine,
                           "pid": there.pid if there else None, "command": there.command if there else None,
                           "url": there.url if there else None})
    if there is None:
        return f"No Tusk is running on this home ({where})."
    if there.command and not there.engine:  # `tusk import`, `tusk restore`: writing, then ending
        return f"No Tusk is running on this home ({where}); `{there.command}` is working on it (pid {there.pid})."
    what = f"`{there.command}`, " if there.command else ""
    api = f", HTTP API on {there.url}" if there.url else ""
    return f"A Tusk is running on this home ({where}): {what}pid {there.pid or 'unknown'}{api}."


# -- PostgreSQL: the processes table ------------------------------------------------------------------------
async def _read(url: str) -> tuple[list[Process] | None, int]:
    """The registered processes (None: the schema has no processes table yet) and the schema's version."""
    from bot.cluster.processes import listing
    from store.postgres import migrations
    from store.postgres.pool import Database

    db = Database(url, max_size=1, name="tusk-status")
    await db.open()
    try:
        async with db.transaction() as conn:
            row = await (await conn.execute("SELECT to_regclass('processes') IS NOT NULL")).fetchone()
        if not (row and row[0]):
            return None, (await migrations.status(db)).current
        return await listing(db), 0
    finally:
        await db.close()


def database(url: str, as_json: bool) -> str:
    """The processes registered on the database at `url` (StoreSetupError, StorageUnavailable for cli.py)."""
    from bot.cluster.processes import STALE_BEATS
    from store.postgres.url import redact

    found, version = asyncio.run(_read(url))
    where = redact(url)
    rows = found or []
    if as_json:
        return json.dumps({"store": "postgres", "database": where, "processes": [_as_dict(p) for p in rows]})
    if found is None:
        return (f"No Tusk has registered on PostgreSQL at {where}: its schema (version {version}) predates the "
                "processes table. A Tusk of this version adds it when it starts (or `tusk db upgrade`).")
    if not rows:
        return f"No Tusk is running on PostgreSQL at {where}."
    stale = sum(p.stale for p in rows)
    head = f"{len(rows)} Tusk process{'es' if len(rows) != 1 else ''} on PostgreSQL at {where}"
    if stale:
        head += f" ({stale} stale: no heartbeat for {STALE_BEATS} beats, dead or paused)"
    return head + ":\n" + _table(rows)


def _table(rows: list[Process]) -> str:
    lines = [("ROLE", "HOST", "PID", "VERSION", "HEARTBEAT", "IN FLIGHT", "URL", "")]
    for p in rows:
        lines.append((p.role, p.host, str(p.pid), p.version, ago(p.age), str(p.in_flight), p.url or "-",
                      "STALE" if p.stale else ""))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def ago(seconds: float) -> str:
    """`4 s ago`, `12 min ago`, `3 h ago`, `2 d ago`."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def _as_dict(p: Process) -> dict[str, Any]:
    return {"id": p.id, "role": p.role, "host": p.host, "pid": p.pid, "version": p.version, "url": p.url,
            "started": p.started.isoformat(), "heartbeat_age_seconds": round(p.age, 3), "in_flight": p.in_flight,
            "stale": p.stale}
