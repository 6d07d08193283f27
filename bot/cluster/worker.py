"""The worker side of several processes: procrastinate (a PostgreSQL job queue) hands this process chats'
turns, one at a time per chat across the whole cluster and in the order they came (each job's lock is its
chat), different chats at once (`concurrency`).

    worker = TurnWorker(db, run_turn, resend, outlets, concurrency=8)
    await worker.start()       # procrastinate's worker, and the watch over dead workers' turns
    await worker.stop(grace)   # no new turn; those running finish (a rolling restart drops nothing)

A job carries only its inbox row's id (no text). Running it:
1. read the row (gone: the turn ended already, or /forget erased it: nothing to do);
2. take the chat: bump its epoch (store/fence.py), so a worker that held it before and was paused past its
   heartbeat writes nothing more into it nor sends anything for it;
3. a job run again after its worker died: when a run of it saved the turn already (its message claimed:
   store/fence.py), the saved replies are sent again (`resend`) instead of running the turn twice; otherwise
   the turn runs (`run_turn`: the local bus, bot/bus.py), its first write claiming the message, so a second
   run of it (a worker that only seemed dead) writes nothing;
4. one transaction: the `done` row for whoever waits (bot/cluster/dispatch.py) and the inbox row deleted.

Dead workers: procrastinate's heartbeat (every HEARTBEAT s); every worker looks every HEARTBEAT s for turns
whose worker has not beaten for STALLED s and puts them back in the queue, so a killed worker's turn runs
again elsewhere within about STALLED + HEARTBEAT seconds. A job that fails on the database (a restart) is
tried again (RETRY), so an acknowledged message is answered once the database is back.

The database gone (a restart): procrastinate's worker stops itself when its heartbeat or listener fails (it
leaves restarting to whatever runs it). This process runs it again, every RESTART s until the database
answers: a new worker row, its unfinished turns put back in the queue by the dead-workers watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict
from typing import Any, cast

import psycopg
from psycopg.types.json import Json

from bot.cluster import wire
from bot.cluster.results import ResultsOutlet
from bot.events import InboundMessage, TurnResult
from store import fence
from store.errors import StaleWrite, StorageUnavailable
from store.postgres.pool import Database

logger = logging.getLogger(__name__)

HEARTBEAT = 3.0  # seconds between a worker's heartbeats, and between its looks for dead workers' turns
STALLED = 12.0  # seconds without a heartbeat after which a worker's turns are run again elsewhere
RETRY_WAIT = 2  # seconds between tries of a job that failed on the database
POLL = 1.0  # seconds between looks for turns no notification announced (a chat's next, its lock let go elsewhere)
RESTART = 2.0  # seconds between starts of procrastinate's worker after it stopped on a database error
FORGOTTEN = 300.0  # seconds without a heartbeat after which a starting worker deletes a worker's row (not
# STALLED: after the database was away every row is old, and a row deleted orphans its live worker's turns)

RunTurn = Callable[[InboundMessage], Awaitable[TurnResult | None]]
Resend = Callable[[InboundMessage], Awaitable[bool]]  # the saved replies sent again; False: nothing was left


class TurnWorker:
    def __init__(self, db: Database, run_turn: RunTurn, resend: Resend, results: Iterable[ResultsOutlet],
                 concurrency: int, grace: float = 30.0) -> None:
        self.db, self.run_turn, self.resend = db, run_turn, resend
        self.results = {outlet.name: outlet for outlet in results}
        self.concurrency, self.grace = concurrency, grace
        self.in_flight = 0  # turns running here now (`tusk status`)
        self.taken_over = 0  # turns another worker took from this one (fenced)
        self.rerun = 0  # turns this worker put back in the queue after their worker died
        self._app: Any = None
        self._worker: Any = None
        self._stopping = asyncio.Event()
        self._running: dict[int, asyncio.Event] = {}  # inbox ids whose turn runs here, set when it ends
        self._tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        import procrastinate

        app = procrastinate.App(connector=procrastinate.PsycopgConnector(
            conninfo=self.db.url, min_size=1, max_size=max(2, self.concurrency // 2),
            kwargs={"application_name": "tusk-worker"}))
        # a turn the database failed, or a stop cut short (procrastinate cancels what outlasts its grace), is
        # run again: a BaseException type, which procrastinate's isinstance check takes though its hint says not
        again = cast(set[type[Exception]], {StorageUnavailable, psycopg.OperationalError, asyncio.CancelledError})
        retry = procrastinate.RetryStrategy(max_attempts=None, wait=RETRY_WAIT, retry_exceptions=again)
        app.task(name=wire.TURN_TASK, queue=wire.TURN_QUEUE, pass_context=True, retry=retry)(self._job)
        await app.open_async()
        self._app = app
        self._stopping.clear()
        self._tasks = [asyncio.create_task(self._work(), name="procrastinate worker"),
                       asyncio.create_task(self._watch(), name="dead workers' turns")]

    async def _work(self) -> None:
        """procrastinate's worker, run again whenever it stops on its own (a database error) until `stop`."""
        from procrastinate.exceptions import ConnectorException

        while not self._stopping.is_set():
            self._worker = _worker_class()(self._app, queues=[wire.TURN_QUEUE], concurrency=self.concurrency,
                                           install_signal_handlers=False, update_heartbeat_interval=HEARTBEAT,
                                           stalled_worker_timeout=FORGOTTEN, delete_jobs="successful",
                                           shutdown_graceful_timeout=self.grace, fetch_job_polling_interval=POLL)
            try:
                await self._worker.run()
            except (ConnectorException, psycopg.Error, OSError) as exc:  # the database down as it starts
                logger.warning("the job queue's worker could not run (%s); trying again in %.0f s",
                               str(exc).strip() or type(exc).__name__, RESTART)
            else:
                if self._stopping.is_set():
                    return
                logger.warning("the job queue's worker stopped (the database went away?); starting it again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), RESTART)

    async def stop(self) -> None:
        """No new turn; the running ones finish (up to `grace` seconds), then procrastinate closes."""
        self._stopping.set()
        if self._worker is not None:
            self._worker.stop()
        for task in self._tasks[1:]:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._app is not None:
            await self._app.close_async()
            self._app = None

    async def _watch(self) -> None:
        """Put back in the queue the turns of workers that stopped beating (killed, or paused). After the
        database was away no worker could beat: they are given STALLED seconds to beat again first."""
        from procrastinate.exceptions import ConnectorException

        manager = self._app.job_manager
        quiet_until = 0.0
        while True:
            await asyncio.sleep(HEARTBEAT)
            try:
                stalled = list(await manager.get_stalled_jobs(task_name=wire.TURN_TASK,
                                                              seconds_since_heartbeat=STALLED))
                if asyncio.get_running_loop().time() < quiet_until:
                    continue
                for job in stalled:
                    with contextlib.suppress(Exception):  # another worker put it back first
                        await manager.retry_job(job)
                        self.rerun += 1
                        logger.warning("a worker stopped beating: its turn (job %s) goes to another", job.id)
            except (psycopg.Error, StorageUnavailable, OSError, ConnectorException) as exc:
                logger.warning("could not look for dead workers' turns: %s", str(exc).strip() or type(exc).__name__)
                quiet_until = asyncio.get_running_loop().time() + STALLED + HEARTBEAT

    async def _job(self, context: Any, inbox: int) -> None:
        while (earlier := self._running.get(inbox)) is not None:  # the queue took this process for dead while
            await earlier.wait()  # it ran the turn (a late heartbeat): that run ends first, this one finds it done
        self._running[inbox] = asyncio.Event()
        try:
            await self._run(context, inbox)
        finally:
            self._running.pop(inbox).set()

    async def _run(self, context: Any, inbox: int) -> None:
        async with self.db.connection() as conn:
            row = await (await conn.execute("SELECT record FROM inbox WHERE id = %s", (inbox,))).fetchone()
        if row is None:
            return  # answered already, or erased by /forget
        msg, watched = wire.message_of(row[0])
        async with self.db.transaction() as conn:
            epoch = await fence.take(conn, msg.key)
            saved = await fence.claimed(conn, inbox)  # a run of it died after saving its turn
        outlet = self.results.get(msg.key.channel)
        if outlet is not None:
            outlet.watch(inbox, msg, watched)
        self.in_flight += 1
        try:
            wire.ANSWERING.set(inbox)  # this job's own context: its turn's /forget leaves this row out
            async with fence.fenced(msg.key, epoch, inbox) as held:
                if context.job.attempts:
                    logger.warning("%s: a turn run again (try %d)", msg.key, context.job.attempts + 1)
                result = TurnResult() if saved and await self.resend(msg) else await self.run_turn(msg)
                # (a claimed turn whose chat was erased since runs again: its writes are refused, nothing shows)
                await self._finish(inbox, msg, held, result)
        except StaleWrite as exc:
            self.taken_over += 1
            logger.warning("%s", exc)
        finally:
            self.in_flight -= 1
            if outlet is not None:
                outlet.forget(inbox, msg)

    async def _finish(self, inbox: int, msg: InboundMessage, held: fence.Fence, result: TurnResult | None) -> None:
        """The `done` row and the inbox row's deletion, in one transaction, if this worker still holds the chat."""
        async with self.db.transaction() as conn:
            if not await fence.holds(conn, held):
                raise StaleWrite(f"{msg.key}: another worker took this chat over while this turn ran; "
                                 "its end is that worker's to record")
            await conn.execute("INSERT INTO turn_results (inbox, channel, chat_id, kind, body) VALUES "
                               "(%s, %s, %s, 'done', %s)", (inbox, msg.key.channel, msg.key.chat_id,
                                                            Json(asdict(result) if result is not None else {})))
            await conn.execute("DELETE FROM inbox WHERE id = %s", (inbox,))
            await conn.execute("SELECT pg_notify(%s, %s)", (wire.CHANNEL, str(inbox)))


def _worker_class() -> type:
    from procrastinate.exceptions import ConnectorException
    from procrastinate.worker import Worker

    class Fetching(Worker):
        """procrastinate's worker, looking for the next job as soon as one ends (a chat's next turn waits on the
        lock of the one that ended, and no notification says it is free), and recording a job's end until the
        database takes it: a job left `doing` by a live worker would hold its chat's lock for ever."""

        async def _process_job(self, context: Any) -> None:
            try:
                await super()._process_job(context)
            finally:
                self._new_job_event.set()

        async def _persist_job_status(self, *args: Any, **kwargs: Any) -> None:
            while True:
                try:
                    return await super()._persist_job_status(*args, **kwargs)
                except ConnectorException as exc:
                    if not isinstance(exc.__cause__, psycopg.OperationalError):  # the database answered: the job
                        # was moved on (a paused worker's, put back in the queue; or this end, recorded already)
                        logger.warning("the queue has moved this turn's job on: %s", exc.__cause__)
                        return
                    logger.warning("could not record a turn's end in the queue (the database went?); "
                                   "trying again in %d s", RETRY_WAIT)
                await asyncio.sleep(RETRY_WAIT)

    return Fetching
