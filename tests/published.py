"""A channel's `publish` for tests that look at what a channel hands over, without an agent behind it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.events import InboundMessage
from tests import kept
from store.files.chats import FileChats
from memory.media import MB, MediaLimits, MediaStore


class Published(list[InboundMessage]):
    """Records each published message; its turn counts as done at once."""

    def __call__(self, msg: InboundMessage) -> asyncio.Future[None]:
        self.append(msg)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class MediaChannels:
    """Platform channels started on a fake, each with a media store of a given per-file cap; `close` stops them."""

    def __init__(self, home: Path, make: Callable[[Published, MediaStore], Any],
                 ready: Callable[[], Awaitable[Any]] | None = None) -> None:
        self.home, self.make, self.ready = home, make, ready
        self.started: list[Any] = []

    async def start(self, cap_mb: float = 20) -> tuple[Any, MediaStore, Published]:
        store = MediaStore(FileChats(self.home), MediaLimits(file_bytes=int(cap_mb * MB)))
        published = Published()
        channel = self.make(published, store)
        self.started.append(channel)
        await channel.start()
        if self.ready is not None:
            await self.ready()
        return channel, store, published

    async def close(self) -> None:
        for channel in self.started:
            await channel.stop()


def on_disk(store: MediaStore, msg: InboundMessage) -> list[bytes]:
    """The bytes kept on disk for each of `msg`'s files."""
    return [kept.media_path(store, msg.key, a).read_bytes() for a in msg.attachments]
