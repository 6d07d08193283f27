"""A turn's reply on its way to the chat: shown while it is written where a draft watches, then delivered.

    Delivery.live(msg)             the turn's `Live` (bot/stream.py) when TUSK_STREAM=auto and the channel
                                   offers a draft for this reply (a chat that shows replies being written,
                                   an SSE client, the terminal); None: a turn nobody watches is one plain
                                   request
    Delivery.deliver(reply, live)  the final reply replaces the draft that showed it being written, else
                                   it goes out through the channel's `send` (split, formatted; Tusk's own
                                   words, `reply.verbatim`, shown as written either way)

A streamed reply the platform refuses at the end is logged, not sent again: the session keeps it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.errors import DeliveryError
from bot.events import InboundMessage, OutboundMessage
from bot.stream import Drafts, Live, StreamSettings
from store.errors import RETRIED, StorageUnavailable

logger = logging.getLogger(__name__)

Send = Callable[[OutboundMessage], Awaitable[bool | None]]  # False: not delivered (bot/bus.py)


class Delivery:
    def __init__(self, send: Send, drafts: Drafts | None = None,
                 streaming: StreamSettings = StreamSettings("off")) -> None:
        self.send = send
        self.drafts = drafts
        self.streaming = streaming

    def live(self, msg: InboundMessage) -> Live | None:
        """The turn's stream (TUSK_STREAM=auto) where someone watches it: a channel's draft (a chat that shows
        replies being written, an SSE client, the terminal). A turn nobody watches is one plain request."""
        draft = self.drafts(msg) if self.streaming.on and self.drafts else None
        return Live(draft, self.streaming.min_chars) if draft is not None else None

    async def deliver(self, reply: OutboundMessage, live: Live | None) -> bool:
        """The final reply: it replaces the draft that showed it being written, else it is sent. False when
        the platform did not take it (logged; a schedule's run records it)."""
        try:
            if live is not None and await live.finish(reply.text, reply.verbatim):
                return True
        except DeliveryError as exc:  # the platform refused it: its message says why and what to do
            logger.error("could not deliver a streamed reply to %s: %s", reply.key, exc, exc_info=exc)
            return False
        except Exception as exc:  # delivery boundary, as in the bus: the session keeps the reply
            if isinstance(exc, StorageUnavailable) and RETRIED.get():
                raise  # as in the bus
            logger.exception("could not deliver a streamed reply to %s", reply.key)
            return False
        return await self.send(reply) is not False
