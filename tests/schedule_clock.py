"""A clock the schedule tests drive, and a Tusk whose schedules (bot/schedules/) read it.

    clock = Clock(berlin(2026, 3, 27, 9))          # "now", moved by the test
    async with clocked(make_settings, clock) as (app, box):
        clock.set(berlin(2026, 3, 30, 8))
        assert await app.schedules.tick() == 1      # the runs due by then are started: nothing waits for time

The scheduler's own wake-up is set as far off in real time as the next due time is by this clock, so it
never runs a tick the test did not ask for while the clock stands still.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.events import ChatKey
from tests.fakes.fake_llm import Reply
from tests.outbox import attach

BERLIN = ZoneInfo("Europe/Berlin")


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def set(self, now: datetime) -> None:
        self.now = now


@contextlib.asynccontextmanager
async def clocked(make_settings, clock: Clock, **env):
    """A running TuskApp (no channel) whose schedules read `clock`, with an Outbox on the http channel."""
    from bot.app import TuskApp

    app = TuskApp(make_settings(**env))
    app.schedules.clock = clock
    box = attach(app)
    async with app:
        yield app, box


def scheduling(text: str, repeat: str = "", when: str = "", kind: str = "text", cid: str = "c1") -> Reply:
    """The model calling set_reminder."""
    args = {"text": text, **({"repeat": repeat} if repeat else {}), **({"when": when} if when else {}),
            **({"kind": kind} if repeat else {})}
    return Reply(text=None, tool_calls=[(cid, "set_reminder", args)])


async def outcome(app, schedule_id: str, due: datetime, timeout: float = 5.0):
    """The run of `schedule_id` for `due` once its turn has ended (delivered or failed)."""
    deadline = time.monotonic() + timeout
    while True:
        s = app.schedules.get(schedule_id)
        run = s.run_for(due) if s is not None else None
        if run is not None and run.status in ("delivered", "failed"):
            return run
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {schedule_id}@{due} has no outcome: {run}")
        await asyncio.sleep(0.02)


def only(app, chat: str):
    """The one reminder or schedule of http chat `chat`."""
    (s,) = app.schedules.of(ChatKey("http", chat))
    return s
