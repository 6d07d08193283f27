"""What Discord refuses the bot, told to the operator once, with what to switch on.

The Message Content intent (docs: "Gateway Intents", "Message Content Intent"; application flags
GATEWAY_MESSAGE_CONTENT 1 << 18 for verified bots, GATEWAY_MESSAGE_CONTENT_LIMITED 1 << 19 for bots in
under 100 servers, the Developer Portal toggle). Without it, an IDENTIFY asking for it is closed with
4014 "Disallowed intent(s)", and a bot that does not ask gets guild messages with empty `content`,
`embeds` and `attachments` unless they mention it. So when the application's flags show it is off, Tusk
connects without it (DMs and mentions still work; the empty messages are not turns, see inbound.py) and
says so once at start; a 4014 anyway is one error line and the same fallback.

Channels the bot may not post in: 403 Missing Permissions (50013), 403 Missing Access (50001, also once
the bot was removed from the server), 404 Unknown Channel (10003), 403 Cannot send messages to this user (50007,
a DM). The first refusal in a channel is
raised with the fix; more in that channel within QUIET seconds are only logged at debug level: Discord
does not retry them, and neither does Tusk (no log or request storm).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import discord

from bot.errors import DeliveryError

logger = logging.getLogger(__name__)

GATEWAY_MESSAGE_CONTENT, GATEWAY_MESSAGE_CONTENT_LIMITED = 1 << 18, 1 << 19
PORTAL = ("Developer Portal -> Applications -> your app -> Bot -> Privileged Gateway Intents -> "
          "Message Content Intent")
NO_CONTENT = ("the Message Content intent is not enabled for this Discord bot: it reads only DMs and messages that "
              "mention it; other server messages arrive empty and are ignored. To read them (replies without a "
              f"ping, /listen), switch on {PORTAL}, then restart Tusk")
DISALLOWED = ("Discord refused the Message Content intent (gateway close 4014, Disallowed intent(s)): connecting "
              f"without it, so only DMs and mentions are read. Switch on {PORTAL}, then restart Tusk")
FIXES = {
    50013: "give the bot's role Send Messages (Send Messages in Threads for threads) and Read Message History "
           "in that channel (Server Settings -> Roles, or the channel's Permissions)",
    50001: "let the bot see that channel (View Channel), or invite it to the server again if it was removed",
    10003: "the channel was deleted; nothing to do",
    50007: "the person blocked the bot, left every server it shares with them, or takes no DMs from server "
           "members; nothing to do on this side",
}
QUIET = 600.0  # seconds during which further refusals in the same channel are not logged again


def content_intent_enabled(flags: int) -> bool:
    """Do the application's flags (GET /applications/@me) show the Message Content intent switched on?"""
    return bool(flags & (GATEWAY_MESSAGE_CONTENT | GATEWAY_MESSAGE_CONTENT_LIMITED))


def is_refusal(exc: BaseException) -> bool:
    return isinstance(exc, discord.HTTPException) and exc.code in FIXES


class Refusals:
    """The channels Discord lately refused the bot, so each refusal is told once."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since: dict[int, float] = {}

    def quiet(self, channel_id: int) -> bool:
        """Was the bot refused in this channel within QUIET seconds? (No draft, no typing there.)"""
        since = self._since.get(channel_id)
        return since is not None and self._clock() - since < QUIET

    def refused(self, exc: discord.HTTPException, channel_id: int) -> DeliveryError | None:
        """The error to raise for this refusal, with its fix; None if it was already told (then it is dropped)."""
        if self.quiet(channel_id):
            logger.debug("Discord still refuses the bot in channel %d (%d %s)", channel_id, exc.status, exc.code)
            return None
        now = self._clock()
        if len(self._since) > 1000:  # channels refused long ago are told again anyway
            self._since = {k: t for k, t in self._since.items() if now - t < QUIET}
        self._since[channel_id] = now
        return DeliveryError(f"Discord refused to let the bot post in channel {channel_id} ({exc.status}, "
                             f"code {exc.code}: {exc.text or 'no reason given'}): {FIXES[exc.code]}")

    def delivered(self, channel_id: int) -> None:
        """The bot posted there: its permissions were fixed."""
        self._since.pop(channel_id, None)
