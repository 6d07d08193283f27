"""When a reminder is due: an ISO time, or a delay from now.

    "2026-12-03T09:00", "2026-12-03 09:00"     in the chat's time zone
    "2026-12-03T09:00+01:00", "...Z"           as written
    "in 2 hours", "+90m", "1h30m", "2 days"    from now (s, m/min, h, d, w and their long names)
    "PT2H30M", "P1D"                           ISO 8601 durations, from now
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pydantic

UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
         "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
         "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
         "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
DELAY = re.compile(rf"(?:{PART.pattern}\s*(?:,|and)?\s*)+")
ISO_DURATION = pydantic.TypeAdapter(timedelta)
FORMS = ("an ISO time such as 2026-12-03T09:00 (in the chat's time zone) or a delay such as "
         "'in 2 hours', '90m', '1d 3h' or 'PT2H'")


def parse_when(when: str, zone: ZoneInfo, now: datetime) -> datetime:
    """The moment `when` stands for, timezone-aware; a ValueError naming the accepted forms if none."""
    text = when.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return now + parse_delay(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=zone)


def parse_delay(text: str) -> timedelta:
    t = text.lower().strip().removeprefix("in ").removeprefix("+").strip()
    if DELAY.fullmatch(t):
        seconds = 0.0
        for amount, unit in PART.findall(t):
            if unit not in UNITS:
                raise ValueError(f"unknown unit {unit!r} in {text!r}: use {FORMS}")
            seconds += float(amount) * UNITS[unit]
        return timedelta(seconds=seconds)
    if t.startswith("p"):
        try:
            return ISO_DURATION.validate_python(t.upper())
        except pydantic.ValidationError:
            pass
    raise ValueError(f"cannot read {text!r} as a time: use {FORMS}")
