"""A turn run again after its worker died: when the chat's session shows it was saved already, its saved
replies are sent again instead of running it twice (no second model call, nothing stored twice).

A chat's turns run one at a time in their order (bot/cluster/worker.py), so a saved turn of the message is
the session's last user message: it is that message when its time and sender (saved exactly:
memory/session.py) and its text (unless files came with it, which change the saved text) are the message's.
A platform's time has whole seconds, so the text tells apart two messages of one person in one second.
Its replies are the assistant texts after it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.events import InboundMessage, OutboundMessage
from memory.session import Message
from store.base import ChatStore

logger = logging.getLogger(__name__)


async def resend_saved(chats: ChatStore, send: Callable[[OutboundMessage], Awaitable[object]],
                       msg: InboundMessage) -> bool:
    """Send `msg`'s saved replies again; False when its turn was not saved (it must run)."""
    chat = await chats.open(msg.key)
    said = chat.session.unconsolidated
    at = next((i for i in range(len(said) - 1, -1, -1) if said[i].role == "user"), None)
    if at is None or not _same(said[at], msg):
        return False
    replies = [m.content for m in said[at + 1:] if m.role == "assistant" and not m.tool_calls
               and isinstance(m.content, str) and m.content.strip()]
    logger.warning("%s: a turn cut short after it was saved; its %d reply(s) are sent again", msg.key, len(replies))
    for text in replies:
        await send(OutboundMessage.answer(msg, text))
    return True


def _same(saved: Message, msg: InboundMessage) -> bool:
    return (saved.ts == msg.ts and (saved.sender_id or "") == (msg.sender_id or "")
            and (bool(msg.attachments) or saved.content == msg.text))
