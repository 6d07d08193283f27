"""A chat that changed its id keeps its memory: Telegram upgrades a group to a supergroup (`-100...`),
and channels/telegram/ calls `ChatMoves(old key, new key)`.

    ChatMoves(old, new)
      in the old chat's order (bot/bus.py: after the turns queued there) and under its MEMORY.md lock
      (no consolidation round is writing into it) -> the store moves the chat whole (once: the second notice
      finds it moved; store/base.py `move`) -> the chat's reminders re-keyed

The channel runs it before the new chat's next message is published, so the new id's first turn already
sees the old memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from bot.errors import BusClosed
from bot.events import ChatKey
from store.base import ChatStore

logger = logging.getLogger(__name__)

InOrder = Callable[[ChatKey, Callable[[], Awaitable[Any]]], Awaitable[Any]]  # MessageBus.in_order


class Rekeyed(Protocol):
    """Something kept per chat key outside the chat's folder (the reminders)."""

    def move(self, old: ChatKey, new: ChatKey) -> int: ...


class ChatMoves:
    def __init__(self, chats: ChatStore, in_order: InOrder, lock: Callable[[ChatKey], asyncio.Lock],
                 rekeyed: list[Rekeyed]) -> None:
        self.chats, self.in_order, self.lock, self.rekeyed = chats, in_order, lock, rekeyed

    async def __call__(self, old: ChatKey, new: ChatKey) -> None:
        """Move chat `old`'s files and reminders to `new`, once; safe to call again for the same move."""
        try:
            await self.in_order(old, lambda: self._move(old, new))
        except BusClosed:
            logger.warning("%s became %s while Tusk was stopping: its files move at the next notice", old, new)

    async def _move(self, old: ChatKey, new: ChatKey) -> None:
        async with self.lock(old):
            done = await self.chats.move(old, new)
        rekeyed = sum(holder.move(old, new) for holder in self.rekeyed) if done != "kept both" else 0
        if done == "moved":
            logger.info("chat %s is now %s: its memory moved with it (%d reminder(s) too)", old, new, rekeyed)
        elif done == "kept both":
            logger.warning("chat %s is now %s, which already has files of its own: the old chat's files stay in "
                           "place (nothing merged); move them by hand if wanted", old, new)
