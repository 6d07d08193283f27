"""A Telegram reply while it is written (bot/stream.py's `Draft`).

    private chat   sendMessageDraft (Bot API 9.3; python-telegram-bot 22.1 has no method for it, so it
                   goes through `Bot.do_api_request`), then the final reply is sent as usual and
                   takes the draft's place
    group, topic   the first text is sent as a message (replying to the question), then edited in
                   place (editMessageText); past 4,096 the next part goes to a new message; the
                   final text replaces them all, formatted, split as `send` splits it

A Stop button goes with the draft while it is written (/stop: bot/stop.py): in a private chat
sendMessageDraft's own (`can_stop`, `keep_on_stop`: Telegram sends a `stopped_message_generation`
update when it is pressed), in a group an inline keyboard under the message the text last reached
(a `callback_query` when pressed); the final text goes out without it. The channel finds the reply a
press is about in `StopButtons` (channels/stop_buttons.py).

Drafts are shown as plain text (Markdown still arriving would not convert cleanly); only the
final text is formatted, unless it is Tusk's own words (`verbatim`), which stay plain text.
Telegram allows about one message a second in a chat and 20 a minute in a group:
`PRIVATE_INTERVAL` and `GROUP_INTERVAL` keep under that, and PTB's AIORateLimiter waits out any
429 that still comes.
"""

from __future__ import annotations

import itertools
import secrets
import logging
from collections.abc import Awaitable, Callable

from chatgpt_md_converter import telegram_format
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters
from telegram.constants import MessageLimit, ParseMode
from telegram.error import BadRequest

from bot.events import ChatKey
from channels.split import split_message, utf16_len
from channels.stop_buttons import StopButtons

logger = logging.getLogger(__name__)

PRIVATE_INTERVAL = 1.0  # seconds between draft updates in a private chat (about a message a second)
GROUP_INTERVAL = 3.0  # seconds between edits in a group: 20 a minute, Telegram's limit for a group
_draft_ids = itertools.count(secrets.randbelow(1 << 30) + 1)  # a new run's ids are not an old one's:
# a press on a draft from before a restart must not stop a new reply
STOP_DATA = "stop"  # the Stop button's callback_data
STOP_BUTTON = InlineKeyboardMarkup([[InlineKeyboardButton("\u23f9 Stop", callback_data=STOP_DATA)]])


def _measure(piece: str) -> int:
    """Size of a piece as Telegram limits it, whichever way it is sent (HTML or the plain fallback)."""
    return max(utf16_len(telegram_format(piece)), utf16_len(piece))


class TelegramDraft:
    """One reply in one chat; `send_final(text, verbatim)` is the channel's own send for a private chat's final
    reply. With `buttons` (and the chat's `key`), the draft carries a Stop button until it is finished."""

    def __init__(self, bot: Bot, chat_id: int, thread: int | None, reply_to: int | None, private: bool,
                 send_final: Callable[[str, bool], Awaitable[None]], interval: float | None = None,
                 buttons: StopButtons | None = None, key: ChatKey | None = None) -> None:
        self.bot = bot
        self.chat_id, self.thread, self.reply_to = chat_id, thread, reply_to
        self.private = private
        self.send_final = send_final
        self.interval = interval if interval is not None else PRIVATE_INTERVAL if private else GROUP_INTERVAL
        self.draft_id = next(_draft_ids)
        self.messages: list[int] = []  # groups: the messages this reply has so far
        self._texts: dict[int, tuple[str, str | None, bool]] = {}  # message id -> (text, parse mode, button) as sent
        self.buttons = buttons if key is not None else None
        self.key = key

    async def show(self, text: str) -> None:
        pieces = split_message(text, MessageLimit.MAX_TEXT_LENGTH, utf16_len)
        if self.private:
            stop = {"can_stop": True, "keep_on_stop": True} if self.buttons is not None else {}
            await self.bot.do_api_request("sendMessageDraft", api_kwargs={
                "chat_id": self.chat_id, "draft_id": self.draft_id, "text": pieces[-1],
                **({"message_thread_id": self.thread} if self.thread else {}), **stop})
            if self.buttons is not None and self.key is not None:
                self.buttons.add(self.chat_id, -self.draft_id, self.key)
            return
        for i, piece in enumerate(pieces):  # the button goes under the last piece, and leaves the others
            await self._put(i, piece, None, button=i == len(pieces) - 1)

    async def status(self, text: str) -> None:
        await self.show(text.strip("_"))

    async def finish(self, text: str, verbatim: bool = False) -> None:
        try:
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
        finally:  # a press from now on finds no reply to stop
            if self.buttons is not None:
                self.buttons.remove(self.chat_id, -self.draft_id)
                for message_id in self.messages:
                    self.buttons.remove(self.chat_id, message_id)

    async def _drop_after(self, count: int) -> None:
        """The draft ran longer than the final text: its messages past `count` go."""
        for message_id in self.messages[count:]:
            await self.bot.delete_message(self.chat_id, message_id)

    async def _put(self, i: int, text: str, parse_mode: str | None, button: bool = False) -> None:
        """Message `i` of this reply says `text` (with the Stop button, or without it): sent if it is new, edited
        if it changed. An edit of the text without a keyboard takes the button away, as Telegram does."""
        button = button and self.buttons is not None
        markup = STOP_BUTTON if button else None
        if i >= len(self.messages):
            reply = ReplyParameters(self.reply_to, allow_sending_without_reply=True) if self.reply_to and not i \
                else None
            sent = await self.bot.send_message(self.chat_id, text, parse_mode=parse_mode,
                                               message_thread_id=self.thread, reply_parameters=reply,
                                               reply_markup=markup)
            self.messages.append(sent.message_id)
        else:
            before = self._texts.get(self.messages[i])
            if before is not None and before[:2] == (text, parse_mode) and before[2] != button:
                await self.bot.edit_message_reply_markup(self.chat_id, self.messages[i], reply_markup=markup)
            elif before != (text, parse_mode, button):
                try:
                    await self.bot.edit_message_text(text, chat_id=self.chat_id, message_id=self.messages[i],
                                                     parse_mode=parse_mode, reply_markup=markup)
                except BadRequest as exc:  # the same text, once formatted: nothing to change
                    if "message is not modified" not in exc.message.lower():
                        raise
        self._texts[self.messages[i]] = (text, parse_mode, button)
        if self.buttons is not None and self.key is not None:
            if button:
                self.buttons.add(self.chat_id, self.messages[i], self.key)
            else:
                self.buttons.remove(self.chat_id, self.messages[i])
