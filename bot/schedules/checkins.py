"""Check-ins: Tusk asks once about each dated open item of a chat that opted in (/checkins on).

    plan(key)    the chat's open items (memory/open_items.py: the `## Open items` section consolidation keeps
                 in MEMORY.md) each get one check-in, a one-time schedule of kind `checkin`, due the day after
                 the item's date at `HOUR` in the chat's zone. An item seen too late for that is asked at the
                 next sensible hour, up to `STALE_DAYS` after its date; an older one is never asked.
    sweep()      plan every chat with check-ins on (hourly, and at start)
    hold(s, now) at its time, a check-in is held back when its item left MEMORY.md (forgotten, settled:
                 skipped for good), when check-ins were turned off (skipped), at night (`HOUR` to `LAST_HOUR`
                 only: the next morning), and when the chat already had `checkins_daily` today (tomorrow)

The record of a check-in stays in reminders.json after it ran (due null), so the item (or the same item
reworded, memory/open_items.py `same`) is never asked about twice, across restarts too; it goes when the
item has left MEMORY.md. A check-in is a model turn without tools, metered as `checkin` and held to the
spend limits like any turn; one whose model call failed is asked once more the next day, then given up.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.events import ChatKey
from bot.schedules.model import Run, Schedule
from bot.schedules.service import Schedules
from memory import open_items
from store.base import Chat

logger = logging.getLogger(__name__)

HOUR = 10  # check-ins are asked from 10:00 ...
LAST_HOUR = 20  # ... to 20:00 in the chat's zone
STALE_DAYS = 3  # an item more than this many days past is not asked about any more
TRIES = 2  # a check-in whose model call failed is asked once more, the next day


def morning(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(HOUR), zone)


def sensible(moment: datetime, zone: ZoneInfo) -> datetime:
    """`moment`, or the next time from HOUR to LAST_HOUR in `zone` after it."""
    here = moment.astimezone(zone)
    if here.hour < HOUR:
        return morning(here.date(), zone)
    if here.hour >= LAST_HOUR:
        return morning(here.date() + timedelta(days=1), zone)
    return here


class CheckIns:
    def __init__(self, book: Schedules) -> None:
        self.book = book
        book.checkins = self

    def instructions(self, chat: Chat) -> str:
        """What consolidation is asked in this chat besides its usual work: its open items, if check-ins are on."""
        return open_items.INSTRUCTIONS if chat.prefs.checkins else ""

    def plan(self, chat: Chat, now: datetime | None = None) -> int:
        """Add a check-in for each open item of the chat that has none; returns how many were added."""
        now, key = now or self.book.clock(), chat.key
        if not self.book.running or not chat.exists or not chat.prefs.checkins:
            return 0
        zone = self.book.zone(chat.prefs)
        today = now.astimezone(zone).date()
        known = [s.item for s in self.book.of(key, checkins=True)]
        added = 0
        for item in open_items.items(chat.memory.text):
            if (today - item.date).days > STALE_DAYS or any(open_items.same(item.line, k) for k in known):
                continue
            due = max(morning(item.date + timedelta(days=1), zone), sensible(now, zone))
            s = Schedule(self.book.new_id("c"), key, "checkin", item.text, zone, due, now.astimezone(zone),
                         item=item.line)
            try:
                self.book.add(s)
            except (OSError, ValueError, RuntimeError) as exc:
                logger.warning("check-in for an open item of %s not planned: %s", key, exc)
                break
            known.append(item.line)
            added += 1
        self._prune(chat)
        return added

    def _prune(self, chat: Chat) -> None:
        """Check-ins that ran, whose item has left MEMORY.md: no longer needed to keep it from being asked again."""
        present = [i.line for i in open_items.items(chat.memory.text)]
        for s in self.book.of(chat.key, checkins=True):
            if s.due is None and not any(open_items.same(s.item, p) for p in present):
                self.book.cancel(s)

    async def sweep(self) -> int:
        """Plan the check-ins of every chat that has them on (the hourly job); returns how many were added."""
        added = 0
        for info in await self.book.chats.chats():
            chat = await self.book.chats.open(info.key)
            if chat.prefs.checkins:
                added += self.plan(chat)
        return added

    def turned_off(self, key: ChatKey) -> int:
        """/checkins off: the chat's check-ins not yet asked are cancelled; returns how many."""
        pending = [s for s in self.book.of(key, checkins=True) if s.due is not None]
        for s in pending:
            self.book.cancel(s)
        return len(pending)

    def hold(self, s: Schedule, now: datetime, chat: Chat) -> Schedule | None:
        """`s` as it is when it must not run now (later, or skipped for good), else None: it runs."""
        assert s.due is not None  # held when its time came (Schedules._claim)
        zone = self.book.zone(chat.prefs)
        if not chat.prefs.checkins:
            return replace(s.with_run(Run(s.due, now, "skipped", "check-ins were turned off")), due=None)
        if not any(open_items.same(s.item, i.line) for i in open_items.items(chat.memory.text)):
            return replace(s.with_run(Run(s.due, now, "skipped", "the item is no longer in memory")), due=None)
        if (later := sensible(now, zone)) > now:
            return replace(s, due=later)
        today = now.astimezone(zone).date()
        asked = sum(1 for c in self.book.of(s.key, checkins=True) for r in c.runs
                    if r.status in ("fired", "delivered") and r.at.astimezone(zone).date() == today)
        if asked >= self.book.settings.checkins_daily:
            return replace(s, due=morning(today + timedelta(days=1), zone))
        return None

    def failed(self, s: Schedule) -> None:
        """Its model call failed: asked once more the next morning, then given up (the runs say so)."""
        current = self.book.get(s.id)
        if current is None or sum(r.status == "failed" for r in current.runs) >= TRIES:
            return
        zone = current.zone
        self.book.reschedule(current, morning(self.book.clock().astimezone(zone).date() + timedelta(days=1), zone))
