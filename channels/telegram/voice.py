"""A reply read out, as Telegram's voice message: sendVoice with the OGG/Opus file (bot/speech/encode.py).

The reply's text rides along as the caption when it fits Telegram's 1,024 characters (as HTML, like a
reply's text; plain if Telegram rejects the entities); otherwise it follows as a message
(bot/speech/replies.py). In a group the voice quotes the question, as a text reply's first piece does.
Bots may send voice files of up to 50 MB: a reply read out is far below (about 4 KB a second).
"""

from __future__ import annotations

import logging
from typing import Any

from chatgpt_md_converter import telegram_format
from telegram import Bot, ReplyParameters
from telegram.constants import MessageLimit, ParseMode
from telegram.error import BadRequest, TelegramError

from bot.errors import DeliveryError
from bot.events import SpokenAudio
from channels.split import utf16_len

logger = logging.getLogger(__name__)

FILE_NAME = "reply.ogg"
MAX_BYTES = 50 * 1024 * 1024


def fits_caption(text: str) -> bool:
    """Whether `text` is a caption Telegram takes, whichever way it is sent (HTML or plain)."""
    return max(utf16_len(telegram_format(text)), utf16_len(text)) <= MessageLimit.CAPTION_LENGTH


async def send(bot: Bot, chat_id: int, thread: int | None, audio: SpokenAudio, caption: str | None,
               reply_to: int | None) -> None:
    """sendVoice; DeliveryError when Telegram refuses it or cannot be reached (the text then goes alone)."""
    if len(audio.data) > MAX_BYTES:
        raise DeliveryError(f"the spoken reply is {len(audio.data):,} bytes, over Telegram's 50 MB for voice")
    reply = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
    common: dict[str, Any] = {"duration": max(1, round(audio.duration)), "message_thread_id": thread,
                              "reply_parameters": reply, "filename": FILE_NAME}
    try:
        try:
            await bot.send_voice(chat_id, audio.data, caption=telegram_format(caption) if caption else None,
                                 parse_mode=ParseMode.HTML if caption else None, **common)
        except BadRequest as exc:
            if not caption or "can't parse entities" not in exc.message.lower():
                raise
            logger.info("Telegram rejected the formatting of a voice caption; sending it as plain text")
            await bot.send_voice(chat_id, audio.data, caption=caption, **common)
    except TelegramError as exc:  # refused (voice messages forbidden by the chat's privacy), network, migrated
        raise DeliveryError(f"Telegram did not take the voice message: {exc}") from exc
