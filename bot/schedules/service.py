"""The schedules of a running Tusk: held in memory, kept in a `ScheduleStore`, run when due.

    start(scheduler)   load the store; one APScheduler job ("schedules") wakes at the earliest due time
    tick(now)          every schedule due by `now` is claimed in one store batch (timing.py decides the
                       run, if any, and what is passed over), then each run is published as a turn of its
                       chat (runs.py); the job is armed again for the next due time
    add / pause / resume / cancel / move / owned   what the tools, /reminders, the console and /forget do

Tests drive the clock: `clock` gives "now", and `tick(now)` runs what is due then, with no waiting.
A chat has at most `max_per_chat` reminders and schedules together (check-ins are not counted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import logging
import secrets
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo

from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.date import DateTrigger

from bot.commands.base import Owned, counted
from bot.events import ChatKey, InboundMessage
from bot.schedules import timing
from bot.schedules.model import Run, Schedule, instant
from bot.schedules.runs import Publish, RunTurns
from bot.schedules.store import FILE, FileStore, ScheduleStore
from memory import chat_settings
from memory.chat_settings import ChatSettings
from store.base import Chat, ChatStore
from store.errors import StorageUnavailable

logger = logging.getLogger(__name__)

JOB = "schedules"
FLUSH_AFTER = 1.0  # seconds: run outcomes recorded meanwhile are written together
UTC = timezone.utc


class Holds(Protocol):
    """Check-ins (bot/schedules/checkins.py): whether one may run now, and what follows a failed one."""

    def hold(self, s: Schedule, now: datetime, chat: Chat) -> Schedule | None: ...

    def failed(self, s: Schedule) -> None: ...


@dataclass(frozen=True, slots=True)
class ScheduleSettings:
    default_timezone: str = "UTC"
    grace_seconds: int = 86_400  # how late a run may still start after a downtime (TUSK_REMINDER_GRACE)
    max_per_chat: int = 50  # TUSK_MAX_REMINDERS: one-time and repeating together
    checkins_daily: int = 2  # TUSK_CHECKINS_DAILY


class Schedules:
    def __init__(self, home: Path, settings: ScheduleSettings, publish: Publish, chats: ChatStore,
                 store: ScheduleStore | None = None, clock: Callable[[], datetime] | None = None) -> None:
        self.home = Path(home)
        self.chats = chats  # what a due run's chat holds: whether it still exists, its settings and memory
        self.settings = settings
        self.grace = timedelta(seconds=settings.grace_seconds)
        self.default_zone = chat_settings.zone(settings.default_timezone)
        self.store: ScheduleStore = store if store is not None else FileStore(self.home / FILE)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.turns = RunTurns(self, publish)
        self.checkins: Holds | None = None  # set by bot/schedules/checkins.py when it is wired
        self.started_at = self.clock()
        self._all: dict[str, Schedule] = {}
        self._heap: list[tuple[datetime, str]] = []
        self._scheduler: BaseScheduler | None = None
        self._running = False
        self._flush: asyncio.TimerHandle | None = None
        self._claimed: set[str] | None = set()  # runs this process started before `settle` (it leaves them alone)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, scheduler: BaseScheduler | None = None) -> None:
        """Load the store; those already due run at the first tick (with a scheduler: as soon as it runs)."""
        self.started_at = self.clock()
        self._all = {s.id: s for s in self.store.load()}
        self._heap = [(instant(s.due), s.id) for s in self._all.values() if s.due is not None and not s.paused]
        heapq.heapify(self._heap)  # (due in UTC, id): popped in time order by `tick`
        self._scheduler = scheduler
        self._running = True
        self._arm()

    def refresh(self) -> None:
        """Read the schedules again (several processes: others add, change and run them); the outcomes this
        process recorded are written first."""
        if not self._running:
            return
        try:
            self.store.flush()
            self._all = {s.id: s for s in self.store.load()}
        except (OSError, StorageUnavailable):
            logger.warning("could not read the schedules again; keeping those known", exc_info=True)
            return
        self._heap = [(instant(s.due), s.id) for s in self._all.values() if s.due is not None and not s.paused]
        heapq.heapify(self._heap)
        self._arm()

    def stop(self) -> None:
        """No more ticks; outcomes recorded so far are written."""
        self._running = False
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self.store.flush()

    def settle(self, replayed: list[InboundMessage], queued: Collection[str] = ()) -> None:
        """After a start: runs left `fired` by the previous process whose turn is not being run again from the
        inbox journal are recorded as failed (it stopped before their turn was saved). Several processes: the
        runs whose turn is `queued` in the database (waiting, running, or to run again after a dead worker)
        are left alone."""
        again = {m.injected.run for m in replayed if m.injected is not None and m.injected.run}
        again |= self._claimed or set()
        again |= set(queued)
        self._claimed = None  # only the start needs them
        for s in list(self._all.values()):
            for run in s.runs:
                if run.status == "fired" and self.turns.ref(s, run.due) not in again:
                    self.record_run(s.id, run._replace(status="failed", why="Tusk stopped before it was delivered"))

    @property
    def running(self) -> bool:
        return self._running

    # -- the clock -------------------------------------------------------------------------------

    def _push(self, s: Schedule) -> None:
        """`s`'s due time in the heap; the entries of its earlier due times stay until they come up (then
        skipped), unless they pile up: the heap is built again from the schedules when it is twice their number."""
        if s.due is not None and not s.paused:
            heapq.heappush(self._heap, (instant(s.due), s.id))
        if len(self._heap) > 2 * len(self._all) + 64:
            self._heap = [(instant(x.due), x.id) for x in self._all.values() if x.due is not None and not x.paused]
            heapq.heapify(self._heap)

    def _current(self, entry: tuple[datetime, str]) -> Schedule | None:
        s = self._all.get(entry[1])
        return s if s is not None and not s.paused and s.due is not None and instant(s.due) == entry[0] else None

    def next_due(self) -> datetime | None:
        """The earliest due time of a schedule that is not paused."""
        while self._heap and self._current(self._heap[0]) is None:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def _arm(self) -> None:
        """The wake-up job at the earliest due time (replacing the one set before)."""
        if self._scheduler is None or not self._running:
            return
        earliest = self.next_due()
        if earliest is None:
            if self._scheduler.get_job(JOB) is not None:
                self._scheduler.remove_job(JOB)
            return
        wake = datetime.now(UTC) + max(timedelta(0), earliest - self.clock())  # as far off as by `clock`
        self._scheduler.add_job(self.tick, DateTrigger(wake), id=JOB, replace_existing=True,
                                misfire_grace_time=None, coalesce=True, max_instances=1)

    async def tick(self, now: datetime | None = None) -> int:
        """Start every run due by `now`; returns how many were published."""
        now = instant(now or self.clock())
        due = []
        while self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            if (s := self._current(entry)) is not None:
                due.append(s)
        chats = {key: await self.chats.open(key) for key in {s.key for s in due}}
        started: list[tuple[Schedule, Run]] = []
        with self.store.batch():  # every claim of this tick in one write, before any turn is published
            for s in due:
                started += self._claim(s, now, chats[s.key])
        published = sum(self.turns.publish(s, run, now) for s, run in started)
        self._arm()
        return published

    def _claim(self, s: Schedule, now: datetime, chat: Chat) -> list[tuple[Schedule, Run]]:
        if not chat.exists:
            logger.info("%s %s dropped: its chat %s was forgotten", s.kind, s.id, s.key)
            self._drop(s)
            return []
        if s.kind == "checkin" and self.checkins is not None:
            if (held := self.checkins.hold(s, now, chat)) is not None:  # postponed, or its item is gone
                if self._save_claim(held, s):
                    self._push(held)
                return []
        p = timing.plan(s, now, self.grace)
        updated = s
        if p.first_missed is not None:  # p.missed runs were passed over
            updated = updated.with_run(Run(p.first_missed, now, "missed", count=p.missed))
            logger.warning("%s %s of %s: %d run(s) passed over (Tusk was not running, or they are older than "
                           "TUSK_REMINDER_GRACE)", s.kind, s.id, s.key, p.missed)
        run = Run(p.run, now, "fired", late=timing.late(p.run, now, self.started_at)) if p.run else None
        if run is not None:
            updated = updated.with_run(run)
            if self._claimed is not None:
                self._claimed.add(self.turns.ref(s, run.due))
        updated = replace(updated, due=p.next)
        if not self._save_claim(updated, s):
            return []
        if s.kind == "reminder":  # a one-time reminder leaves the store once started (the inbox journal has it)
            self._drop(updated)
        self._push(updated)
        return [(updated, run)] if run is not None else []

    def _save_claim(self, updated: Schedule, s: Schedule) -> bool:
        assert s.due is not None  # claimed because its time came
        try:
            if not self.store.claim(updated, s.due):
                return False  # another process runs it
        except (OSError, StorageUnavailable):  # not kept: run it anyway (a restart may repeat it), rather than lose it
            logger.exception("could not record that %s %s started", s.kind, s.id)
        self._all[s.id] = updated
        return True

    def checkin_failed(self, s: Schedule) -> None:
        if self.checkins is not None:
            self.checkins.failed(s)

    def record_run(self, schedule_id: str, run: Run) -> None:
        """A run's outcome, written within FLUSH_AFTER seconds (with the others ending meanwhile)."""
        if (s := self._all.get(schedule_id)) is None:
            return
        self._all[schedule_id] = s.with_run(run)
        self.store.record_run(schedule_id, run, soon=self._running)  # stopping: at once
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.store.flush()
            return
        if self._flush is None:
            self._flush = loop.call_later(FLUSH_AFTER, self._flush_now)

    def _flush_now(self) -> None:
        self._flush = None
        try:
            self.store.flush()
        except (OSError, StorageUnavailable):
            logger.exception("could not write the outcome of schedule runs")

    # -- the book --------------------------------------------------------------------------------

    def zone(self, prefs: ChatSettings) -> ZoneInfo:
        """A chat's time zone: its own (/timezone), else TUSK_TIMEZONE."""
        return chat_settings.zone_of(prefs, self.default_zone)

    def get(self, schedule_id: str) -> Schedule | None:
        return self._all.get(schedule_id)

    def all(self) -> list[Schedule]:
        return list(self._all.values())

    def of(self, key: ChatKey, checkins: bool = False) -> list[Schedule]:
        """This chat's reminders and schedules (with `checkins`: its check-ins only), soonest first, paused last."""
        far = datetime.max.replace(tzinfo=UTC)
        mine = [s for s in self._all.values() if s.key == key and (s.kind == "checkin") == checkins]
        return sorted(mine, key=lambda s: (s.paused, instant(s.due) if s.due else far, s.id))

    def mine(self, key: ChatKey, schedule_id: str) -> Schedule:
        found = self._all.get(schedule_id.strip())
        if found is None or found.key != key or found.kind == "checkin":  # another chat's id: as an unknown one
            raise ValueError(f"there is no reminder {schedule_id.strip()!r} in this chat; list_reminders shows them")
        return found

    def new_id(self, prefix: str) -> str:
        sid = prefix + secrets.token_hex(3)
        while sid in self._all:
            sid = prefix + secrets.token_hex(3)
        return sid

    def add(self, s: Schedule) -> Schedule:
        """Keep and arm `s`; ValueError past the chat's maximum, RuntimeError while not running."""
        if not self._running:
            raise RuntimeError("Tusk is starting or shutting down and cannot set reminders right now")
        if s.kind != "checkin" and len(self.of(s.key)) >= self.settings.max_per_chat:
            raise ValueError(f"this chat already has {self.settings.max_per_chat} reminders, the most it may have: "
                             "cancel one first")
        self.store.add(s)  # OSError: not kept, and the caller says so
        self._all[s.id] = s
        self._push(s)
        self._arm()
        return s

    def _replace(self, s: Schedule) -> Schedule:
        self.store.update(s)
        self._all[s.id] = s
        self._push(s)
        self._arm()
        return s

    def reschedule(self, s: Schedule, due: datetime) -> Schedule:
        return self._replace(replace(s, due=due))

    def pause(self, s: Schedule) -> Schedule:
        return self._replace(replace(s, paused=True))

    def resume(self, s: Schedule) -> Schedule:
        """Runs again from its next time after now (the times passed while paused are not made up)."""
        assert s.rule is not None
        return self._replace(replace(s, paused=False, due=s.rule.after(self.clock())))

    def cancel(self, s: Schedule) -> None:
        self._drop(s)
        self._arm()

    def _drop(self, s: Schedule) -> None:
        self.store.remove(s.id)  # straight to the store: it works during shutdown too
        self._all.pop(s.id, None)

    def move(self, old: ChatKey, new: ChatKey) -> int:
        """The schedules of chat `old` now belong to `new` (a Telegram group upgraded: bot/chat_move.py)."""
        moved = [dataclasses.replace(s, key=new) for s in self._all.values() if s.key == old]
        with self.store.batch():
            for s in moved:
                self.store.update(s)
                self._all[s.id] = s
        return len(moved)

    def owned(self, key: ChatKey) -> list[Owned]:
        """For /forget: this chat's reminders, schedules and check-ins, cancelled and removed from reminders.json."""
        mine = [s for s in self._all.values() if s.key == key]
        if not mine:
            return []

        def cancel_all() -> None:
            with self.store.batch():
                for s in [s for s in self._all.values() if s.key == key]:
                    self._drop(s)

        what = counted(len(mine), "reminder or schedule", "reminders and schedules")
        return [Owned(f"{what} (cancelled and removed from {getattr(self.store, 'where', FILE)})", cancel_all)]
