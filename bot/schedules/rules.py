"""Repeat rules: the words a person (or the model) writes, read into an APScheduler 3.11 trigger in the
chat's time zone, and the next run times they give.

    every 30 minutes | every minute | every 2 hours | every hour      IntervalTrigger: real time, counted
                                                                       from when the schedule was set
    every day at 08:00 | every 3 days at 07:30 | daily at 8am          CronTrigger (wall clock); every Nth day
                                                                       counted from the day it was set
    every weekday at 08:00 | every monday and thursday at 18:30        CronTrigger, day_of_week
    every month on day 1 at 09:00 | every month on the last day at 18:00   CronTrigger, day (a month without
                                                                       a 31st skips "day 31")
    cron 0 8 * * 1-5                                                   CronTrigger.from_crontab (five fields)

Daylight-saving changes, for the wall-clock rules: a time the clocks skip (02:30 on the day they go
forward) runs once, an hour later (03:30: what CronTrigger gives); a time that happens twice (02:30 on
the day they go back) runs once, the first time (CronTrigger would give both: the second is skipped
here). Interval rules count real time, so "every hour" runs every 60 minutes through either change.
A rule that would run more often than every `MIN_PERIOD` is refused.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

UTC = timezone.utc
MIN_PERIOD = timedelta(minutes=5)
TICK = timedelta(microseconds=1)
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
FORMS = ("every 30 minutes, every 2 hours, every day at 08:00, every 3 days at 07:30, every weekday at 08:00, "
         "every monday and thursday at 18:30, every month on day 1 at 09:00, every month on the last day at 18:00, "
         "or a cron expression such as 'cron 0 8 * * 1-5'")

_TIME = r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?"
_UNIT = re.compile(r"every (?:(\d+) ?)?(minute|min|m|hour|hr|h)s?")
_DAILY = re.compile(rf"every (?:(\d+) )?days? at {_TIME}")
_WEEKDAYS = re.compile(rf"every (weekday|workday|weekend day|weekend)s? at {_TIME}")
_NAMED = re.compile(rf"every ([a-z ,]+?) at {_TIME}")
_MONTHLY = re.compile(rf"every month on (?:the )?(?:day )?(\d{{1,2}}|last)(?:st|nd|rd|th)?(?: day)? at {_TIME}")
_ALIASES = ((r"^(?:each|on) ", "every "), (r"^daily\b", "every day"), (r"^hourly$", "every hour"),
            (r"^(?:every )?weekdays\b", "every weekday"), (r"^monthly\b", "every month"),
            (r"\s+(?:and|&)\s+", ", "), (r"\bnoon$", "12:00"), (r"\bmidnight$", "00:00"))


class RuleError(ValueError):
    """A rule that cannot be read; the message names the forms that can."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A repeat rule in one zone: its canonical words, its trigger, and the Nth-day filter of "every N days"."""

    text: str  # canonical: what /reminders shows and reminders.json keeps
    zone: ZoneInfo
    start: datetime  # when it was set (aware): intervals and "every N days" count from here
    trigger: BaseTrigger
    every_days: int = 1
    wall_clock: bool = True  # False: an interval of real time

    def at_or_after(self, moment: datetime) -> datetime | None:
        """The first run time at or after `moment` (aware), in the rule's zone."""
        moment = moment.astimezone(self.zone)
        for _ in range(1000):  # every N days skips at most N - 1 days; the repeated hour one time
            found = self.trigger.get_next_fire_time(None, moment)
            if found is None:
                return None
            found = found.astimezone(UTC).astimezone(self.zone)  # the instant, with the fold the zone gives it
            if self.wall_clock and _second_pass(found):
                moment = _later(found)  # the wall time already ran in the first pass of the repeated hour
            elif self.every_days > 1 and (found.date() - self.start.date()).days % self.every_days:
                moment = datetime.combine(found.date() + timedelta(days=1), datetime.min.time(), self.zone)
            else:
                return found
        return None

    def after(self, moment: datetime) -> datetime | None:
        """The first run time strictly after `moment`."""
        return self.at_or_after(_later(moment))


def _later(moment: datetime) -> datetime:
    """One microsecond after `moment`, counted in real time (aware arithmetic would reset the fold)."""
    return (moment.astimezone(UTC) + TICK).astimezone(moment.tzinfo)


def _second_pass(moment: datetime) -> bool:
    """A wall time in the hour that repeats when clocks go back, the second time it comes."""
    return moment.fold == 1 and moment.replace(fold=0).utcoffset() != moment.utcoffset()


def _clock(hour: str, minute: str | None, half: str | None) -> tuple[int, int]:
    h, m = int(hour), int(minute or 0)
    if half:
        if not 1 <= h <= 12:
            raise RuleError(f"{hour}{half} is not a time: use 1-12 with am/pm, or 24-hour HH:MM")
        h = h % 12 + (12 if half == "pm" else 0)
    if not (0 <= h <= 23 and 0 <= m <= 59):
        raise RuleError(f"{hour}:{minute or '00'} is not a time of day: use HH:MM from 00:00 to 23:59")
    return h, m


def _normal(text: str) -> str:
    text = " ".join(text.lower().replace("\u2019", "'").split()).rstrip(".")
    for pattern, repl in _ALIASES:
        text = re.sub(pattern, repl, text)
    return text


def _day_list(words: str) -> list[int]:
    """"monday, thu" -> [0, 3]; RuleError for a word that is not a day."""
    days = []
    for word in filter(None, (w.strip() for w in words.replace(",", " ").split())):
        found = [i for i, name in enumerate(DAYS) if len(word.rstrip("s")) >= 3 and name.startswith(word.rstrip("s"))]
        if len(found) != 1:
            raise RuleError(f"{word!r} is not a day of the week: say e.g. 'every monday and thursday at 18:30'")
        days.append(found[0])
    return sorted(set(days))


@functools.lru_cache(maxsize=1024)
def _cron(zone: ZoneInfo, **fields: str | int) -> CronTrigger:
    """One CronTrigger per rule and zone, shared (it keeps no state between uses): thousands of schedules
    with the same rule are read at start without building thousands of triggers."""
    return CronTrigger(timezone=zone, **fields)


EPOCH = datetime(2000, 1, 3, tzinfo=UTC)


@functools.lru_cache(maxsize=1024)
def _read(text: str, zone: ZoneInfo) -> Rule:
    return _parse(text, zone, EPOCH, check=False)


def parse(text: str, zone: ZoneInfo, start: datetime, check: bool = True) -> Rule:
    """Read a rule (`text` as a person writes it) in `zone`, counted from `start`; RuleError says how to write it.
    `check=False` for a rule read back from reminders.json (it was checked when it was set). A wall-clock rule
    does not depend on `start` (except every N days): it is read once per text and zone."""
    base = _read(text, zone)
    if base.wall_clock and base.every_days == 1:
        rule = Rule(base.text, zone, start.astimezone(zone), base.trigger)
        return _checked(rule) if check else rule
    return _parse(text, zone, start, check)


def _parse(text: str, zone: ZoneInfo, start: datetime, check: bool) -> Rule:
    words = _normal(text)
    start = start.astimezone(zone)
    checked = _checked if check else (lambda rule: rule)
    if words.startswith("cron "):
        expr = " ".join(words.split()[1:])
        try:
            trigger = _crontab(expr, zone)
        except ValueError as exc:
            raise RuleError(f"{expr!r} is not a cron expression Tusk reads ({exc}): give five fields, "
                            "minute hour day-of-month month day-of-week, e.g. 'cron 0 8 * * 1-5'") from exc
        return checked(Rule(f"cron {expr}", zone, start, trigger))
    if match := _UNIT.fullmatch(words):
        n = int(match[1] or 1)
        unit = "minute" if match[2] in ("minute", "min", "m") else "hour"
        if n < 1:
            raise RuleError("every 0 minutes is not a rule: give a number from 1 up")
        trigger = IntervalTrigger(**{f"{unit}s": n}, start_date=start, timezone=zone)
        shown = f"every {unit}" if n == 1 else f"every {n} {unit}s"
        return checked(Rule(shown, zone, start, trigger, wall_clock=False))
    if match := _DAILY.fullmatch(words):
        n = int(match[1] or 1)
        if not 1 <= n <= 366:
            raise RuleError("every N days takes N from 1 to 366")
        h, m = _clock(*match.groups()[1:])
        at = f"{h:02d}:{m:02d}"
        return Rule(f"every day at {at}" if n == 1 else f"every {n} days at {at}", zone, start,
                    _cron(zone, hour=h, minute=m), every_days=n)
    if match := _WEEKDAYS.fullmatch(words):
        h, m = _clock(*match.groups()[1:])
        weekend = match[1].startswith("weekend")
        return Rule(f"every {'weekend day' if weekend else 'weekday'} at {h:02d}:{m:02d}", zone, start,
                    _cron(zone, day_of_week="sat,sun" if weekend else "mon-fri", hour=h, minute=m))
    if match := _MONTHLY.fullmatch(words):
        day = match[1]
        if day != "last" and not 1 <= int(day) <= 31:
            raise RuleError(f"day {day} is not a day of the month: use 1 to 31, or 'the last day'")
        h, m = _clock(*match.groups()[1:])
        shown = "the last day" if day == "last" else f"day {int(day)}"
        return Rule(f"every month on {shown} at {h:02d}:{m:02d}", zone, start,
                    _cron(zone, day=day if day == "last" else int(day), hour=h, minute=m))
    if match := _NAMED.fullmatch(words):
        days = _day_list(match[1])
        h, m = _clock(*match.groups()[1:])
        names = [DAYS[d] for d in days]
        shown = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        return Rule(f"every {shown} at {h:02d}:{m:02d}", zone, start,
                    _cron(zone, day_of_week=",".join(DAYS[d][:3] for d in days), hour=h, minute=m))
    if re.fullmatch(r"every .*(day|monday|tuesday|wednesday|thursday|friday|saturday|sunday|month).*", words):
        raise RuleError(f"{text.strip()!r}: say at what time, e.g. 'every weekday at 08:00' (forms: {FORMS})")
    raise RuleError(f"{text.strip()!r} is not a repeat rule Tusk reads: use {FORMS}")


def _crontab(expr: str, zone: ZoneInfo) -> CronTrigger:
    """What CronTrigger.from_crontab gives, with the day of the week as crontab numbers it (0 and 7 Sunday, 1
    Monday): APScheduler 3 reads a number there as Monday-based (0 = Monday; agronholm/apscheduler#286)."""
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(f"{len(fields)} fields")
    fields[4] = ",".join(_cron_days(part) for part in fields[4].split(","))
    return _cron(zone, **dict(zip(("minute", "hour", "day", "month", "day_of_week"), fields)))


def _cron_days(part: str) -> str:
    """One day-of-week part of a crontab (`1-5`, `*/2`, `0`, `sat`), as APScheduler's day names."""
    match = re.fullmatch(r"(\*|\d)(?:-(\d))?(?:/(\d))?", part)
    if match is None or part == "*":
        return part  # names (mon, fri-sun) mean the same to both
    low, high, step = match.groups()
    first, last = (0, 6) if low == "*" else (int(low), int(high) if high else int(low) if not step else 7)
    if last > 7 or first > last:
        raise ValueError(f"day of week {part!r}: use 0-7 (0 and 7 are Sunday) or names")
    names = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")
    return ",".join(dict.fromkeys(names[d] for d in range(first, last + 1, int(step or 1))))


def _checked(rule: Rule) -> Rule:
    """The rule, unless it would run more often than every MIN_PERIOD (a cron expression, an interval)."""
    first = rule.at_or_after(rule.start)
    second = rule.after(first) if first else None
    third = rule.after(second) if second else None
    if first is None:
        raise RuleError(f"{rule.text!r} never runs")
    gaps = [b.astimezone(UTC) - a.astimezone(UTC) for a, b in ((first, second), (second, third)) if a and b]
    if any(gap < MIN_PERIOD for gap in gaps):
        raise RuleError(f"{rule.text!r} would run more often than every {MIN_PERIOD.seconds // 60} minutes, the "
                        "most often a schedule may")
    return rule

