"""`tusk doctor`'s look at the schedules: reminders.json readable, and those whose last run failed (why)."""

from __future__ import annotations

from pathlib import Path

from bot.schedules.model import Schedule
from bot.schedules.show import run_line
from bot.schedules.store import FILE, read_records

SHOWN = 5  # failing schedules named; the rest counted


def check(home: Path) -> tuple[str, str, str] | None:
    """(verdict, what, fix), or None when there is no reminders.json. Reads the file only: changes nothing."""
    path = Path(home) / FILE
    try:
        records, _ = read_records(path)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return ("fail", f"{path} cannot be read ({exc}): at start Tusk moves it aside and runs without reminders",
                "fix the file by hand (one schedule a line, docs/data-layout.md), or restore it from a backup")
    if not path.exists():
        return None
    schedules, unreadable = [], 0
    for rec in records:
        try:
            schedules.append(Schedule.from_record(rec))
        except (ValueError, KeyError, TypeError):
            unreadable += 1
    failing = [s for s in schedules if (last := _last(s)) is not None and last.status == "failed"]
    coming = sum(s.kind == "checkin" and s.due is not None for s in schedules)
    counts = (f"{sum(s.kind != 'checkin' for s in schedules)} reminder(s) and schedule(s) "
              f"({sum(s.paused for s in schedules)} paused), {coming} check-in(s) to come")
    if unreadable:
        return ("warn", f"{counts}; {unreadable} record(s) cannot be read and are skipped",
                "fix them by hand in reminders.json (its format: docs/data-layout.md)")
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
