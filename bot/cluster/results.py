"""A local channel (the HTTP API, the terminal relay) as a worker sees it: what a turn says to a request that
waits on some ingress is written as `turn_results` rows and announced with NOTIFY tusk_turn; the ingress
holding the request delivers them (bot/cluster/dispatch.py). Replies are numbered within their turn, so a
reply a retried turn sends again is delivered once.

A turn whose chat another worker has taken over (store/fence.py) writes nothing: its rows are dropped.

    outlet = ResultsOutlet("http", db)      # registered on the worker's bus in place of the channel
    outlet.watch(inbox_id, watched)         # the worker, per turn: whether an event stream watches it
    outlet.forget(inbox_id)                 # the turn ended
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg.types.json import Json

from bot.cluster import wire
from bot.events import ChatKey, InboundMessage, OutboundMessage
from bot.stream import Draft
from store import fence
from store.postgres.pool import Database

logger = logging.getLogger(__name__)

DRAFT_INTERVAL = 0.3  # seconds between draft rows of one reply (each is a row and a notification)


class ResultsOutlet:
    voice = None  # spoken replies are not carried between processes (docs: Scaling out)

    def __init__(self, name: str, db: Database) -> None:
        self.name, self.db = name, db
        self._turns: dict[tuple[ChatKey, int], int] = {}  # (chat, the ingress's message id) -> inbox id
        self._watched: set[int] = set()
        self._numbers: dict[int, int] = {}  # inbox id -> replies numbered so far

    def watch(self, inbox_id: int, msg: InboundMessage, watched: bool) -> None:
        """A turn of this channel starts here: its replies name `msg.id` (the ingress's), its rows `inbox_id`
        (a chat's turns run one at a time, so the pair is unique while it runs)."""
        self._turns[(msg.key, msg.id)] = inbox_id
        if watched:
            self._watched.add(inbox_id)

    def forget(self, inbox_id: int, msg: InboundMessage) -> None:
        self._turns.pop((msg.key, msg.id), None)
        self._watched.discard(inbox_id)
        self._numbers.pop(inbox_id, None)

    @property
    def draft(self) -> Any:
        return self._draft

    def _draft(self, msg: InboundMessage) -> Draft | None:
        inbox_id = self._turns.get((msg.key, msg.id))
        return RemoteDraft(self, msg, inbox_id) if inbox_id in self._watched else None

    def number(self, inbox_id: int) -> int:
        n = self._numbers.get(inbox_id, 0)
        self._numbers[inbox_id] = n + 1
        return n

    async def send(self, msg: OutboundMessage) -> None:
        inbox_id = self._turns.get((msg.key, msg.reply_to)) if msg.reply_to is not None else None
        if inbox_id is None:
            logger.info("no request waits for a message to %s; it is kept in the session only", msg.key)
            return
        await self.write(inbox_id, msg.key, "reply", {"text": msg.text, "verbatim": msg.verbatim,
                                                      "i": self.number(inbox_id)})

    async def write(self, inbox_id: int, key: ChatKey, kind: str, body: dict[str, Any]) -> None:
        """One result row for the turn of `inbox_id`, announced (nothing when the chat was taken over)."""
        async with self.db.transaction() as conn:
            held = fence.current(key)
            if held is not None and not await fence.holds(conn, held):
                logger.warning("%s: another worker took this chat over; a %s of this turn is dropped", key, kind)
                return
            await conn.execute("INSERT INTO turn_results (inbox, channel, chat_id, kind, body) "
                               "VALUES (%s, %s, %s, %s, %s)", (inbox_id, key.channel, key.chat_id, kind, Json(body)))
            await conn.execute("SELECT pg_notify(%s, %s)", (wire.CHANNEL, str(inbox_id)))


class RemoteDraft:
    """The reply being written, for the event stream of a request on another process."""

    interval = DRAFT_INTERVAL

    def __init__(self, outlet: ResultsOutlet, msg: InboundMessage, inbox_id: int) -> None:
        self.outlet, self.msg, self.inbox = outlet, msg, inbox_id

    async def show(self, text: str) -> None:
        await self.outlet.write(self.inbox, self.msg.key, "show", {"text": text})

    async def status(self, text: str) -> None:
        await self.outlet.write(self.inbox, self.msg.key, "status", {"text": text})

    async def finish(self, text: str, verbatim: bool = False) -> None:
        await self.outlet.write(self.inbox, self.msg.key, "finish",
                                {"text": text, "verbatim": verbatim, "i": self.outlet.number(self.inbox)})
