"""The contract every channel keeps, and what it is given to publish with.

A channel turns platform updates into `InboundMessage`s (gating, allow-list and mention
rules included) and hands them to `publish`, which returns a future resolved when the
turn is done; the bus calls `send` with the replies. A message's files are downloaded into the
chat's media/ first and published as its `attachments` (channels/media_in.py), its caption as the
text (empty if none); a sticker alone is an empty text: the agent answers what it can read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from bot.bus import Outlet
from bot.errors import DeliveryError
from bot.events import ChatKey, InboundMessage, OutboundMessage, TurnResult
from bot.access.pairing import PairingError, PairingStore

logger = logging.getLogger(__name__)

Done = asyncio.Future[TurnResult | None]  # resolved when a published message's turn is done, with how it ended
Publish = Callable[[InboundMessage], Done]  # the bus's (bot/bus.py)


async def tell(send: Callable[[OutboundMessage], Awaitable[None]], key: ChatKey, text: str) -> None:
    """Tusk's own words outside any turn (a pairing code, a file not taken): no session, and a platform
    that refuses them is logged, not raised (the message they concern goes on)."""
    try:
        await send(OutboundMessage(key, text, verbatim=True))
    except DeliveryError as exc:
        logger.warning("could not send a notice to %s: %s", key, exc)



Policy = Literal["pairing", "allowlist", "open"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the allow-list decided: let the message in, or not; `reply` is for the sender alone (a pairing
    code), sent by the channel outside any chat session."""

    admitted: bool
    reply: str | None = None


class AllowList:
    """Who may talk to the bot: ids in `*_ALLOW_FROM` (user ids anywhere, group ids for everyone in that
    group), then those the owner approved by pairing (bot/access/pairing.py), then TUSK_DM_POLICY for the rest:

        pairing    a stranger gets a code for `tusk pairing approve` (a group gets one for the group)
        allowlist  strangers are ignored
        open       an empty allow-list admits everyone (a non-empty one still restricts)

    A refused sender costs no LLM call and is logged once, by id (so the operator can find theirs),
    never with what they wrote. A code is told once, and again at most every `REMIND_EVERY` seconds."""

    REMIND_EVERY = 600.0

    def __init__(self, entries: frozenset[str], variable: str, channel: str = "", policy: Policy = "open",
                 pairing: PairingStore | None = None, remember: int = 10_000) -> None:
        self.entries = entries
        self.variable = variable
        self.channel = channel
        self.policy: Policy = policy if pairing is not None or policy != "pairing" else "allowlist"
        self.pairing = pairing
        self._logged: set[str] = set()
        self._told: dict[str, float] = {}  # code -> when it was last told
        self._remember = remember

    def check(self, sender_id: str, sender_name: str = "", *, group: str | None = None,
              group_name: str = "", addressed: bool = True) -> Verdict:
        """May this sender talk here (`group`: the group's id, None in a direct chat)? Chatter not
        addressed to the bot (`addressed=False`, kept only in chats that /listen) never starts pairing."""
        if sender_id in self.entries or group is not None and group in self.entries:
            return Verdict(True)
        if self.policy == "open" and not self.entries:
            return Verdict(True)
        if self.pairing is not None and (self.pairing.approved(self.channel, "user", sender_id) or group is not None
                                         and self.pairing.approved(self.channel, "group", group)):
            return Verdict(True)
        if self.policy == "pairing" and self.pairing is not None and addressed:
            return self._pair(sender_id, sender_name, group, group_name)
        self._log(sender_id)
        return Verdict(False)

    def _pair(self, sender_id: str, sender_name: str, group: str | None, group_name: str) -> Verdict:
        assert self.pairing is not None
        try:
            if group is None:
                request, _ = self.pairing.request(self.channel, "user", sender_id, sender_name)
            else:
                request, _ = self.pairing.request(self.channel, "group", group, group_name)
        except (PairingError, OSError) as exc:
            logger.error("pairing: no code could be issued (%s)", exc)
            return Verdict(False)
        now = time.monotonic()
        last = self._told.get(request.code)
        if last is not None and now - last < self.REMIND_EVERY:
            return Verdict(False)
        if len(self._told) >= self._remember:
            self._told.clear()
        self._told[request.code] = now
        minutes = max(1, round((request.expires - request.at) / 60))
        who = "this group" if group is not None else "you"
        return Verdict(False, f"I don't know {who} yet. To talk with me, ask my owner to approve this code: "
                              f"{request.code}\n(they run: tusk pairing approve {request.code}). "
                              f"It expires in {minutes} min.")

    def _log(self, sender_id: str) -> None:
        if sender_id not in self._logged and len(self._logged) < self._remember:
            self._logged.add(sender_id)
            logger.info("ignoring messages from %s: not in %s", sender_id, self.variable)


@dataclass(frozen=True, slots=True)
class Access:
    """What every platform channel shares about strangers: TUSK_DM_POLICY and the pairing store."""

    policy: Policy = "open"
    pairing: PairingStore | None = None

    def allow_list(self, entries: frozenset[str], variable: str, channel: str) -> AllowList:
        return AllowList(entries, variable, channel, self.policy, self.pairing)


class Channel(Outlet, Protocol):
    """A platform (or local) channel: the bus's outlet and a lifecycle. Its abilities are declared, each None
    where it has not got it (bot/bus.py `Outlet`), never looked up by name:

        draft   the reply shown while it is written (bot/stream.py): Telegram's draft or a message edited in
                place, Discord's edits, Slack's chat streaming or chat.update, the HTTP API's events
        voice   replies read out as the platform's voice messages (bot/speech/replies.py)

    A platform channel (`Platform`) has a third, typing, which the intake chain shows (channels/intake.py)."""

    async def start(self) -> None:
        """Connect and begin delivering messages; returns once running."""

    async def pause(self) -> None:
        """Stop taking updates (those already received are published); replies can still be sent.
        Shutdown pauses every channel, lets the running turns finish, then stops them."""

    async def stop(self) -> None:
        """Stop taking updates and release connections."""


class Platform(Channel, Protocol):
    """A chat platform's channel (Telegram, Discord, Slack): what the intake chain (channels/intake.py) uses
    of it besides `send`. Each is made with `receive=False` to only send (a cluster's worker): `start` opens
    what sending needs (Telegram's Bot, Slack's Web API client, discord.py's client logged in over REST), no
    polling, webhook, gateway or socket; `send`, `draft`, `voice` and `typing` need no message received by that
    process, only the chat key and the ReplyRef the message carries."""

    def typing(self, msg: InboundMessage, done: Done) -> Awaitable[None]:
        """Show in `msg`'s chat that its turn runs (a chat action, Discord's typing, Slack's reaction), until
        `done`; a failure to show it is logged, never raised (it is cosmetic)."""
        ...
