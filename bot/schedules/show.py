"""Schedules in words: the lines /reminders, the tools and `tusk doctor` show, times in the chat's zone.

    - r3fa9c1: Tue 2030-01-15 09:00 Europe/Berlin — dentist (set by Ann, id 7)
    - s1b2c3d: every weekday at 08:00, next Mon 2026-03-30 08:00 Europe/Berlin — instruction: tell me what's due
        last run Fri 2026-03-27 08:00: failed (The model is unavailable right now, try again in a minute.)
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.schedules.model import Run, Schedule


def show(moment: datetime, zone: ZoneInfo) -> str:
    return f"{moment.astimezone(zone):%a %Y-%m-%d %H:%M} {zone.key}"


def span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 1:
        return f"{int(delta.total_seconds())} s"
    days, rest = divmod(minutes, 1440)
    return " ".join(part for part in (f"{days} d" if days else "", f"{rest // 60} h" if rest >= 60 else "",
                                      f"{rest % 60} min" if rest % 60 else "") if part)


def when(s: Schedule, zone: ZoneInfo) -> str:
    """A one-time schedule's time; a repeating one's rule and next run (or that it is paused)."""
    if s.rule is None:
        return show(s.due, zone) if s.due else "done"
    rule = s.rule.text if s.rule.zone == zone else f"{s.rule.text} ({s.rule.zone.key})"
    if s.paused:
        return f"{rule}, paused"
    return f"{rule}, next {show(s.due, zone)}" if s.due else rule


def what(s: Schedule) -> str:
    return {"text": "text: ", "instruction": "instruction: "}.get(s.kind, "") + s.text


def run_line(run: Run, zone: ZoneInfo) -> str:
    """`Fri 2026-03-27 08:00: failed (why)`; missed runs say how many."""
    if run.status == "missed":
        return f"{run.count} run(s) from {show(run.due, zone)} missed: Tusk was not running"
    state = {"fired": "started, no outcome yet"}.get(run.status, run.status)
    late = ", late" if run.late else ""
    return f"{show(run.due, zone)}: {state}{late}{f' ({run.why})' if run.why else ''}"


def line(s: Schedule, zone: ZoneInfo) -> str:
    text = f"- {s.id}: {when(s, zone)} — {what(s)}{s.by}"
    if s.repeating and (last := s.last_run) is not None:
        text += f"\n    last run {run_line(last, zone)}"
    return text


def listing(mine: list[Schedule], zone: ZoneInfo) -> str:
    if not mine:
        return "No reminders are set in this chat."
    return "Reminders in this chat:\n" + "\n".join(line(s, zone) for s in mine)


def details(s: Schedule, zone: ZoneInfo) -> str:
    """One schedule with its recorded runs, newest first."""
    head = line(s, zone).split("\n")[0][2:]
    if not s.runs:
        return f"{head}\nNo runs yet."
    return f"{head}\nRuns, newest first:\n" + "\n".join(f"- {run_line(r, zone)}" for r in reversed(s.runs))


def row(s: Schedule, zone: ZoneInfo) -> dict[str, Any]:
    """A schedule as the console's JSON shows it."""
    return {"id": s.id, "channel": s.key.channel, "chat_id": s.key.chat_id, "kind": s.kind, "text": s.text,
            "rule": s.rule.text if s.rule else None, "timezone": (s.rule.zone if s.rule else s.zone).key,
            "due": s.due.isoformat() if s.due else None, "due_shown": show(s.due, zone) if s.due else None,
            "paused": s.paused, "set_by": {"id": s.set_by_id, "name": s.set_by_name} if s.set_by_id else None,
            "item": s.item or None, "when": when(s, zone),
            "runs": [{**r.to_record(), "shown": run_line(r, zone)} for r in reversed(s.runs)]}
