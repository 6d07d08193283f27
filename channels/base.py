"""The contract every channel keeps, and what it is given to publish with.

A channel turns platform updates into `InboundMessage`s (gating, allow-list and mention
rules included) and hands them to `publish`, which returns a future resolved when the
turn is done; the bus calls `send` with the replies. A message without text (a sticker, a
file without caption) is published with empty text: the agent answers what it can read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from bot.events import InboundMessage, OutboundMessage

Publish = Callable[[InboundMessage], asyncio.Future[None]]

def allowed(allow_from: frozenset[str], *identities: str | None) -> bool:
    """True if the allow-list is empty (everyone) or names any of the sender's identities."""
    return not allow_from or any(i is not None and i in allow_from for i in identities)


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
