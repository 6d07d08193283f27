"""A Stop button pressed on Discord, and the slash /stop: /stop for the reply being written (bot/stop.py).

    a press (INTERACTION_CREATE, a component)   the button under a draft (channels/discord_bot/stream.py)
      -> the reply the button is under (`StopButtons`; none: it is finished, or a crash left the button)
      -> the presser through the allow-list (a press starts no pairing)
      -> "/stop" published for that chat: the bus answers it at once, before the chat's queue
      -> the press answered to the presser alone: that answer, or "Stopped." when the stopped reply is it
    /stop (an application command)              deferred like every command; when the reply it stopped is
                                                its answer, the interaction is closed with "Stopped."
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import aiohttp
import discord

from bot.events import InboundMessage, OutboundMessage, TurnResult
from channels.base import AllowList
from channels.discord_bot.stream import stop_item
from channels.stop_buttons import StopButtons

logger = logging.getLogger(__name__)

STOPPED_ALREADY = "That reply is already finished."
NOT_YOURS = "Only those who may talk with me here can stop my replies."
ERRORS = (discord.HTTPException, aiohttp.ClientError, OSError)  # what answering an interaction may raise
Take = Callable[[InboundMessage], "asyncio.Future[TurnResult | None] | None"]  # the channel's publish (None: not taken)


class Presses:
    def __init__(self, allow: AllowList, take: Take, accepting: Callable[[], bool]) -> None:
        self.buttons = StopButtons()  # the Stop buttons under drafts being written
        self.item = stop_item(self.on_press)  # register with Client.add_dynamic_items
        self._allow = allow
        self._take = take
        self._accepting = accepting
        self._pressed: dict[int, discord.Interaction] = {}  # InboundMessage.id of a press's "/stop" -> the press
        self._slashes: dict[int, bool] = {}  # InboundMessage.id of a slash /stop -> whether it got an answer

    def view(self) -> discord.ui.View:
        """A view with the Stop button, for a draft's message."""
        view = discord.ui.View(timeout=None)
        view.add_item(self.item())  # type: ignore[call-arg]  # StopButton takes none; typed as its base class
        return view

    async def on_press(self, interaction: discord.Interaction) -> None:
        """A draft's Stop button: "/stop" from the presser, if they may talk here; the press is answered to them."""
        message, channel_id = interaction.message, interaction.channel_id
        key = self.buttons.find(channel_id, message.id) if message is not None and channel_id else None
        if key is None:
            await self._answer(interaction, STOPPED_ALREADY)
            return
        user, guild = interaction.user, interaction.guild or (
            discord.Object(interaction.guild_id) if interaction.guild_id else None)
        verdict = self._allow.check(str(user.id), user.display_name, group=str(guild.id) if guild else None,
                                    addressed=False)
        if not verdict.admitted or not self._accepting():
            await self._answer(interaction, NOT_YOURS)
            return
        msg = InboundMessage(key, "/stop", sender_id=str(user.id), sender_name=user.display_name,
                             is_group=guild is not None)
        self._pressed[msg.id] = interaction
        if (done := self._take(msg)) is not None:
            await asyncio.wait([done])
        if self._pressed.pop(msg.id, None) is not None:  # no answer came: the reply was stopped
            await self._answer(interaction, "Stopped.")

    def expect(self, msg_id: int) -> None:
        """A slash /stop is being published: note whether an answer goes to it."""
        self._slashes[msg_id] = False

    async def close_slash(self, msg_id: int, done: asyncio.Future[TurnResult | None] | None,
                          interaction: discord.Interaction, ephemeral: bool) -> None:
        """Once the slash /stop is handled: its deferred interaction gets "Stopped." if no answer went to it."""
        try:
            if done is not None:
                await asyncio.wait([done])
                if not self._slashes.get(msg_id):
                    await interaction.followup.send("Stopped.", ephemeral=ephemeral)
        except ERRORS as exc:
            logger.warning("could not answer a /stop: %s", exc)
        finally:
            self._slashes.pop(msg_id, None)

    async def answered(self, msg: OutboundMessage) -> bool:
        """If `msg` answers a press's "/stop", it goes to the presser alone (True); a slash /stop's answer is
        noted (and goes its usual way: False)."""
        if msg.reply_to is None:
            return False
        if msg.reply_to in self._slashes:
            self._slashes[msg.reply_to] = True
        press = self._pressed.pop(msg.reply_to, None)
        if press is None:
            return False
        await self._answer(press, msg.text)
        return True

    @staticmethod
    async def _answer(interaction: discord.Interaction, text: str) -> None:
        try:
            await interaction.response.send_message(text, ephemeral=True)
        except ERRORS as exc:  # too late (Discord waits 3 s): the press just shows as failed
            logger.info("a Stop button press could not be answered: %s", exc)
