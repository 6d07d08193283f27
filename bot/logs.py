"""Logging: the chat and turn bound once per turn, secrets masked, configured only by the CLI.

Every record gets `chat` and `turn` attributes from context variables, so a module logs
`logger.info("...")` and the line still says which chat it came from. Message text is
never logged: a log line holds ids, sizes and errors, not what people wrote.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

_chat: ContextVar[str] = ContextVar("tusk_chat", default="-")
_turn: ContextVar[str] = ContextVar("tusk_turn", default="-")

FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(chat)s #%(turn)s] %(message)s"


@contextlib.contextmanager
def bound(chat: object, turn: object) -> Iterator[None]:
    """Tag every log record made inside the block (and tasks it starts) with this chat and turn."""
    tokens = _chat.set(str(chat)), _turn.set(str(turn))
    try:
        yield
    finally:
        _chat.reset(tokens[0])
        _turn.reset(tokens[1])


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.chat = _chat.get()
        record.turn = _turn.get()
        return True


class MaskingFormatter(logging.Formatter):
    """Formats as usual, then masks secrets anywhere in the line, tracebacks included."""

    def __init__(self, fmt: str, secrets: Iterable[str] = ()) -> None:
        super().__init__(fmt)
        self.secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


def configure(level: str = "INFO", secrets: Iterable[str] = ()) -> None:
    """Send logs to stderr with chat context; `secrets` are masked wherever they appear."""
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    handler.setFormatter(MaskingFormatter(FORMAT, secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
