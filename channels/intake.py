"""One way in for every platform: a message an adapter read becomes a published turn, the same way on each.

    adapter  update -> to_inbound() (pure) -> an `Arrival`: the message and the few facts of its platform the
             chain needs (its id for never-twice, its group for the allow-list, its files, a lookup)
    Intake.take(arrival)
      -> allow-list / pairing (channels/base.py AllowList): no lookup, no download for a refused sender; a
         stranger is told their code (`tell`); while the chat's earlier messages are still being taken it
         waits in the chat's order with them (an upgraded Telegram group's approval moves first)
      -> in the chat's order (InOrder, channels/media_in.py: a message waits for its chat's earlier ones,
         never for another chat's)
         -> files kept in media/ (MediaIntake, channels/media_in.py; a file not taken is said in the chat)
         -> what only the platform can say (`Arrival.lookup`: Telegram's admin rights, Slack's names)
         -> taken before? (bot/dedupe.py: right before publishing, no await between the two)
         -> publish (the flood gate, bot/access/flood.py, stands in front of the bus)
         -> while the turn runs, the channel's `typing` (channels/base.py Platform: a chat action, Discord's
            typing, Slack's reaction);
            group chatter not for the bot (`addressed=False`) shows none and gets no reply

Each adapter keeps what is truly its platform's: connecting, reading updates into `InboundMessage`s (with
their `ReplyRef`), finding and downloading files, showing typing, sending. The HTTP API and the terminal
and the web console are the owner's own and take no part in this (no allow-list, pairing, platform files
or typing there): they publish to the bus and wait for the turn themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.dedupe import MemorySeen, Seen, is_repeat
from bot.errors import BusClosed
from bot.events import InboundMessage
from bot.threads import Spawned
from channels.base import AllowList, Done, Platform, Publish, tell
from channels.media_in import InOrder, MediaIntake, Remote
from memory.media import MediaStore

logger = logging.getLogger(__name__)

Tell = Callable[[InboundMessage, str], Awaitable[None]]  # Tusk's own words about a message, outside any turn
Lookup = Callable[[InboundMessage], Awaitable[InboundMessage]]  # the message with what only the platform says


@dataclass(frozen=True, slots=True)
class Arrival:
    """A platform message as the chain takes it: `msg` from the adapter's `to_inbound`, and `seen_id`, the
    platform's id of it for never-twice (None: it cannot come twice); `group` (and its name) the allow-list
    may know, None in a direct chat; `files`, found when asked (not for chatter nobody keeps); `lookup`."""

    msg: InboundMessage
    seen_id: str | None = None
    group: str | None = None
    group_name: str = ""
    files: Callable[[], list[Remote]] | None = None
    lookup: Lookup | None = None


class Intake:
    """One platform's way in. `label` names the platform to people ("Telegram"); `channel` is the platform
    channel it feeds (its `send`, for the default `tell`, a notice in the chat; its `typing`); `media` None:
    files are not taken."""

    def __init__(self, label: str, channel: Platform, allow: AllowList, publish: Publish,
                 media: MediaStore | None = None, seen: Seen | None = None, tell: Tell | None = None) -> None:
        self.label = label
        self.allow = allow
        self.media = MediaIntake(media, label) if media is not None else None
        self.order = InOrder()  # a chat's messages published in arrival order, other chats never waiting
        self._publish = publish
        self._channel = channel
        self._seen = seen or MemorySeen()
        self._tell = tell
        self._shown = Spawned()  # the typing of running turns

    async def tell(self, msg: InboundMessage, text: str) -> None:
        """Tusk's own words about `msg` (a pairing code, a file not taken): the platform's way, else a notice."""
        if self._tell is not None:
            await self._tell(msg, text)
        else:
            await tell(self._channel.send, msg.key, text)

    async def take(self, arrival: Arrival) -> None:
        """The whole way in: the allow-list now, the rest in the chat's order; while the chat's earlier messages
        are still being taken (files, a lookup) or its files move (a Telegram group's upgrade), the allow-list
        waits with them, so it sees what they change (an upgraded group's approval)."""
        if self.order.busy(arrival.msg.key):
            self.order.run(arrival.msg.key, lambda: self._admit_and_land(arrival))
        elif await self.admit(arrival):
            self.queue(arrival)

    async def _admit_and_land(self, arrival: Arrival) -> None:
        if await self.admit(arrival):
            await self.land(arrival)

    async def admit(self, arrival: Arrival) -> bool:
        """The allow-list's verdict; a stranger's pairing code is told here."""
        msg = arrival.msg
        verdict = self.allow.check(msg.sender_id, msg.sender_name, group=arrival.group,
                                   group_name=arrival.group_name, addressed=msg.addressed)
        if verdict.reply:
            await self.tell(msg, verdict.reply)
        return verdict.admitted

    def queue(self, arrival: Arrival) -> None:
        """The rest of the way (`land`), once the chat's earlier messages are published."""
        self.order.run(arrival.msg.key, lambda: self.land(arrival))

    async def land(self, arrival: Arrival, files: list[Remote] | None = None) -> None:
        """Files kept (`files`: those found already, an album's), the platform's lookup, never twice, publish."""
        msg = arrival.msg
        if files is None:
            files = self.media.files_for(msg, arrival.files()) if self.media and arrival.files else []
        if files and self.media is not None:
            kept = await self.media.attach(msg, files, lambda key, text: self.tell(msg, text))
            if kept is None:  # no caption, no file taken: nothing to publish
                return
            msg = kept
        if arrival.lookup is not None:
            msg = await arrival.lookup(msg)
        if arrival.seen_id is None or not is_repeat(self._seen, self.allow.channel, arrival.seen_id):
            self.publish(msg)  # at once: the bus journals it before anything else runs

    def publish(self, msg: InboundMessage, typing: bool = True) -> Done | None:
        """Hand `msg` over (None when shutting down: it is not taken); an addressed message shows `typing`
        until its turn is done."""
        try:
            done = self._publish(msg)
        except BusClosed:
            if msg.addressed:
                logger.warning("a %s message arrived while shutting down; it was not taken", self.label)
            return None
        if msg.addressed and typing:
            self._shown.start(self._channel.typing(msg, done), f"typing {msg.key}")
        return done

    async def drain(self) -> None:
        """Publish what was taken already (messages still downloading their files): the channel pauses."""
        await self.order.drain()

    async def aclose(self, grace: float = 0.0) -> None:
        """Typing ends (after `grace` seconds: a marker being taken off), downloads stop."""
        await self._shown.cancel(grace)
        await self.order.cancel()
        if self.media is not None:
            await self.media.aclose()
