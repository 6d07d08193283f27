"""A Discord reply while it is written (bot/stream.py's `Draft`): sent, then edited in place.

The first text is sent (in guilds as a reply to the question), then edited as more comes; past
2,000 characters the reply continues in a new message. The final text replaces them all, split
as `send` splits it (code fences closed and reopened; Tusk's own words escaped: text.py). Discord
allows about 5 message changes per 5 seconds in a channel: one edit a second stays under that, and
discord.py waits out any 429.
A channel where the bot may not post is told once with the fix (refusals.py), here or by the send after.

While the reply is written, the message the text last reached carries a Stop button (/stop: bot/stop.py),
a discord.py `DynamicItem` whose custom id is the same on every message (`STOP_ID`): a press reaches the
channel's handler whatever the message, and the channel finds the reply in its `StopButtons`
(channels/stop_buttons.py). The final text goes out without it. Every message is sent with a nonce that
Discord enforces, made from the message the reply answers and the message's place in the reply (nonces.py): a
send retried after a lost answer never posts twice, and a draft begun again for the same message (a turn run
again elsewhere after a crash) takes up the messages the first one made, as they are, and edits them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord

from bot.events import ChatKey
from channels.discord_bot.refusals import Refusals, is_refusal
from channels.discord_bot.text import pieces
from channels.stop_buttons import StopButtons

INTERVAL = 1.0  # seconds between edits (Discord: about 5 per 5 s per channel)
STOP_ID = "tusk:stop"  # the Stop button's custom id (a DynamicItem template: a regular expression)
Pressed = Callable[[discord.Interaction], Awaitable[None]]
Nonces = Callable[[int], "str | None"]  # message index -> its nonce (None: discord.py's random one)


def stop_item(pressed: Pressed) -> type[discord.ui.DynamicItem[discord.ui.Button[Any]]]:
    """The Stop button as a discord.py dynamic item (register it with `Client.add_dynamic_items`): every press
    of a button with `STOP_ID`, on any message, goes to `pressed`."""

    class StopButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=STOP_ID):
        def __init__(self) -> None:
            super().__init__(discord.ui.Button(label="Stop", emoji="\u23f9", style=discord.ButtonStyle.secondary,
                                               custom_id=STOP_ID))

        @classmethod
        async def from_custom_id(cls, interaction: discord.Interaction, item: discord.ui.Item[Any],
                                 match: Any) -> StopButton:
            return cls()

        async def callback(self, interaction: discord.Interaction) -> None:
            await pressed(interaction)

    return StopButton


class DiscordDraft:
    def __init__(self, channel: Any, reference: discord.MessageReference | None,
                 mentions: discord.AllowedMentions, refusals: Refusals | None = None,
                 stop: Callable[[], discord.ui.View] | None = None, buttons: StopButtons | None = None,
                 key: ChatKey | None = None, nonces: Nonces | None = None) -> None:
        self.channel = channel  # a PartialMessageable
        self.nonces = nonces
        self.refusals = refusals
        self.reference = reference
        self.mentions = mentions
        self.interval = INTERVAL
        self.messages: list[Any] = []  # discord.Message, one per 2,000 characters so far
        self._texts: list[str] = []
        self._buttoned: list[bool] = []  # which of them carries the Stop button
        self.stop = stop if buttons is not None and key is not None else None  # a view with the Stop button
        self.buttons, self.key = buttons, key

    async def show(self, text: str) -> None:
        await self._put_all(pieces(text))

    async def status(self, text: str) -> None:
        await self._put_all([text])

    async def finish(self, text: str, verbatim: bool = False) -> None:
        final = pieces(text, verbatim)  # Tusk's own words (a failure's sentence) escaped, as `send` sends them
        try:
            await self._put_all(final, final=True)
            for message in self.messages[len(final):]:  # the draft ran longer than the final text
                await message.delete()
            del self.messages[len(final):], self._texts[len(final):], self._buttoned[len(final):]
        finally:  # a press from now on finds no reply to stop
            if self.buttons is not None:
                for message in self.messages:
                    self.buttons.remove(self.channel.id, message.id)

    async def _put_all(self, pieces: list[str], final: bool = False) -> None:
        """The messages say `pieces`; while the reply is written the last one carries the Stop button."""
        for i, piece in enumerate(pieces):
            button = self.stop is not None and not final and i == len(pieces) - 1
            if i >= len(self.messages):
                sent = await self._send(i, piece, reference=self.reference if not i else None, button=button)
                self.messages.append(sent)
                # what the message says: the piece, or what a message made before for this nonce still says
                self._texts.append(piece if sent.content.strip() == piece.strip() else sent.content)
                self._buttoned.append(bool(sent.components))
            if self._texts[i] != piece or self._buttoned[i] != button:
                view: Any = discord.utils.MISSING
                if self._buttoned[i] != button:
                    view = self.stop() if button and self.stop is not None else None
                self.messages[i] = await self.messages[i].edit(content=piece, allowed_mentions=self.mentions,
                                                               view=view)
                self._texts[i], self._buttoned[i] = piece, button
            if self.buttons is not None and self.key is not None:
                if button:
                    self.buttons.add(self.channel.id, self.messages[i].id, self.key)
                else:
                    self.buttons.remove(self.channel.id, self.messages[i].id)

    async def _send(self, i: int, piece: str, reference: discord.MessageReference | None, button: bool = False) -> Any:
        view = self.stop() if button and self.stop is not None else None
        nonce = self.nonces(i) if self.nonces is not None else None
        try:
            return await self.channel.send(piece, reference=reference, allowed_mentions=self.mentions, view=view,
                                           nonce=nonce)  # None: discord.py's random one
        except discord.HTTPException as exc:
            if self.refusals is not None and is_refusal(exc):
                if (error := self.refusals.refused(exc, self.channel.id)) is not None:
                    raise error from exc
            raise
