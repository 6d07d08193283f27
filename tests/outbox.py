"""An outlet that records what Tusk sends to a channel's chats (replies, notices, reminders),
and a way to talk to a TuskApp through its bus without a channel."""

from __future__ import annotations

import asyncio
import contextlib
import time

from bot.events import ChatKey, InboundMessage, OutboundMessage


class Outbox:
    """Stands in for a channel's `send` (optionally still passing messages on to the real one); it shows no
    drafts and sends no voice (the channel contract's abilities, bot/bus.py)."""

    draft = voice = None

    def __init__(self, name: str = "http", forward=None) -> None:
        self.name = name
        self.forward = forward
        self.sent: list[OutboundMessage] = []

    async def send(self, msg: OutboundMessage) -> None:
        self.sent.append(msg)
        if self.forward is not None:
            await self.forward.send(msg)

    def to(self, chat: str) -> list[str]:
        return [m.text for m in self.sent if m.key.chat_id == chat]

    async def wait_for(self, chat: str, count: int, timeout: float = 5.0) -> list[str]:
        """The texts sent to `chat` once there are at least `count` of them."""
        deadline = time.monotonic() + timeout
        while len(self.to(chat)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.to(chat))} messages to {chat}, wanted {count}: {self.to(chat)}")
            await asyncio.sleep(0.02)
        return self.to(chat)


def attach(app, forward=None) -> Outbox:
    box = Outbox(forward=forward)
    app.bus.register(box)
    return box


async def say(app, box: Outbox, chat: str, text: str) -> list[str]:
    """Publish a user message to `chat` and return what was sent in answer to it (notices included)."""
    msg = InboundMessage(ChatKey("http", chat), text, sender_id="u1", sender_name="Ann")
    await app.bus.publish(msg)
    return [m.text for m in box.sent if m.reply_to == msg.id]


@contextlib.asynccontextmanager
async def started(make_settings, **env):
    """A running TuskApp (no channel) with an Outbox on the http channel: `async with started(...) as (app, box)`."""
    from bot.app import TuskApp

    app = TuskApp(make_settings(**env))
    box = attach(app)
    async with app:
        yield app, box
