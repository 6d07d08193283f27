"""The ingress side of several processes: a message is stored and its turn queued in one transaction, and only
then acknowledged; what the turn said reaches the request that waits for it, whichever worker ran it.

    dispatch = Dispatch(db, sync_db, local={"http": http_channel})
    future = dispatch.submit(msg)     # committed: an `inbox` row and procrastinate's job (lock: the chat)
    await dispatch.start()            # LISTEN tusk_turn: results delivered to the local channels that wait
    result = await future             # the turn's TurnResult once a worker wrote its `done` row

`submit` runs in the caller's (synchronous) publish, so a platform update, a Slack event or an HTTP `POST`
is acknowledged after the commit: a crash after it loses nothing (the job runs on another worker). A message
with an `idempotency_key` (the HTTP header) that was submitted before, to this or any other ingress, is not
stored again: its future resolves with the first one's turn, and its replies are the first one's.

Results (store/postgres/schema/0009_cluster.sql `turn_results`): `reply` (a reply, numbered within its turn,
so one sent again by a retried turn is delivered once), `show`/`status`/`finish` (the reply being written,
for an event stream that watches) and `done` (the TurnResult). The listener reads them on every NOTIFY and
every POLL seconds (a lost connection or notification delays nothing for long).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Json

from bot.cluster import wire
from bot.threads import Spawned
from bot.events import ChatKey, InboundMessage, OutboundMessage, TurnResult
from store.errors import StorageUnavailable
from store.postgres.pool import CONNECT_TIMEOUT, Database, SyncDatabase

logger = logging.getLogger(__name__)

POLL = 2.0  # seconds between reads of the results without a notification
KEEP = "1 hour"  # how long results (and Idempotency-Keys) are kept for a repeated request


@dataclass
class Waiting:
    """A submitted message whose turn's results this process delivers."""

    msg: InboundMessage  # as its channel published it (its id is the channel's)
    future: asyncio.Future[TurnResult | None]
    after: int = 0  # the last result row delivered
    replies: set[int] = field(default_factory=set)  # reply numbers delivered


class _Repeated(Exception):
    """Another request with the same Idempotency-Key won the race: this transaction is rolled back."""


class Dispatch:
    def __init__(self, db: Database, sync_db: SyncDatabase, local: dict[str, Any], run: int,
                 on_stop: Callable[[InboundMessage], object] | None = None) -> None:
        """`local`: the channels of this process whose requests wait for their turn here (http, terminal),
        by name; `run`: this process's id in `inbox` rows (bot/inbox_pg.py's /forget reads them); `on_stop`:
        a /stop another process took, for the turns running here (bot/stop.py)."""
        self.db, self.sync_db, self.local, self.run, self.on_stop = db, sync_db, local, run, on_stop
        self.waiting: dict[int, Waiting] = {}  # inbox id -> what waits for it
        self._listening = Spawned()

    # -- in ------------------------------------------------------------------------------------------

    def submit(self, msg: InboundMessage) -> asyncio.Future[TurnResult | None]:
        """Store `msg` and queue its turn (StorageUnavailable when the database is down: not acknowledged)."""
        future: asyncio.Future[TurnResult | None] = asyncio.get_running_loop().create_future()
        outlet = self.local.get(msg.key.channel)
        watched = outlet is not None and getattr(outlet, "draft", None) is not None and outlet.draft(msg) is not None
        for _ in range(3):
            try:
                inbox_id = self._store(msg, watched)
                break
            except _Repeated:
                continue
        else:
            raise StorageUnavailable("an Idempotency-Key raced three times")  # not reachable in practice
        self.waiting[inbox_id] = Waiting(msg, future)
        future.add_done_callback(lambda _: self.waiting.pop(inbox_id, None))
        if msg.idempotency_key is not None:  # a repeat's results may all be there already
            asyncio.ensure_future(self._read())
        return future

    def _store(self, msg: InboundMessage, watched: bool) -> int:
        key = msg.key
        with self.sync_db.transaction() as conn:
            if msg.idempotency_key is not None:
                first = conn.execute("SELECT inbox FROM idempotency WHERE channel = %s AND chat_id = %s AND key = %s",
                                     (key.channel, key.chat_id, msg.idempotency_key)).fetchone()
                if first is not None:
                    return int(first[0])  # the first request's turn: nothing stored, nothing run again
            row = conn.execute(
                "INSERT INTO inbox (run, seq, channel, chat_id, sender_id, record) VALUES (%s, %s, %s, %s, %s, %s) "
                "RETURNING id", (self.run, msg.id, key.channel, key.chat_id, msg.sender_id,
                                 Json(wire.record_of(msg, watched)))).fetchone()
            assert row is not None  # RETURNING gives the row
            inbox_id = row[0]
            if msg.idempotency_key is not None and conn.execute(
                    "INSERT INTO idempotency (channel, chat_id, key, inbox) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING RETURNING inbox",
                    (key.channel, key.chat_id, msg.idempotency_key, inbox_id)).fetchone() is None:
                raise _Repeated()
            conn.execute("SELECT procrastinate_defer_jobs_v1(ARRAY[ROW(%s, %s, 0, %s, NULL, %s, NULL)"
                         "::procrastinate_job_to_defer_v1])",
                         (wire.TURN_QUEUE, wire.TURN_TASK, wire.lock_of(msg), Json({"inbox": inbox_id})))
        return int(inbox_id)

    def queued_runs(self) -> set[str]:
        """The schedule runs whose turn has a row: queued, running, or to run again after a dead worker."""
        with self.sync_db.connection() as conn:
            rows = conn.execute("SELECT record->'injected'->>'run' FROM inbox WHERE record->'injected'->>'run' <> ''")
            return {run for (run,) in rows}

    def stop(self, msg: InboundMessage) -> bool:
        """A /stop told to every process (its chat's turn may run on any worker); whether a turn of the chat
        is running somewhere now."""
        fields = {"channel": msg.key.channel, "chat_id": msg.key.chat_id, "sender_id": msg.sender_id,
                  "sender_name": msg.sender_name, "is_group": msg.is_group}
        with self.sync_db.transaction() as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (wire.STOP, json.dumps(fields)))
            row = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s AND status = 'doing'",
                               (wire.lock_of(msg),)).fetchone()
        return bool(row and row[0])

    def _stopped(self, payload: str) -> None:
        if self.on_stop is None:
            return
        try:
            f = json.loads(payload)
            msg = InboundMessage(ChatKey(f["channel"], f["chat_id"]), "/stop", sender_id=f["sender_id"],
                                 sender_name=f.get("sender_name", ""), is_group=bool(f.get("is_group")))
        except (ValueError, KeyError, TypeError):
            logger.warning("a /stop notification that is not one: %.80r", payload)
            return
        self.on_stop(msg)

    # -- out -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._listening.start(self._listen(), "turn results")

    async def close(self) -> None:
        await self._listening.cancel()
        for waiting in list(self.waiting.values()):
            waiting.future.cancel()

    async def _listen(self) -> None:
        """LISTEN on a connection of its own (made again when lost); read the results on each wake."""
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.db.url, autocommit=True,
                                                             connect_timeout=CONNECT_TIMEOUT,
                                                             application_name="tusk-results")
            except psycopg.Error:
                await asyncio.sleep(POLL)
                await self._read()
                continue
            try:
                async with conn:
                    await conn.execute(f"LISTEN {wire.CHANNEL}")
                    await conn.execute(f"LISTEN {wire.STOP}")
                    await self._read()  # what came while not listening
                    while True:
                        async for note in conn.notifies(timeout=POLL, stop_after=1):
                            if note.channel == wire.STOP:
                                self._stopped(note.payload)
                        await self._read()
            except (psycopg.Error, StorageUnavailable):
                logger.warning("turn results: the database connection was lost; listening again")
                await asyncio.sleep(POLL)

    async def _read(self) -> None:
        if not self.waiting:
            return
        ids = list(self.waiting)
        after = min(self.waiting[i].after for i in ids)
        try:
            async with self.db.connection() as conn:
                rows = await (await conn.execute(
                    "SELECT n, inbox, kind, body FROM turn_results WHERE inbox = ANY(%s) AND n > %s ORDER BY n",
                    (ids, after))).fetchall()
        except StorageUnavailable:
            return
        for n, inbox_id, kind, body in rows:
            waiting = self.waiting.get(inbox_id)
            if waiting is None or n <= waiting.after:
                continue
            waiting.after = n
            try:
                await self._deliver(waiting, kind, body)
            except Exception:  # one request's broken delivery must not stall the others'
                logger.exception("could not deliver a turn's result to %s", waiting.msg.key)

    async def _deliver(self, waiting: Waiting, kind: str, body: dict[str, Any]) -> None:
        msg = waiting.msg
        if kind == "done":
            if not waiting.future.done():
                waiting.future.set_result(wire.result_of(body))
            return
        outlet = self.local.get(msg.key.channel)
        if outlet is None:
            return
        number = body.get("i")
        if kind in ("reply", "finish") and number is not None:
            if number in waiting.replies:
                return  # sent again by a retried turn: delivered once
            waiting.replies.add(number)
        if kind == "reply":
            await outlet.send(OutboundMessage(msg.key, body["text"], reply_to=msg.id,
                                              verbatim=bool(body.get("verbatim")), ref=msg.ref))
            return
        draft = outlet.draft(msg) if getattr(outlet, "draft", None) is not None else None
        if draft is None:
            if kind == "finish":
                await outlet.send(OutboundMessage(msg.key, body["text"], reply_to=msg.id,
                                                  verbatim=bool(body.get("verbatim")), ref=msg.ref))
            return
        if kind == "show":
            await draft.show(body["text"])
        elif kind == "status":
            await draft.status(body["text"])
        elif kind == "finish":
            await draft.finish(body["text"], verbatim=bool(body.get("verbatim")))


async def prune(db: Database) -> int:
    """Results and Idempotency-Keys older than KEEP deleted; how many rows went."""
    async with db.transaction() as conn:
        gone = (await conn.execute(f"DELETE FROM turn_results WHERE at < now() - interval '{KEEP}'")).rowcount
        await conn.execute(f"DELETE FROM idempotency WHERE at < now() - interval '{KEEP}'")
        await conn.execute(f"DELETE FROM turn_claims WHERE at < now() - interval '{KEEP}'")
    return gone
