"""Repeat rules (bot/schedules/rules.py) and the catch-up plan (bot/schedules/timing.py), on fixed times."""

from dataclasses import replace
from datetime import timedelta, timezone

import pytest

from bot.events import ChatKey
from bot.schedules import rules, timing
from bot.schedules.model import Schedule
from tests.schedule_clock import BERLIN, berlin

START = berlin(2026, 3, 20, 10, 15)  # a Friday


def runs(text, n=4, start=START):
    rule = rules.parse(text, BERLIN, start)
    out, t = [], start
    for _ in range(n):
        t = rule.after(t)
        out.append(t.strftime("%a %m-%d %H:%M"))
    return rule.text, out


@pytest.mark.parametrize("written, canonical, first", [
    ("every weekday at 8", "every weekday at 08:00", ["Mon 03-23 08:00", "Tue 03-24 08:00"]),
    ("Weekdays at 8:15pm", "every weekday at 20:15", ["Fri 03-20 20:15", "Mon 03-23 20:15"]),
    ("every 30m", "every 30 minutes", ["Fri 03-20 10:45", "Fri 03-20 11:15"]),
    ("every 2 hours", "every 2 hours", ["Fri 03-20 12:15", "Fri 03-20 14:15"]),
    ("daily at 7:30am", "every day at 07:30", ["Sat 03-21 07:30", "Sun 03-22 07:30"]),
    ("every 3 days at 9", "every 3 days at 09:00", ["Mon 03-23 09:00", "Thu 03-26 09:00"]),
    ("every mon, wed & fri at 18:30", "every monday, wednesday and friday at 18:30",
     ["Fri 03-20 18:30", "Mon 03-23 18:30"]),
    ("every weekend at 10", "every weekend day at 10:00", ["Sat 03-21 10:00", "Sun 03-22 10:00"]),
    ("monthly on the 1st at 09:00", "every month on day 1 at 09:00", ["Wed 04-01 09:00", "Fri 05-01 09:00"]),
    ("every month on the last day at 18:00", "every month on the last day at 18:00",
     ["Tue 03-31 18:00", "Thu 04-30 18:00"]),
    ("cron 0 8 * * 1-5", "cron 0 8 * * 1-5", ["Mon 03-23 08:00", "Tue 03-24 08:00"]),
    ("cron 0 9 * * 0", "cron 0 9 * * 0", ["Sun 03-22 09:00", "Sun 03-29 09:00"]),
    ("cron 0 9 * * 7", "cron 0 9 * * 7", ["Sun 03-22 09:00", "Sun 03-29 09:00"]),
])
def test_rules_read_as_people_write_them(written, canonical, first):
    """Each form is read into its canonical words and runs at the wall-clock times it says (crontab weekday
    numbers as cron means them: 0 and 7 Sunday, 1-5 Monday to Friday)."""
    text, got = runs(written, 2)
    assert (text, got) == (canonical, first)


@pytest.mark.parametrize("written, problem", [
    ("every minute", "more often than every 5 minutes"),
    ("cron */2 * * * *", "more often than every 5 minutes"),
    ("every weekday", "say at what time"),
    ("every funday at 8", "is not a day of the week"),
    ("every day at 25:00", "not a time of day"),
    ("cron 0 8 * *", "is not a cron expression Tusk reads"),
    ("tomorrow at 9", "is not a repeat rule Tusk reads"),
])
def test_rules_that_cannot_be_read_say_how_to_write_them(written, problem):
    with pytest.raises(rules.RuleError, match=problem):
        rules.parse(written, BERLIN, START)


def test_wall_clock_rules_through_both_dst_changes_and_intervals_in_real_time():
    """Berlin 2026: 02:30 daily runs at 03:30 on the night it does not exist and once on the night it happens
    twice; "every hour" keeps 60 real minutes through the repeated hour."""
    _, spring = runs("every day at 02:30", 3, berlin(2026, 3, 27, 12))
    assert spring == ["Sat 03-28 02:30", "Sun 03-29 03:30", "Mon 03-30 02:30"]
    rule = rules.parse("every day at 02:30", BERLIN, berlin(2026, 10, 23, 12))
    first = rule.after(berlin(2026, 10, 24, 12))
    assert (first.isoformat(), rule.after(first).isoformat()) == ("2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00")
    hourly = rules.parse("every hour", BERLIN, berlin(2026, 10, 25, 1, 0))
    t, seen = berlin(2026, 10, 25, 1, 0), []
    for _ in range(3):
        t = hourly.after(t)
        seen.append(t.astimezone(timezone.utc).strftime("%H:%M"))
    assert seen == ["00:00", "01:00", "02:00"]  # 02:00 CEST, 02:00 CET, 03:00 CET


def schedule(rule_text, due, start=START):
    rule = rules.parse(rule_text, BERLIN, start)
    return Schedule("s1", ChatKey("http", "x"), "text", "hi", BERLIN, due, start, rule)


def test_the_plan_after_a_downtime_runs_the_latest_within_the_grace_once():
    """Down from Monday 08:00 to Thursday 09:00 with a day's grace: one run (Thursday 08:00), three missed; with an
    hour's grace and a start at 10:00: none, four missed; a one-time reminder past the grace is dropped."""
    s = schedule("every day at 08:00", berlin(2026, 3, 23, 8, 0))
    p = timing.plan(s, berlin(2026, 3, 26, 9, 0), timedelta(days=1))
    assert (p.run, p.missed, p.first_missed, p.next) == (berlin(2026, 3, 26, 8), 3, berlin(2026, 3, 23, 8),
                                                         berlin(2026, 3, 27, 8))
    p = timing.plan(s, berlin(2026, 3, 26, 10, 0), timedelta(hours=1))
    assert (p.run, p.missed, p.next) == (None, 4, berlin(2026, 3, 27, 8))
    every5 = schedule("every 5 minutes", berlin(2026, 1, 1, 0, 0), berlin(2025, 12, 31, 23, 55))
    p = timing.plan(every5, berlin(2026, 3, 1, 0, 1), timedelta(days=1))
    assert p.run == berlin(2026, 3, 1, 0, 0) and p.missed == 59 * 288  # counted, never run
    once = replace(s, rule=None, kind="reminder", due=berlin(2026, 3, 20, 8))
    assert timing.plan(once, berlin(2026, 3, 22, 8), timedelta(days=1)) == timing.Plan(None, 1, once.due, None)
