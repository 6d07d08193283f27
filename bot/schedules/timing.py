"""Which run a due schedule starts now, and which it passes over: never a burst after a downtime.

A repeating schedule found due (at a tick, or at the start after Tusk was down) starts at most one run:
the latest of its run times up to now, and only if that one is at most the grace (TUSK_REMINDER_GRACE)
old; every earlier run time is passed over and recorded once as `missed`, with how many. This is what
APScheduler does with a coalesced job and `misfire_grace_time` (one run for the latest missed time, none
if that is past the grace), decided here, in the claim, so that the store (and later the database) sees
each run time handled once. A one-time schedule runs if it is at most the grace late; older ones are
dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.schedules.model import Schedule, instant

LATE_AFTER = timedelta(minutes=1)  # a run starting later than this after its time says it is late
MAX_COUNTED = 100_000  # missed run times counted one by one; beyond, the count says "at least"


@dataclass(frozen=True, slots=True)
class Plan:
    run: datetime | None  # the run time to start now, or None
    missed: int  # run times passed over
    first_missed: datetime | None
    next: datetime | None  # the schedule's next run time after these (None: a one-time schedule is done)


def plan(schedule: Schedule, now: datetime, grace: timedelta) -> Plan:
    """What to do with `schedule`, whose `due` is at or before `now`."""
    due = schedule.due
    assert due is not None
    now = instant(now)  # compared in UTC: see model.instant
    rule = schedule.rule
    if rule is None:
        return Plan(due, 0, None, None) if now - instant(due) <= grace else Plan(None, 1, due, None)
    edge = now - grace
    t: datetime | None = due
    skipped = 0
    while t is not None and instant(t) < edge and skipped < MAX_COUNTED:  # too old to catch up
        skipped += 1
        t = rule.after(t)
    if t is not None and instant(t) < edge:
        t = rule.at_or_after(edge)
    latest = None
    while t is not None and instant(t) <= now:  # within the grace: only the latest runs
        if latest is not None:
            skipped += 1
        latest, t = t, rule.after(t)
    return Plan(latest, skipped, due if skipped else None, t)


def late(run: datetime, now: datetime, started_at: datetime) -> bool:
    """A run whose time came before this Tusk started, or that starts over a minute after its time."""
    return instant(run) < instant(started_at) or instant(now) - instant(run) > LATE_AFTER
