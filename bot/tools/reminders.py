"""Reminders and schedules as the model sets them: the `set_reminder`, `list_reminders` and `cancel_reminder`
tools. bot/schedules/ keeps and runs them.

    set_reminder(text, when)                once: at that time the model brings it up in the chat
    set_reminder(text, repeat, kind)        repeating, by a rule in the chat's time zone (bot/schedules/rules.py):
                                            kind "text" sends the text as written at each run; "instruction"
                                            runs it as a request to the model and sends the reply, whatever it says

One tool for both (not a second beside it): each tool's schema is sent with every request, and a small
model's window (2,048 tokens) has no room to spare.

Times are in the chat's time zone (/timezone, else TUSK_TIMEZONE). A chat sees, lists and cancels only its
own; it has at most TUSK_MAX_REMINDERS of both together.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from pydantic import Field

from bot.schedules import rules
from bot.schedules.model import Schedule, instant
from bot.schedules.service import Schedules
from bot.schedules.show import listing, show, span, what
from bot.tools.box import ToolContext
from bot.tools.when import parse_when

MAX_AHEAD = timedelta(days=3660)
MAX_TEXT = 500  # a one-time reminder's text (a schedule's may be up to 1000 characters)

When = Annotated[str, Field(max_length=100, description=(
    "Once: an ISO time (2026-12-03T09:00) or a delay ('in 2 hours', '90m')."))]
Repeat = Annotated[str, Field(max_length=100, description=(
    "Repeating: 'every 2 hours', 'every weekday at 08:00', 'every month on day 1 at 09:00', 'cron 0 8 * * 1-5'."))]
Text = Annotated[str, Field(min_length=1, max_length=1000)]
ReminderId = Annotated[str, Field(min_length=1, max_length=20,
                                   description="The id list_reminders shows, e.g. r3fa9c1.")]


class ReminderTools:
    def __init__(self, schedules: Schedules) -> None:
        self.schedules = schedules

    def _by(self, ctx: ToolContext) -> tuple[str, str]:
        return ctx.sender_id, " ".join(ctx.sender_name.split())[:64]

    async def set_reminder(self, ctx: ToolContext, text: Text, when: When = "", repeat: Repeat = "",
                           kind: Literal["text", "instruction"] = "text") -> str:
        """Set a reminder here, once or repeating (times in the chat's zone).

        Repeating, the text is sent as written, or with kind instruction you do it at each run and your
        reply is sent."""
        if bool(when.strip()) == bool(repeat.strip()):
            raise ValueError("give either when (once) or repeat (repeating), not both or neither")
        if repeat.strip():
            return self._repeating(ctx, repeat, text, kind)
        book = self.schedules
        zone = book.zone(ctx.prefs)
        now = book.clock().astimezone(zone)
        due = parse_when(when, zone, now).astimezone(zone)
        if due <= now:
            raise ValueError(f"{show(due, zone)} is in the past (it is now {show(now, zone)}): give a future time")
        if due > now + MAX_AHEAD:
            raise ValueError(f"{show(due, zone)} is more than ten years ahead")
        if len(text) > MAX_TEXT:
            raise ValueError(f"a one-time reminder's text is at most {MAX_TEXT} characters")
        s = book.add(Schedule(book.new_id("r"), ctx.key, "reminder", " ".join(text.split()), zone, due, now,
                              None, False, *self._by(ctx)))
        return f"Reminder {s.id} set for {show(due, zone)} ({span(instant(due) - instant(now))} from now): {s.text}"

    def _repeating(self, ctx: ToolContext, repeat: str, text: str, kind: Literal["text", "instruction"]) -> str:
        """A repeating schedule ("every weekday at 8 tell me what's due"), by a rule in the chat's zone."""
        book = self.schedules
        zone = book.zone(ctx.prefs)
        now = book.clock().astimezone(zone)
        rule = rules.parse(repeat, zone, now)
        first = rule.after(now)
        if first is None:
            raise ValueError(f"{rule.text!r} never runs")
        s = book.add(Schedule(book.new_id("s"), ctx.key, kind, " ".join(text.split()), zone, first, now, rule,
                              False, *self._by(ctx)))
        return (f"Schedule {s.id} set: {rule.text} ({zone.key}), first run {show(first, zone)} "
                f"({span(instant(first) - instant(now))} from now); {what(s)}")

    async def list_reminders(self, ctx: ToolContext) -> str:
        """List this chat's reminders and schedules, soonest first."""
        return listing(self.schedules.of(ctx.key), self.schedules.zone(ctx.prefs))

    async def cancel_reminder(self, ctx: ToolContext, id: ReminderId) -> str:
        """Cancel one of this chat's reminders (or schedules) by its id."""
        s = self.schedules.mine(ctx.key, id)
        self.schedules.cancel(s)
        zone = self.schedules.zone(ctx.prefs)
        when = show(s.due, zone) if s.rule is None and s.due else s.rule.text if s.rule else ""
        return f"Cancelled {'schedule' if s.repeating else 'reminder'} {s.id} ({when}: {s.text})."
