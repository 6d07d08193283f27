"""What one process of several runs, by its role (`tusk run --role all|ingress|worker`), beside the parts
every Tusk has (bot/app.py):

    ingress   takes platform traffic and the local HTTP API: each message stored and its turn queued
              (bot/cluster/dispatch.py); the results of its requests' turns delivered to them
    worker    runs turns from the queue (bot/cluster/worker.py), sends replies through each platform's API,
              runs the schedules (each run claimed once across processes) and, while it leads
              (bot/cluster/leader.py), the consolidation sweep, the check-ins and the daily backup
    all       both (the default)

Files: no cluster, one process (roles other than `all` are refused).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from bot.cluster.dispatch import Dispatch, prune
from bot.cluster.leader import POLLING, Leader
from bot.cluster.processes import Processes
from bot.cluster.results import ResultsOutlet
from bot.cluster.worker import TurnWorker
from bot.errors import ConfigError
from bot.events import InboundMessage, TurnResult
from bot.stop import NOTHING_TO_STOP, Stops
from store import Store
from store.errors import StorageUnavailable

Role = Literal["all", "ingress", "worker"]
ROLES: tuple[Role, ...] = ("all", "ingress", "worker")
LOCAL = ("http", "terminal")  # channels whose requests wait on the process that took them
PRUNE_EVERY = 600  # seconds between prunings of old turn results
logger = logging.getLogger(__name__)


def refuse_role(store: Store, role: str) -> None:
    if role not in ROLES:
        raise ConfigError(f"--role {role}: expected one of {', '.join(ROLES)}")
    if role != "all" and store.kind != "postgres":
        raise ConfigError(f"--role {role} needs TUSK_DATABASE_URL: several processes share one PostgreSQL "
                          "database (docs: Scaling out); on files one Tusk runs with every role")


class Cluster:
    def __init__(self, store: Store, role: Role, run_turn: Callable[[InboundMessage], Awaitable[TurnResult | None]],
                 resend: Callable[[InboundMessage], Awaitable[bool]], turns: int, grace: float,
                 stops: Stops) -> None:
        self.role = role
        self.run = secrets.randbelow(2**31 - 1) + 1  # this process in `inbox` rows
        self.stops = stops
        self.dispatch = Dispatch(store.db, store.sync_db, local={}, run=self.run, on_stop=stops.answer)
        self.results = {name: ResultsOutlet(name, store.db) for name in LOCAL}
        self.leader = Leader(store.db.url)
        self.db = store.db
        self.processes: Processes | None = None
        self.polling: Leader | None = None  # Telegram's long polling, on one ingress at a time
        self._pruning: asyncio.Task[None] | None = None
        self.started = False
        self.worker = TurnWorker(store.db, run_turn, resend, self.results.values(), turns, grace) \
            if role != "ingress" else None

    def at_once(self, msg: InboundMessage) -> str | None:
        """/stop, answered as it arrives: the turns running here stopped, and every other process told (the
        chat's turn may run on any worker); "" when one runs somewhere (its reply, ending in its note, is the
        answer), NOTHING_TO_STOP when none does."""
        answer = self.stops.answer(msg)
        if answer != NOTHING_TO_STOP or not self.started:
            return answer
        return "" if self.dispatch.stop(msg) else answer

    def submit(self, msg: InboundMessage) -> asyncio.Future[TurnResult | None] | None:
        """`msg` stored and its turn queued for the cluster's workers; None before `start` (an app that was
        not started, as a tool or a test makes one, runs its turns in its own process)."""
        return self.dispatch.submit(msg) if self.started else None

    @property
    def works(self) -> bool:
        return self.worker is not None

    @property
    def takes(self) -> bool:
        """Whether this process takes platform traffic (ingress or all)."""
        return self.role != "worker"

    def outlet(self, channel: Any) -> Any:
        """What the bus sends through for `channel`: a local channel's requests may wait on another process, so
        its replies are results (the channel itself gets them from the dispatch); a platform's, itself."""
        if channel.name in self.results:
            self.dispatch.local[channel.name] = channel
            return self.results[channel.name]
        return channel

    async def _prune(self) -> None:
        """Every PRUNE_EVERY seconds, on the process that leads: turn results, Idempotency-Keys and turn claims
        older than an hour deleted (bot/cluster/dispatch.py `prune`)."""
        while True:
            await asyncio.sleep(PRUNE_EVERY)
            if self.leader.held:
                try:
                    gone = await prune(self.db)
                except StorageUnavailable:
                    continue
                logger.info("pruned %d turn result(s) older than an hour", gone)

    def in_flight(self) -> int:
        return self.worker.in_flight if self.worker is not None else 0

    async def start(self) -> None:
        self.started = True
        await self.dispatch.start()
        await self.leader.start()
        self._pruning = asyncio.create_task(self._prune(), name="old turn results")
        if self.polling is not None:
            await self.polling.start()
        if self.worker is not None:
            await self.worker.start()

    def poll(self, make: Callable[[], Any]) -> None:
        """Telegram's long polling on whichever process of the cluster holds its lock (Telegram answers one
        getUpdates at a time): `make()` builds a receiving channel, started when this process gains the lock
        and stopped when it loses it; replies go through the send-only channel every process has."""
        polled: list[Any] = []

        async def gained() -> None:
            channel = make()
            await channel.start()
            polled.append(channel)

        async def lost() -> None:
            while polled:
                await polled.pop().stop()

        self.polling = Leader(self.db.url, POLLING, gained, lost)

    async def register(self, url: str | None) -> None:
        """This process's row in `processes` (`tusk status`), its heartbeat carrying the turns in flight."""
        self.processes = Processes(self.db, self.role, self.in_flight, url)
        await self.processes.start()

    async def stop(self) -> None:
        """The worker first (no new turn; running ones finish), then the rest."""
        self.started = False
        if self._pruning is not None:
            self._pruning.cancel()
        if self.worker is not None:
            await self.worker.stop()
        if self.processes is not None:
            await self.processes.stop()
        if self.polling is not None:
            await self.polling.stop()
        await self.leader.stop()
        await self.dispatch.close()
