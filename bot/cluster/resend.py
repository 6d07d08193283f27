"""A turn run again after its worker died, when a run of it had saved it already (its queued message was
claimed: store/fence.py): its saved replies are sent again instead of running it twice (no second model
call, nothing stored twice; the platform or the waiting request drops what it had: Discord's nonce, the
results' reply numbers).

A chat's turns run one at a time in their order (bot/cluster/worker.py), so the saved turn is the session's
last user message and the assistant texts after it. That message is checked to be this one (its time and
sender, saved exactly: memory/session.py, and its text unless files came with it); one that is not is
logged, and nothing is run again either way (a second run's writes would be refused).
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
    """Send `msg`'s saved replies again (its turn was claimed by a run that saved it); False when the chat shows
    no user message at all (it was erased since: nothing to send)."""
    chat = await chats.open(msg.key)
    said = chat.session.unconsolidated
    at = next((i for i in range(len(said) - 1, -1, -1) if said[i].role == "user"), None)
    if at is None:
        return False
    if not _same(said[at], msg):
        logger.error("%s: a saved turn's message is not the chat's last user message; nothing is sent again", msg.key)
        return True
    replies = [m.content for m in said[at + 1:] if m.role == "assistant" and not m.tool_calls
               and isinstance(m.content, str) and m.content.strip()]
    logger.warning("%s: a turn cut short after it was saved; its %d reply(s) are sent again", msg.key, len(replies))
    for text in replies:
        await send(OutboundMessage.answer(msg, text))
    return True


def _same(saved: Message, msg: InboundMessage) -> bool:
    return (saved.ts == msg.ts and (saved.sender_id or "") == (msg.sender_id or "")
            and (bool(msg.attachments) or saved.content == msg.text))
