"""A Telegram reply while it is written (bot/stream.py's `Draft`).

    private chat   sendMessageDraft (Bot API 9.3; python-telegram-bot 22.1 has no method for it, so it
                   goes through `Bot.do_api_request`), then the final reply is sent as usual and
                   takes the draft's place
    group, topic   the first text is sent as a message (replying to the question), then edited in
                   place (editMessageText); past 4,096 the next part goes to a new message; the
                   final text replaces them all, formatted, split as `send` splits it

Drafts are shown as plain text (Markdown still arriving would not convert cleanly); only the
final text is formatted, unless it is Tusk's own words (`verbatim`), which stay plain text.
Telegram allows about one message a second in a chat and 20 a minute in a group:
`PRIVATE_INTERVAL` and `GROUP_INTERVAL` keep under that, and PTB's AIORateLimiter waits out any
429 that still comes.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable

from chatgpt_md_converter import telegram_format
from telegram import Bot, ReplyParameters
from telegram.constants import MessageLimit, ParseMode
from telegram.error import BadRequest

from channels.split import split_message, utf16_len

logger = logging.getLogger(__name__)

PRIVATE_INTERVAL = 1.0  # seconds between draft updates in a private chat (about a message a second)
GROUP_INTERVAL = 3.0  # seconds between edits in a group: 20 a minute, Telegram's limit for a group
_draft_ids = itertools.count(1)


def _measure(piece: str) -> int:
    """Size of a piece as Telegram limits it, whichever way it is sent (HTML or the plain fallback)."""
    return max(utf16_len(telegram_format(piece)), utf16_len(piece))


class TelegramDraft:
    """One reply in one chat; `send_final(text, verbatim)` is the channel's own send for a private chat's final
    reply."""

    def __init__(self, bot: Bot, chat_id: int, thread: int | None, reply_to: int | None, private: bool,
                 send_final: Callable[[str, bool], Awaitable[None]], interval: float | None = None) -> None:
        self.bot = bot
        self.chat_id, self.thread, self.reply_to = chat_id, thread, reply_to
        self.private = private
        self.send_final = send_final
        self.interval = interval if interval is not None else PRIVATE_INTERVAL if private else GROUP_INTERVAL
        self.draft_id = next(_draft_ids)
        self.messages: list[int] = []  # groups: the messages this reply has so far
        self._texts: dict[int, tuple[str, str | None]] = {}  # message id -> (text, parse mode) last sent

    async def show(self, text: str) -> None:
        pieces = split_message(text, MessageLimit.MAX_TEXT_LENGTH, utf16_len)
        if self.private:
            await self.bot.do_api_request("sendMessageDraft", api_kwargs={
                "chat_id": self.chat_id, "draft_id": self.draft_id, "text": pieces[-1],
                **({"message_thread_id": self.thread} if self.thread else {})})
            return
        for i, piece in enumerate(pieces):
            await self._put(i, piece, None)

    async def status(self, text: str) -> None:
        await self.show(text.strip("_"))

    async def finish(self, text: str, verbatim: bool = False) -> None:
        if self.private:
            await self.send_final(text, verbatim)
            return
        if verbatim:  # Tusk's own words: plain text, as `send` sends them
            pieces = split_message(text, MessageLimit.MAX_TEXT_LENGTH, utf16_len, verbatim=True)
            for i, piece in enumerate(pieces):
                await self._put(i, piece, None)
            await self._drop_after(len(pieces))
            return
        pieces = split_message(text, MessageLimit.MAX_TEXT_LENGTH, _measure)
        for i, piece in enumerate(pieces):
            try:
                await self._put(i, telegram_format(piece), ParseMode.HTML)
            except BadRequest as exc:
                if "can't parse entities" not in exc.message.lower():
                    raise
                logger.info("Telegram rejected the formatting of a reply; sending it as plain text")
                await self._put(i, piece, None)
        await self._drop_after(len(pieces))

    async def _drop_after(self, count: int) -> None:
        """The draft ran longer than the final text: its messages past `count` go."""
        for message_id in self.messages[count:]:
            await self.bot.delete_message(self.chat_id, message_id)

    async def _put(self, i: int, text: str, parse_mode: str | None) -> None:
        """Message `i` of this reply says `text`: sent if it is new, edited if it changed."""
        if i >= len(self.messages):
            reply = ReplyParameters(self.reply_to, allow_sending_without_reply=True) if self.reply_to and not i \
                else None
            sent = await self.bot.send_message(self.chat_id, text, parse_mode=parse_mode,
                                               message_thread_id=self.thread, reply_parameters=reply)
            self.messages.append(sent.message_id)
        elif self._texts.get(self.messages[i]) != (text, parse_mode):
            try:
                await self.bot.edit_message_text(text, chat_id=self.chat_id, message_id=self.messages[i],
                                                 parse_mode=parse_mode)
            except BadRequest as exc:  # the same text, once formatted: nothing to change
                if "message is not modified" not in exc.message.lower():
                    raise
        self._texts[self.messages[i]] = (text, parse_mode)
