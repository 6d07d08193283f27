"""A turn run again after its worker died: when the chat's session shows it was saved already, its saved
replies are sent again instead of running it twice (no second model call, nothing stored twice).

The turn's user message is found by the inbound message's time and sender (both saved with it exactly:
memory/session.py); its replies are the assistant texts after it, up to the next user message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.events import InboundMessage, OutboundMessage
from store.base import ChatStore

logger = logging.getLogger(__name__)


async def resend_saved(chats: ChatStore, send: Callable[[OutboundMessage], Awaitable[object]],
                       msg: InboundMessage) -> bool:
    """Send `msg`'s saved replies again; False when its turn was not saved (it must run)."""
    chat = await chats.open(msg.key)
    said = chat.session.unconsolidated
    at = next((i for i in range(len(said) - 1, -1, -1) if said[i].role == "user" and said[i].ts == msg.ts
               and (said[i].sender_id or "") == (msg.sender_id or "")), None)
    if at is None:
        return False
    replies = []
    for m in said[at + 1:]:
        if m.role == "user":
            break
        if m.role == "assistant" and not m.tool_calls and isinstance(m.content, str) and m.content.strip():
            replies.append(m.content)
    logger.warning("%s: a turn cut short after it was saved; its %d reply(s) are sent again", msg.key, len(replies))
    for text in replies:
        await send(OutboundMessage.answer(msg, text))
    return True
