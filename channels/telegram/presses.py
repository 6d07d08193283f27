"""A Stop button pressed on Telegram: /stop for the reply being written (bot/stop.py).

    callback_query              a group draft's inline keyboard (channels/telegram/stream.py)
    stopped_message_generation  a private draft's own stop button (sendMessageDraft's can_stop)
      -> the reply the button is under (`StopButtons`; none: it is finished, or a crash left the button)
      -> the presser through the allow-list (a press starts no pairing)
      -> "/stop" published for that chat: the bus answers it at once, before the chat's queue
      -> a callback query answered with that answer, or "Stopped." when the stopped reply is the answer
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from telegram import Bot, CallbackQuery
from telegram.error import TelegramError

from bot.errors import BusClosed
from bot.events import InboundMessage, OutboundMessage
from channels.base import AllowList, Publish
from channels.stop_buttons import StopButtons
from channels.telegram.stream import STOP_DATA

logger = logging.getLogger(__name__)

STOPPED_ALREADY = "That reply is already finished."
NOT_YOURS = "Only those who may talk with me here can stop my replies."


class Presses:
    def __init__(self, allow: AllowList, publish: Publish, bot: Callable[[], Bot | None]) -> None:
        self.buttons = StopButtons()  # the Stop buttons under drafts being written
        self._allow = allow
        self._publish = publish
        self._bot = bot
        self._pressed: dict[int, str] = {}  # InboundMessage.id of a press's "/stop" -> its callback query's id

    async def on_query(self, query: CallbackQuery) -> None:
        """A group draft's Stop button: "/stop" from the presser, if they may talk here; the query is answered."""
        message = query.message
        key = self.buttons.find(message.chat.id, message.message_id) if message is not None else None
        if query.data != STOP_DATA or key is None or message is None:
            await self._answer(query.id, STOPPED_ALREADY)
            return
        user, chat = query.from_user, message.chat
        name = user.full_name or user.username or ""
        verdict = self._allow.check(str(user.id), name, group=str(chat.id) if chat.id < 0 else None,
                                    group_name=chat.title or "", addressed=False)
        if not verdict.admitted:
            await self._answer(query.id, NOT_YOURS)
            return
        msg = InboundMessage(key, "/stop", sender_id=str(user.id), sender_name=name, is_group=chat.id < 0)
        self._pressed[msg.id] = query.id
        with contextlib.suppress(BusClosed):
            await self._publish(msg)
        if (unanswered := self._pressed.pop(msg.id, None)) is not None:  # no answer came: the reply was stopped
            await self._answer(unanswered, "Stopped.")

    async def on_draft_stopped(self, stopped: dict[str, Any]) -> None:
        """A private draft's stop button: "/stop" from the chat's user (nothing to answer: Telegram shows it)."""
        chat, draft_id = stopped.get("chat"), stopped.get("draft_id")
        if not isinstance(chat, dict) or not isinstance(chat.get("id"), int) or not isinstance(draft_id, int):
            logger.info("skipping a Telegram stop update without a chat or draft")
            return
        key = self.buttons.find(chat["id"], -draft_id)
        if key is None:  # a reply no longer being written
            return
        name = " ".join(filter(None, (chat.get("first_name"), chat.get("last_name")))) or chat.get("username") or ""
        if not self._allow.check(str(chat["id"]), name, addressed=False).admitted:
            return
        with contextlib.suppress(BusClosed):
            await self._publish(InboundMessage(key, "/stop", sender_id=str(chat["id"]), sender_name=name))

    async def answered(self, msg: OutboundMessage) -> bool:
        """If `msg` answers a press's "/stop", it goes to the presser as the query's notice (True)."""
        query = self._pressed.pop(msg.reply_to, None) if msg.reply_to is not None else None
        if query is None:
            return False
        await self._answer(query, msg.text)
        return True

    async def _answer(self, query_id: str, text: str) -> None:
        bot = self._bot()
        if bot is None:
            return
        try:
            await bot.answer_callback_query(query_id, text=text[:200])
        except TelegramError as exc:  # too late (Telegram waits about 15 s): the spinner just ends
            logger.info("a Stop button press could not be answered: %s", exc)
