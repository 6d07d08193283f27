"""What bot/ keeps beside the chats, carried through a backup's files both ways, each a file of a files home and
tables of the database:

    reminders.json   `schedules`                 (bot/schedules/): a schedule set before a move still fires
    usage.sqlite     `usage_calls`, `usage_meta` (bot/usage/carry.py): the ledger, its salt included
    seen.sqlite      `seen`                      (bot/ops/carried_intake.py): no message answered twice
    inbox.jsonl      `inbox`                     (bot/ops/carried_intake.py): the messages not yet answered

store/transfer.py carries the chats and shared documents; bot/ops/backup.py and bot/ops/restore.py call both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot import dedupe
from bot.ops import carried_intake
from bot.running import Claim
from bot.schedules.store import FILE, FileStore
from bot.schedules.store_pg import PgScheduleStore
from bot.usage import carry as usage
from bot.usage.ledger import FILE as LEDGER

# the home's files these stand for (backed up from the dump on PostgreSQL)
NAMES = frozenset({FILE, LEDGER, dedupe.FILE, carried_intake.INBOX})


def dump(sync_db: Any, into: Path) -> None:
    """Everything here the database keeps, written under `into` as a files home holds it."""
    dump_schedules(sync_db, into)
    usage.dump(sync_db, into)
    carried_intake.dump_seen(sync_db, into)
    carried_intake.dump_inbox(sync_db, into)


def load(sync_db: Any, home: Path, held: Claim) -> None:
    """The files just restored into `home` loaded into the database, and removed from the home (`held`: the
    restore's claim on the home)."""
    load_schedules(sync_db, home)
    usage.load(sync_db, home)
    carried_intake.load_seen(sync_db, home)
    carried_intake.load_inbox(sync_db, home, held)


def holds(sync_db: Any) -> bool:
    """Whether the database keeps schedules, calls in its ledger or messages waiting (a restore over them
    needs --force). Seen ids do not count: a restore adds the archive's to them."""
    return bool(PgScheduleStore(sync_db).load()) or usage.calls(sync_db) > 0 or carried_intake.waiting(sync_db) > 0


def empty(sync_db: Any) -> None:
    """A forced restore: the schedules, the ledger and the inbox deleted, to be replaced by the archive's. The
    seen ids stay (the archive's are added to them: an id taken before is no less taken)."""
    empty_schedules(sync_db)
    usage.empty(sync_db)
    carried_intake.empty_inbox(sync_db)


def dump_schedules(sync_db: Any, into: Path) -> int:
    """The database's schedules written as `into`'s reminders.json; how many."""
    schedules = PgScheduleStore(sync_db).load()
    if schedules:
        out = FileStore(Path(into) / FILE)
        with out.batch():
            for schedule in schedules:
                out.add(schedule)
    return len(schedules)


def load_schedules(sync_db: Any, home: Path) -> int:
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


def empty_schedules(sync_db: Any) -> int:
    """Every schedule the database keeps deleted (a forced restore replaces them); how many."""
    db = PgScheduleStore(sync_db)
    schedules = db.load()
    with db.batch():
        for schedule in schedules:
            db.remove(schedule.id)
    return len(schedules)
