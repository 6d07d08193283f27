"""`tusk doctor`'s look at the schedules, in the store the settings name (reminders.json, or the database's
`schedules`): readable, and those whose last run failed (why). It reads only: changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.schedules.model import Schedule
from bot.schedules.show import run_line
from bot.schedules.store import FILE, read_records

SHOWN = 5  # failing schedules named; the rest counted
Verdict = tuple[str, str, str]


def check(settings: Any) -> Verdict | None:
    """(verdict, what, fix), or None when no schedule is kept (no reminders.json, no row)."""
    url = settings.store_url()
    return _file(Path(settings.home) / FILE) if url is None else _database(settings.home, url)


def _file(path: Path) -> Verdict | None:
    try:
        records, _ = read_records(path)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return ("fail", f"{path} cannot be read ({exc}): at start Tusk moves it aside and runs without reminders",
                "fix the file by hand (one schedule a line, docs/data-layout.md), or restore it from a backup")
    if not path.exists():
        return None
    schedules, unreadable = _read(records)
    said = f"{len(unreadable)} record(s) cannot be read and are skipped" if unreadable else ""
    return _verdict(schedules, said, "fix them by hand in reminders.json (its format: docs/data-layout.md)")


def _database(home: Path, url: str) -> Verdict | None:
    from bot.schedules.store_pg import PgScheduleStore
    from store import prepared
    from store.errors import StoreError

    try:
        with prepared(home, url) as store:
            rows = PgScheduleStore(store.sync_db).records()
    except StoreError as exc:
        return ("fail", f"the database's schedules cannot be read: {exc}", "see TUSK_DATABASE_URL (`tusk db status`)")
    if not rows:
        return None
    schedules, unreadable = _read([rec for _, rec in rows])
    ids = [sid for n, (sid, _) in enumerate(rows) if n in unreadable]
    said = f"{len(ids)} row(s) cannot be read and are skipped ({', '.join(ids[:SHOWN])})" if ids else ""
    return _verdict(schedules, said, "restore them from a backup, or delete those rows of the `schedules` table")


def _read(records: list[Any]) -> tuple[list[Schedule], set[int]]:
    """The schedules that can be read, and the positions of the records that cannot."""
    schedules, unreadable = [], set()
    for n, rec in enumerate(records):
        try:
            schedules.append(Schedule.from_record(rec))
        except (ValueError, KeyError, TypeError):
            unreadable.add(n)
    return schedules, unreadable


def _verdict(schedules: list[Schedule], unreadable: str, fix_unreadable: str) -> Verdict:
    failing = [s for s in schedules if (last := _last(s)) is not None and last.status == "failed"]
    coming = sum(s.kind == "checkin" and s.due is not None for s in schedules)
    counts = (f"{sum(s.kind != 'checkin' for s in schedules)} reminder(s) and schedule(s) "
              f"({sum(s.paused for s in schedules)} paused), {coming} check-in(s) to come")
    if unreadable:
        return ("warn", f"{counts}; {unreadable}", fix_unreadable)
    if failing:
        named = "; ".join(f"{s.id} ({s.key}, {s.rule.text if s.rule else s.kind}): {run_line(_last(s), s.zone)}"
                          for s in failing[:SHOWN])
        more = f"; and {len(failing) - SHOWN} more" if len(failing) > SHOWN else ""
        return ("warn", f"{counts}; {len(failing)} failed their last run: {named}{more}",
                "`/reminders <id>` in the chat lists its runs; the log says more (the next run tries again)")
    return ("ok", f"{counts}; no failed runs", "")


def _last(s: Schedule):
    """The last run that has an outcome (a `missed` record says Tusk was down, not that a run failed)."""
    return next((r for r in reversed(s.runs) if r.status in ("delivered", "failed")), None)
