"""The typed events that travel the bus: what a channel hands in, what the agent hands back.

Channels build `InboundMessage`s from platform updates; the agent answers with
`OutboundMessage`s that the bus routes to the channel named in their `ChatKey`.
Anything only an adapter needs (a platform message id to reply to) stays in the adapter.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from memory.paths import CHANNEL_NAME, chat_dir_name

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True, order=True)
class ChatKey:
    """One conversation: a platform (`telegram`, `http`, ...) and that platform's chat id."""

    channel: str
    chat_id: str

    def __post_init__(self) -> None:
        """Every key names a folder of its own: a bad channel or an unusable id fails here, at the edge."""
        if not CHANNEL_NAME.fullmatch(self.channel):
            raise ValueError(f"bad channel name {self.channel!r}")
        chat_dir_name(self.chat_id)

    def __str__(self) -> str:  # for logs only; never parsed back
        return f"{self.channel}:{self.chat_id}"


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A user's message, already gated by the channel (allow-list, mentions)."""

    key: ChatKey
    text: str
    sender_id: str
    sender_name: str = ""
    is_group: bool = False
    sender_is_admin: bool = False  # may erase this chat's memory in a group (/forget, /memory undo)
    ts: float = field(default_factory=time.time)
    id: int = field(default_factory=lambda: next(_ids))  # process-unique, ties replies to it


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """Text for a chat; `reply_to` is the `InboundMessage.id` it answers, if any."""

    key: ChatKey
    text: str
    reply_to: int | None = None
