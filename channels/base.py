"""The contract every channel keeps, and what it is given to publish with.

A channel turns platform updates into `InboundMessage`s (gating, allow-list and mention
rules included) and hands them to `publish`, which returns a future resolved when the
turn is done; the bus calls `send` with the replies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from bot.events import InboundMessage, OutboundMessage

Publish = Callable[[InboundMessage], asyncio.Future[None]]


class Channel(Protocol):
    name: str

    async def start(self) -> None:
        """Connect and begin delivering messages; returns once running."""

    async def stop(self) -> None:
        """Stop taking updates and release connections."""

    async def send(self, msg: OutboundMessage) -> None:
        """Deliver a reply (split, formatted, rate-limited as the platform needs)."""
