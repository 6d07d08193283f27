"""A reply's text on its way to Telegram, piece by piece, by the Bot alone (any process that holds the reply).

    send_text(bot, chat, topic, text, quoted, verbatim)
      -> split_message() on the Markdown source, within 4,096 UTF-16 units whichever way a piece goes
      -> each piece as Telegram HTML, plain text if Telegram rejects the entities; Tusk's own words (`verbatim`)
         as plain text, no parse mode; only the first piece quotes the question
      -> 429s wait (PTB's AIORateLimiter); a request that never reached the Bot API (no connection, a 502 from
         its front) is retried with backoff; one that may have been carried out (no answer came, a 504) is not
         sent again: Telegram has no idempotency key, and a reply must never show twice
      -> a group upgraded to a supergroup (ChatMigrated): the piece goes to the new id, and `migrated` is told
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import httpx
from chatgpt_md_converter import telegram_format
from telegram import Bot, ReplyParameters
from telegram.constants import MessageLimit, ParseMode
from telegram.error import BadRequest, ChatMigrated, NetworkError, RetryAfter, TelegramError, TimedOut

from bot.errors import DeliveryError
from channels.split import split_message, utf16_len

logger = logging.getLogger(__name__)

SEND_ATTEMPTS = 4  # for network errors; 429s are retried by the rate limiter
Migrated = Callable[[int, int], None]  # (old chat id, new chat id): a group became a supergroup


def maybe_carried_out(exc: NetworkError) -> bool:
    """Whether a request that failed so may have been carried out all the same: its answer was lost (a read
    timeout, a connection broken after sending, a gateway timeout). A connection that never opened, or a
    502 from Telegram's front (it did not reach the Bot API), was not."""
    cause = exc.__cause__
    if isinstance(cause, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return False
    if cause is None:  # an HTTP answer PTB read as a network error: 502 is its own "Bad Gateway", others "(code)"
        return "(504)" in exc.message or isinstance(exc, TimedOut)
    return True


def measure(piece: str) -> int:
    """Size of a piece as Telegram limits it, whichever way it is sent (HTML or the plain fallback)."""
    return max(utf16_len(telegram_format(piece)), utf16_len(piece))


async def send_text(bot: Bot, chat_id: int, thread: int | None, text: str, reply_to: int | None, verbatim: bool,
                    backoff: float, migrated: Migrated) -> None:
    """`text` as messages in the chat (and topic), the first quoting `reply_to`; DeliveryError if refused."""
    size = utf16_len if verbatim else measure
    for piece in split_message(text, MessageLimit.MAX_TEXT_LENGTH, size, verbatim=verbatim):
        chat_id = await send_piece(bot, chat_id, thread, piece, reply_to, verbatim, backoff, migrated)
        reply_to = None  # only the first piece quotes the question


async def send_piece(bot: Bot, chat_id: int, thread: int | None, piece: str, reply_to: int | None, verbatim: bool,
                     backoff: float, migrated: Migrated) -> int:
    """One message: the Markdown piece as Telegram HTML, or (`verbatim`) the text itself, no parse mode. Returns
    the chat it went to (a supergroup's id if the group was upgraded on the way)."""
    reply = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
    text, mode = (piece, None) if verbatim else (telegram_format(piece), ParseMode.HTML)
    delay = backoff
    for attempt in range(1, SEND_ATTEMPTS + 1):
        try:
            try:
                await bot.send_message(chat_id, text, parse_mode=mode, message_thread_id=thread, reply_parameters=reply)
            except BadRequest as exc:
                if "can't parse entities" not in exc.message.lower():
                    raise
                logger.info("Telegram rejected the formatting of a reply; sending it as plain text")
                await bot.send_message(chat_id, piece, message_thread_id=thread, reply_parameters=reply)
            return chat_id
        except ChatMigrated as exc:  # the group became a supergroup: the reply goes there, and so does its memory
            migrated(chat_id, exc.new_chat_id)
            chat_id = exc.new_chat_id
            continue
        except (BadRequest, RetryAfter) as exc:  # refused for good (or 429s outlasted the retries)
            raise DeliveryError(f"Telegram refused the reply: {exc}") from exc
        except NetworkError as exc:
            if maybe_carried_out(exc):
                raise DeliveryError(f"Telegram gave no answer to a reply ({exc}): it may have arrived, so it "
                                    "is not sent again (a reply must never show twice)") from exc
            if attempt == SEND_ATTEMPTS:
                raise DeliveryError(f"Telegram unreachable after {attempt} attempts: {exc}") from exc
            logger.warning("sending to Telegram failed (%s); retrying in %.0f s", exc, delay)
            await asyncio.sleep(delay)
            delay *= 2
        except TelegramError as exc:  # Forbidden (bot blocked or removed), chat gone
            raise DeliveryError(f"Telegram refused the reply: {exc}") from exc
    raise DeliveryError(f"Telegram kept moving the chat ({chat_id}): the reply was not sent")
