"""What bot/ keeps beside the chats, carried through a backup's files both ways: the schedules, which a files
home keeps in reminders.json and PostgreSQL in its `schedules` table (bot/schedules/). store/transfer.py
carries the chats and shared documents; bot/ops/backup.py and bot/ops/restore.py call both, so a schedule set
before a move onto the database (or back) still fires after it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.schedules.store import FILE, FileStore
from bot.schedules.store_pg import PgScheduleStore

NAMES = frozenset({FILE})  # the home's files these stand for (backed up from the dump on PostgreSQL)


def dump(sync_db: Any, into: Path) -> int:
    """The database's schedules written as `into`'s reminders.json; how many."""
    schedules = PgScheduleStore(sync_db).load()
    if schedules:
        out = FileStore(Path(into) / FILE)
        with out.batch():
            for schedule in schedules:
                out.add(schedule)
    return len(schedules)


def load(sync_db: Any, home: Path) -> int:
    """The home's reminders.json (just restored) into the database, and out of the home; how many."""
    path = Path(home) / FILE
    if not path.is_file():
        return 0
    schedules = FileStore(path).load()
    db = PgScheduleStore(sync_db)
    with db.batch():
        for schedule in schedules:
            db.add(schedule)
    path.unlink()
    return len(schedules)


def empty(sync_db: Any) -> int:
    """Every schedule the database keeps deleted (a forced restore replaces them); how many."""
    db = PgScheduleStore(sync_db)
    schedules = db.load()
    with db.batch():
        for schedule in schedules:
            db.remove(schedule.id)
    return len(schedules)
