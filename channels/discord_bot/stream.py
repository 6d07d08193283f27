"""A Discord reply while it is written (bot/stream.py's `Draft`): sent, then edited in place.

The first text is sent (in guilds as a reply to the question), then edited as more comes; past
2,000 characters the reply continues in a new message. The final text replaces them all, split
as `send` splits it (code fences closed and reopened; Tusk's own words escaped: text.py). Discord
allows about 5 message changes per 5 seconds in a channel: one edit a second stays under that, and
discord.py waits out any 429.
A channel where the bot may not post is told once with the fix (refusals.py), here or by the send after.
"""

from __future__ import annotations

from typing import Any

import discord

from channels.discord_bot.refusals import Refusals, is_refusal
from channels.discord_bot.text import pieces
INTERVAL = 1.0  # seconds between edits (Discord: about 5 per 5 s per channel)


class DiscordDraft:
    def __init__(self, channel: Any, reference: discord.MessageReference | None,
                 mentions: discord.AllowedMentions, refusals: Refusals | None = None) -> None:
        self.channel = channel  # a PartialMessageable
        self.refusals = refusals
        self.reference = reference
        self.mentions = mentions
        self.interval = INTERVAL
        self.messages: list[Any] = []  # discord.Message, one per 2,000 characters so far
        self._texts: list[str] = []

    async def show(self, text: str) -> None:
        await self._put_all(pieces(text))

    async def status(self, text: str) -> None:
        await self._put_all([text])

    async def finish(self, text: str, verbatim: bool = False) -> None:
        final = pieces(text, verbatim)  # Tusk's own words (a failure's sentence) escaped, as `send` sends them
        await self._put_all(final)
        for message in self.messages[len(final):]:  # the draft ran longer than the final text
            await message.delete()
        del self.messages[len(final):], self._texts[len(final):]

    async def _put_all(self, pieces: list[str]) -> None:
        for i, piece in enumerate(pieces):
            if i >= len(self.messages):
                sent = await self._send(piece, reference=self.reference if not i else None)
                self.messages.append(sent)
                self._texts.append(piece)
            elif self._texts[i] != piece:
                self.messages[i] = await self.messages[i].edit(content=piece, allowed_mentions=self.mentions)
                self._texts[i] = piece

    async def _send(self, piece: str, reference: discord.MessageReference | None) -> Any:
        try:
            return await self.channel.send(piece, reference=reference, allowed_mentions=self.mentions)
        except discord.HTTPException as exc:
            if self.refusals is not None and is_refusal(exc):
                if (error := self.refusals.refused(exc, self.channel.id)) is not None:
                    raise error from exc
            raise
