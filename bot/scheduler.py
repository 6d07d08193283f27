"""Scheduled work (APScheduler 3.11 `AsyncIOScheduler`): the consolidation sweep, reminders and schedules,
check-ins, the daily backup.

Every `TUSK_CONSOLIDATE_EVERY` minutes, chats whose session file changed since the last
sweep (all chats, on the first sweep after a start) are checked and consolidated if over
budget: this catches chats left over budget by a restart or a failed run. The job is
coalesced and never runs twice at once; it lives in the default (memory) job store.

Reminders and schedules (bot/schedules/) are loaded before the scheduler starts and woken by one job of
it, "schedules", always set for the earliest due time, so those that fell due while Tusk was down run
at once (at most one catch-up each). Check-ins are planned by an hourly job, "checkins" (the first a
minute after the start).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot import logs
from bot.events import ChatKey
from bot.schedules.checkins import CheckIns
from bot.schedules.service import Schedules
from store.base import ChatStore

logger = logging.getLogger(__name__)

FIRST_SWEEP_AFTER = 30  # seconds after start: catches chats a restart left over budget
FIRST_CHECKINS_AFTER = 60  # seconds after start, then hourly: open items planned as check-ins
REFRESH = 15  # seconds between reads of the schedules other processes may have changed (several processes)

Consolidate = Callable[[ChatKey], Awaitable[None]]


class Sweeper:
    def __init__(self, chats: ChatStore, consolidate: Consolidate) -> None:
        self.chats = chats
        self.consolidate = consolidate
        self._seen: dict[ChatKey, float | None] = {}  # chat -> its last activity when last checked

    async def changed_chats(self) -> list[ChatKey]:
        keys = []
        for chat in await self.chats.chats():
            if chat.messages and self._seen.get(chat.key, -1.0) != chat.last_active:
                self._seen[chat.key] = chat.last_active
                keys.append(chat.key)
        return keys

    async def sweep(self) -> int:
        """Consolidate every changed chat that is over budget; returns how many chats were checked."""
        keys = await self.changed_chats()
        for key in keys:
            with logs.bound(key, "sweep"):
                try:
                    await self.consolidate(key)
                except Exception:  # sweep boundary: one chat's failure must not stop the others
                    logger.exception("sweep could not consolidate this chat")
        return len(keys)


def start_scheduler(sweeper: Sweeper, every_minutes: float, schedules: Schedules | None = None,
                    daily: Callable[[], Awaitable[object]] | None = None,
                    checkins: CheckIns | None = None, leading: Callable[[], bool] | None = None,
                    shared: bool = False) -> AsyncIOScheduler:
    """`daily`: the scheduled backup (bot/ops/backup.py), first run an hour after the start, then every 24 h.
    Several processes (bot/cluster/): the backup, the check-in and consolidation sweeps run where `leading()`
    says; `shared` schedules (in the database) are read again every REFRESH seconds, since other processes
    add and change them (each run is claimed once across processes: bot/schedules/store_pg.py)."""
    scheduler = AsyncIOScheduler(timezone="UTC")
    now = datetime.now(timezone.utc)
    if daily is not None:
        scheduler.add_job(_led(daily, leading), "interval", hours=24, id="backup", coalesce=True, max_instances=1,
                          next_run_time=now + timedelta(hours=1))
    if schedules is not None:
        schedules.start(scheduler)
        if shared:
            scheduler.add_job(schedules.refresh, "interval", seconds=REFRESH, id="schedules-refresh",
                              coalesce=True, max_instances=1)
    if checkins is not None:
        scheduler.add_job(_led(checkins.sweep, leading), "interval", hours=1, id="checkins", coalesce=True,
                          max_instances=1, next_run_time=now + timedelta(seconds=FIRST_CHECKINS_AFTER))
    scheduler.add_job(_led(sweeper.sweep, leading), "interval", minutes=every_minutes, id="consolidation-sweep",
                      coalesce=True, max_instances=1, next_run_time=now + timedelta(seconds=FIRST_SWEEP_AFTER))
    scheduler.start()
    return scheduler


def _led(job: Callable[[], Awaitable[object]], leading: Callable[[], bool] | None) -> Callable[[], Awaitable[object]]:
    """`job`, run only while this process leads (always, with one process)."""
    if leading is None:
        return job

    async def led() -> object:
        return await job() if leading() else None
    return led
