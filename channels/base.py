"""The contract every channel keeps, and what it is given to publish with.

A channel turns platform updates into `InboundMessage`s (gating, allow-list and mention
rules included) and hands them to `publish`, which returns a future resolved when the
turn is done; the bus calls `send` with the replies. A message without text (a sticker, a
file without caption) is published with empty text: the agent answers what it can read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from bot.events import InboundMessage, OutboundMessage

logger = logging.getLogger(__name__)

Publish = Callable[[InboundMessage], asyncio.Future[None]]



class AllowList:
    """Who may talk to the bot (`*_ALLOW_FROM`; empty: everyone). A refused sender costs nothing and
    is logged once, by id (so the operator can find theirs), never with what they wrote."""

    def __init__(self, entries: frozenset[str], variable: str, remember: int = 10_000) -> None:
        self.entries = entries
        self.variable = variable
        self._logged: set[str] = set()
        self._remember = remember

    def admits(self, sender_id: str, *aliases: str | None) -> bool:
        """True if the list is empty or names the sender's id or one of its aliases (a @username)."""
        if not self.entries or any(i is not None and i in self.entries for i in (sender_id, *aliases)):
            return True
        if sender_id not in self._logged and len(self._logged) < self._remember:
            self._logged.add(sender_id)
            logger.info("ignoring messages from %s: not in %s", sender_id, self.variable)
        return False


class Channel(Protocol):
    name: str

    async def start(self) -> None:
        """Connect and begin delivering messages; returns once running."""

    async def pause(self) -> None:
        """Stop taking updates (those already received are published); replies can still be sent.
        Shutdown pauses every channel, lets the running turns finish, then stops them."""

    async def stop(self) -> None:
        """Stop taking updates and release connections."""

    async def send(self, msg: OutboundMessage) -> None:
        """Deliver a reply (split, formatted, rate-limited as the platform needs)."""
