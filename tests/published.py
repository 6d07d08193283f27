"""A channel's `publish` for tests that look at what a channel hands over, without an agent behind it."""

from __future__ import annotations

import asyncio

from bot.events import InboundMessage


class Published(list[InboundMessage]):
    """Records each published message; its turn counts as done at once."""

    def __call__(self, msg: InboundMessage) -> asyncio.Future[None]:
        self.append(msg)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done
