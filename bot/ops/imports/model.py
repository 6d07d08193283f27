"""What every import format yields: one message, as plain values."""

from __future__ import annotations

from dataclasses import dataclass

MAX_TEXT = 1 << 20  # characters of one message: more is not a chat message
MAX_DEPTH = 32  # nesting of a message's JSON: deeper is a bomb, not an export


class ImportRefused(ValueError):
    """A source that is malformed, truncated or hostile: refused, nothing written."""


@dataclass(frozen=True, slots=True)
class Imported:
    chat: tuple[str, str] | None  # (platform, chat id) as Tusk names it, when the source says
    source_id: str  # unique within the source's chat: the key that makes a second import add nothing
    ts: float
    text: str
    sender_id: str | None = None
    sender_name: str | None = None
    role: str = "user"
    settled: bool = False  # already in the source's own memory (a `tusk export` past its pointer)
