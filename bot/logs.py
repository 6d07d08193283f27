"""Logging: the chat and turn bound once per turn, secrets masked, configured only by the CLI.

Every record gets `chat` and `turn` attributes from context variables, so a module logs
`logger.info("...")` and the line still says which chat it came from. Message text is
not logged (unless the operator sets TUSK_LOG_CONTENT): a line holds ids, sizes, timings
and errors. `TurnStats` collects what one turn cost (LLM calls, tokens, time) for the one
summary line the agent writes per turn. Text or JSON lines (TUSK_LOG_FORMAT), on stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path

_chat: ContextVar[str] = ContextVar("tusk_chat", default="-")
_turn: ContextVar[str] = ContextVar("tusk_turn", default="-")


@dataclass(slots=True)
class TurnStats:
    """What one turn cost, tallied while it runs; LLM calls made while it is bound add to it (tasks it starts
    included). The agent hands the turn's outcome on frozen, as a `TurnResult` (bot/events.py)."""

    started: float = field(default_factory=time.monotonic)
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    llm_ms: float = 0.0
    outcome: str = "ok"  # how the turn ended: ok, stopped, spend_limit, llm_unavailable, llm_error, too_long, crash
    first_text_ms: float | None = None  # when the reply first showed as it was written (streamed turns)

    def add_call(self, prompt_tokens: int, completion_tokens: int, ms: float) -> None:
        self.llm_calls += 1
        self.tokens_in += prompt_tokens
        self.tokens_out += completion_tokens
        self.llm_ms += ms

    def fields(self) -> dict[str, object]:
        """The figures for the turn's log line (`extra=`), total time measured now."""
        out = {k: v for k, v in asdict(self).items() if k != "started"}
        out["llm_ms"] = round(self.llm_ms)
        out["total_ms"] = round((time.monotonic() - self.started) * 1000)
        return out


_stats: ContextVar[TurnStats | None] = ContextVar("tusk_turn_stats", default=None)


def current_stats() -> TurnStats | None:
    return _stats.get()


PAYLOAD_LOGGERS = ("telegram", "discord", "slack_sdk", "slack_bolt", "channels.slack.library", "httpx",
                   "aiohttp.access")
FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(chat)s #%(turn)s] %(message)s"


@contextlib.contextmanager
def bound(chat: object, turn: object, stats: TurnStats | None = None) -> Iterator[None]:
    """Tag every log record made inside the block (and tasks it starts) with this chat and turn,
    and count the LLM calls made meanwhile into `stats`."""
    tokens = _chat.set(str(chat)), _turn.set(str(turn)), _stats.set(stats)
    try:
        yield
    finally:
        _chat.reset(tokens[0])
        _turn.reset(tokens[1])
        _stats.reset(tokens[2])


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.chat = _chat.get()
        record.turn = _turn.get()
        return True


def maskable(secrets: Iterable[str]) -> list[str]:
    """The secrets worth masking (6 characters or more), longest first."""
    return sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)


def mask(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret replaced by `***`, as the log writes it (also `tusk doctor`'s output)."""
    for secret in maskable(secrets):
        text = text.replace(secret, "***")
    return text


class MaskingFormatter(logging.Formatter):
    """Formats as usual, then masks secrets anywhere in the line, tracebacks included."""

    def __init__(self, fmt: str, secrets: Iterable[str] = ()) -> None:
        super().__init__(fmt)
        self.secrets = maskable(secrets)

    def format(self, record: logging.LogRecord) -> str:
        return mask(super().format(record), self.secrets)


STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "chat", "turn"}


class JsonFormatter(MaskingFormatter):
    """One JSON object per line: time, level, logger, chat, turn, message, any `extra=` fields."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__("%(message)s", secrets)

    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
                "chat": getattr(record, "chat", "-"), "turn": getattr(record, "turn", "-"),
                "msg": record.getMessage()}
        line |= {k: v for k, v in vars(record).items() if k not in STANDARD}
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        text = json.dumps(line, ensure_ascii=False, default=str)
        for secret in self.secrets:
            text = text.replace(json.dumps(secret)[1:-1], "***")
        return text


def configure(level: str = "INFO", secrets: Iterable[str] = (), fmt: str = "text") -> None:
    """Send logs to stderr with chat context, as text or JSON; `secrets` are masked wherever they appear."""
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter(secrets) if fmt == "json" else MaskingFormatter(FORMAT, secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in PAYLOAD_LOGGERS:  # at DEBUG they log request bodies: what people wrote
        logging.getLogger(name).setLevel(max(logging.INFO, root.level))


def to_file(path: Path) -> None:
    """Send the configured log lines to `path` (appended, owner-only, never through a symlink) instead of
    stderr: at the terminal chat the screen is the conversation."""
    from memory.paths import open_private

    stream = open(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "a", encoding="utf-8", buffering=1)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(stream)
