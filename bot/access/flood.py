"""Flood limits: turns per minute per sender and per chat, and new chats per hour, for every platform.

The platform channels publish through `FloodGate.publish`, which stands in front of the bus. A
message over a limit is not queued, journaled, saved or sent to the model: the sender gets one
polite reply (again only once the limit's window has passed) and the rest is silence.

    TUSK_RATE_SENDER_PER_MINUTE    turns one person may start per minute (all chats together)
    TUSK_RATE_CHAT_PER_MINUTE      turns one chat may start per minute (all its members together)
    TUSK_RATE_NEW_CHATS_PER_HOUR   chats Tusk has never seen (no folder yet) that may start per hour

0 turns a limit off. The local HTTP API and the terminal (the owner's) and the turns Tusk starts
itself (reminders, task results) are never limited. Windows slide; idle keys are forgotten.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from bot import metrics
from bot.delivery import Send
from bot.events import ChatKey, InboundMessage, OutboundMessage, TurnResult
from bot.threads import Spawned

logger = logging.getLogger(__name__)

Done = asyncio.Future[TurnResult | None]  # the bus's publish: resolved when the turn is done, with how it ended
LOCAL = frozenset({"http", "terminal"})
REPLIES = {
    "sender": "You are writing faster than I can answer: please wait a minute, then send it again.",
    "chat": "This chat is sending more messages than I can answer right now: please wait a minute.",
    "new": "I am not starting new conversations right now: please try again later.",
}


@dataclass(frozen=True, slots=True)
class FloodLimits:
    sender_per_minute: int = 20
    chat_per_minute: int = 30
    new_chats_per_hour: int = 60


class Window:
    """At most `limit` hits per key in any `span` seconds (0: unlimited); at most `keys` keys are kept."""

    def __init__(self, limit: int, span: float, keys: int = 10_000) -> None:
        self.limit, self.span, self.keys = limit, span, keys
        self._hits: OrderedDict[Hashable, deque[float]] = OrderedDict()

    def full(self, key: Hashable, now: float) -> bool:
        hits = self._hits.get(key)
        if not self.limit or hits is None:
            return False
        while hits and hits[0] <= now - self.span:
            hits.popleft()
        return len(hits) >= self.limit

    def add(self, key: Hashable, now: float) -> None:
        if not self.limit:
            return
        self._hits.setdefault(key, deque()).append(now)
        self._hits.move_to_end(key)
        while len(self._hits) > self.keys:  # the least recently active key: its window is the oldest
            self._hits.popitem(last=False)


class FloodGate:
    def __init__(self, limits: FloodLimits, publish: Callable[[InboundMessage], Done],
                 send: Send, known: Callable[[ChatKey], bool],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._publish, self._send, self._known, self._clock = publish, send, known, clock
        self._windows = {"new": Window(limits.new_chats_per_hour, 3600.0),
                         "sender": Window(limits.sender_per_minute, 60.0),
                         "chat": Window(limits.chat_per_minute, 60.0)}
        self._seen: OrderedDict[ChatKey, None] = OrderedDict()  # chats taken since start (their folder may lag)
        self._warned: dict[tuple[str, Hashable], float] = {}  # (limit, key) -> when the polite reply went out
        self._replies = Spawned()  # flood notices being sent

    def publish(self, msg: InboundMessage) -> Done:
        """The bus's publish, unless `msg` is over a limit: then a resolved future (and maybe one reply)."""
        if msg.injected is not None or msg.key.channel in LOCAL:
            return self._publish(msg)
        now = self._clock()
        new = msg.key not in self._seen and not self._known(msg.key)
        keys = {"new": "all" if new else None, "sender": (msg.key.channel, msg.sender_id), "chat": msg.key}
        over = next((name for name, key in keys.items() if key is not None and self._windows[name].full(key, now)),
                    None)
        if over is None:
            done = self._publish(msg)  # may raise BusClosed: then nothing is counted
            for name, key in keys.items():
                if key is not None:
                    self._windows[name].add(key, now)
            self._seen[msg.key] = None
            self._seen.move_to_end(msg.key)
            if len(self._seen) > 10_000:
                self._seen.popitem(last=False)
            return done
        return self._refuse(msg, over, msg.key if over == "new" else keys[over], now)

    def _refuse(self, msg: InboundMessage, limit: str, key: Hashable, now: float) -> Done:
        """One polite reply per limit and key until its window has passed; silence otherwise."""
        metrics.flood_refusal(msg.key.channel, limit)
        done: Done = asyncio.get_running_loop().create_future()
        last = self._warned.get((limit, key))
        if last is not None and now - last < self._windows[limit].span:
            done.set_result(None)
            return done
        if len(self._warned) > 10_000:
            self._warned = {k: t for k, t in self._warned.items() if now - t < self._windows[k[0]].span}
        self._warned[(limit, key)] = now
        logger.warning("flood limit (%s) reached in %s by sender %s: not answered", limit, msg.key, msg.sender_id)
        notice = OutboundMessage.answer(msg, REPLIES[limit], verbatim=True)
        task = self._replies.start(self._send(notice), f"flood notice {msg.key}")

        def sent(_: object) -> None:
            if not done.done():
                done.set_result(None)

        task.add_done_callback(sent)
        return done
