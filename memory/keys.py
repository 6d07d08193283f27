"""A chat's key: a platform (`telegram`, `http`, ...) and that platform's chat id. Every store keeps a chat
under its key alone (a folder of its own, rows reachable only through it), so a key that could not name
one (a bad channel, an empty or over-long id) fails here, at the edge."""

from __future__ import annotations

import re
from dataclasses import dataclass

CHANNEL_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
MAX_ID_BYTES = 180  # a folder name of base64 of 180 bytes is 240 characters: within every filesystem's 255


def check_chat_id(chat_id: str) -> bytes:
    """The id's bytes; ValueError for an id no store can keep."""
    raw = chat_id.encode("utf-8", "surrogatepass")
    if not raw or len(raw) > MAX_ID_BYTES:
        raise ValueError(f"chat id must be 1 to {MAX_ID_BYTES} bytes long, got {len(raw)}")
    return raw


@dataclass(frozen=True, slots=True, order=True)
class ChatKey:
    """One conversation: a platform and that platform's chat id."""

    channel: str
    chat_id: str

    def __post_init__(self) -> None:
        if not CHANNEL_NAME.fullmatch(self.channel):
            raise ValueError(f"bad channel name {self.channel!r}")
        check_chat_id(self.chat_id)

    def __str__(self) -> str:  # for logs only; never parsed back
        return f"{self.channel}:{self.chat_id}"
