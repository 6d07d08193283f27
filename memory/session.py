"""Append-only JSONL sessions: one chat's conversation, a line per message.

File format (schema 1), one JSON object per line:

    {"record": "meta", "schema": 1, "channel": "http", "chat_id": "alice", "created": 1733...}
    {"role": "user", "content": "hi", "ts": 1733...}
    {"role": "assistant", "content": "hello", "ts": 1733...}
    {"record": "pointer", "last_consolidated": 2, "ts": 1733...}

Messages carry the OpenAI chat keys (`role`, `content`, `tool_calls`, `tool_call_id`,
`name`) at the top level plus `ts` and `tokens` (a tool call Gemini signed also keeps its
`"provider_specific_fields": {"thought_signature": ...}`, memory/wire.py); a user message also carries its sender,
`"sender": {"id": "123", "name": "Alice"}` (optional: older files have none), and when files came with it
the paths of the kept copies, `"media": ["media/<file>", ...]` (bot/media/: the text holds a placeholder
for each; the files themselves are never sent again). A `pointer` record says how many messages from the
start are consolidated; the last valid one wins (a pointer is written after the messages it
counts, so one that is not an integer or points past the messages before it is damaged: it is
skipped with a warning, never allowed to hide messages). Saving appends lines and fsyncs; nothing is
ever rewritten. Loading skips lines it cannot decode (a torn last line after a crash, a
bad hand edit) with a warning and keeps every other line.

In memory a `Session` holds only the messages past the pointer, so a turn costs the
same in a chat of ten messages as in one of ten thousand; `SessionStore` keeps recently
used sessions (LRU) so a warm turn reads nothing from disk.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory.paths import ChatFiles, open_private
from memory.tokens import count_message
from memory.wire import repaired_call

logger = logging.getLogger(__name__)

SCHEMA = 1
ROLES = frozenset({"system", "user", "assistant", "tool"})


class NewerSchemaError(ValueError):
    """The session file was written by a newer Tusk; it is left untouched."""


@dataclass(frozen=True, slots=True)
class Message:
    """One stored chat message. `tool_calls` are in OpenAI wire format."""

    role: str
    content: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    ts: float = field(default_factory=time.time)
    tokens: int = 0  # estimated prompt tokens, counted once when saved (memory/tokens.py)
    reasoning: str | None = None  # an assistant tool-call step's reasoning_content, sent back (see to_llm)
    thinking_blocks: tuple[dict[str, Any], ...] = ()  # the same for Anthropic's signed thinking blocks
    sender_id: str | None = None  # who wrote a user message (the platform's user id); never sent as a key
    sender_name: str | None = None  # their display name as the platform showed it then
    media: tuple[str, ...] = ()  # files that came with a user message: "media/<file>", relative to the chat folder

    def to_llm(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = list(self.tool_calls)
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        # DeepSeek: "for turns that do perform tool calls, the reasoning_content must be fully passed back
        # to the API in all subsequent requests" (api-docs.deepseek.com/guides/thinking_mode, else HTTP 400);
        # Anthropic: thinking blocks must come back unmodified with the tool use they led to
        # (docs.anthropic.com, extended thinking with tool use). litellm maps both to each provider's form.
        if self.reasoning:
            out["reasoning_content"] = self.reasoning
        if self.thinking_blocks:
            out["thinking_blocks"] = list(self.thinking_blocks)
        return out

    def to_record(self) -> dict[str, Any]:
        rec = {**self.to_llm(), "ts": self.ts, "tokens": self.tokens}
        if self.sender_id is not None:
            rec["sender"] = {"id": self.sender_id, "name": self.sender_name or ""}
        if self.media:
            rec["media"] = list(self.media)
        return rec

    def counted(self) -> Message:
        """This message with its token estimate filled in (itself if it has one)."""
        return self if self.tokens else replace(self, tokens=count_message(self.to_llm()))

    @staticmethod
    def check_record(rec: dict[str, Any]) -> None:
        """Raise ValueError/TypeError if a stored line is not a message (`from_record` then cannot fail):
        cheap, so loading a long file checks every line but builds only the unconsolidated ones."""
        if rec.get("role") not in ROLES:
            raise ValueError(f"unknown role {rec.get('role')!r}")
        if not isinstance(rec.get("tool_calls") or (), list | tuple):
            raise ValueError("malformed tool_calls")
        content = rec.get("content")
        if content is not None and not isinstance(content, str | list):
            raise ValueError("content is neither text nor a list of parts")
        float(rec.get("ts") or 0.0), int(rec.get("tokens") or 0)

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Message:
        """Parse a stored line; raises ValueError for anything that is not a message."""
        cls.check_record(rec)
        role = rec["role"]
        sender = rec.get("sender")
        sender = sender if isinstance(sender, dict) and sender.get("id") is not None else {}
        calls = rec.get("tool_calls") or ()
        blocks = rec.get("thinking_blocks") or ()
        blocks = tuple(b for b in blocks if isinstance(b, dict)) if isinstance(blocks, list) else ()
        media = rec.get("media")
        return cls(
            role=role,
            content=_text(rec.get("content")),
            tool_calls=tuple({**wire, "id": original} for original, wire in filter(None, map(repaired_call, calls))),
            tool_call_id=_opt_str(rec.get("tool_call_id")),
            name=_opt_str(rec.get("name")),
            ts=float(rec.get("ts") or 0.0),
            tokens=int(rec.get("tokens") or 0),
            reasoning=rec["reasoning_content"] if isinstance(rec.get("reasoning_content"), str) else None,
            thinking_blocks=blocks,
            sender_id=_opt_str(sender.get("id")),
            sender_name=_opt_str(sender.get("name")),
            media=tuple(p for p in media if isinstance(p, str)) if isinstance(media, list) else (),
        )


def _text(content: Any) -> str | None:
    """Content as text; a list of parts (older or hand-written files) keeps its text parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise ValueError("content is neither text nor a list of parts")


def _opt_str(value: Any) -> str | None:
    return value if value is None else str(value)


@dataclass(slots=True)
class Session:
    """A chat's conversation past its consolidation pointer (earlier messages stay on disk only)."""

    files: ChatFiles | None  # None for a chat kept in PostgreSQL (store/postgres/chats.py)
    channel: str
    chat_id: str
    last_consolidated: int = 0  # messages [0, last_consolidated) are summarised into memory
    total: int = 0  # messages in the file
    unconsolidated: list[Message] = field(default_factory=list)  # messages [last_consolidated, total)
    created: float | None = None  # None until the file exists
    needs_newline: bool = False  # the file ends in a torn line: start the next write on a new line

    @property
    def on_disk(self) -> ChatFiles:
        """The chat's files, for a session the files backend loaded (this module's SessionStore)."""
        if self.files is None:
            raise TypeError(f"{self.channel}/{self.chat_id}: a session kept in PostgreSQL has no files")
        return self.files

    @property
    def tokens(self) -> int:
        """Estimated prompt tokens of the unconsolidated messages (a sum of cached counts)."""
        return sum(m.tokens for m in self.unconsolidated)


class SessionStore:
    """Loads, caches and appends to the sessions under one `$TUSK_HOME`."""

    def __init__(self, home: Path, cache_size: int = 256) -> None:
        self.home = Path(home)
        self._cache: OrderedDict[Path, Session] = OrderedDict()
        self._cache_size = cache_size

    def get(self, channel: str, chat_id: str) -> Session:
        files = ChatFiles.locate(self.home, channel, chat_id)
        session = self._cache.get(files.dir)
        if session is not None and session.created is not None and not files.session.exists():
            session = None  # deleted under us (`tusk forget` beside the bot): nothing of it may linger
        if session is None:
            session = load(files, channel, chat_id)
            self._cache[files.dir] = session
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(files.dir)
        return session

    def cached(self, files: ChatFiles) -> Session | None:
        return self._cache.get(files.dir)

    def forget(self, files: ChatFiles) -> None:
        """Drop a cached session (its files were deleted or replaced)."""
        self._cache.pop(files.dir, None)

    def append(self, session: Session, messages: Sequence[Message],
               marks: Sequence[Mapping[str, Any] | None] | None = None) -> None:
        """Append `messages` durably; the in-memory session changes only once they are on disk. `marks`: a
        record's extra fields, one dict a message (`tusk import`'s source id), kept on disk only."""
        if not messages:
            return
        messages = [m.counted() for m in messages]
        lines = message_lines(messages, marks)
        if session.created is None:
            created = time.time()
            lines.insert(0, meta_line(session.channel, session.chat_id, created))
        _append_lines(session, lines)
        if session.created is None:
            session.created = created
        session.unconsolidated.extend(messages)
        session.total += len(messages)

    def set_pointer(self, session: Session, last_consolidated: int) -> None:
        """Record that the first `last_consolidated` messages are consolidated."""
        n = max(0, min(last_consolidated, session.total))
        if session.created is None:
            if n == 0:
                return
            raise ValueError("cannot move the pointer of a session with no file")
        _append_lines(session, [pointer_line(n)])
        drop = n - session.last_consolidated
        if drop >= 0:
            del session.unconsolidated[:drop]
        else:  # moving back (e.g. an undo) needs the older messages again
            older = list(iter_messages(session.on_disk))[n:session.last_consolidated]
            session.unconsolidated[:0] = [m.counted() for m in older]
        session.last_consolidated = n


def _dump(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


# -- the lines themselves: both stores keep session.jsonl's lines as written (store/postgres keeps them as rows)


def meta_line(channel: str, chat_id: str, created: float) -> str:
    """A session's first line."""
    return _dump({"record": "meta", "schema": SCHEMA, "channel": channel, "chat_id": chat_id, "created": created})


def pointer_line(n: int) -> str:
    """The line that moves the consolidation pointer to `n`."""
    return _dump({"record": "pointer", "last_consolidated": n, "ts": time.time()})


def message_lines(messages: Sequence[Message],
                  marks: Sequence[Mapping[str, Any] | None] | None = None) -> list[str]:
    """Messages (counted) as their lines, each with its mark's extra fields (`tusk import`'s source id)."""
    return [_dump({**m.to_record(), **(mark or {})}) for m, mark in zip(messages, marks or [None] * len(messages))]


def whole_session(channel: str, chat_id: str, created: float, messages: Sequence[Message], pointer: int,
                  marks: Sequence[Mapping[str, Any] | None] | None = None) -> list[str]:
    """A session written anew (`/forget me`): its meta line, the messages, one pointer."""
    return [meta_line(channel, chat_id, created), *message_lines(messages, marks),
            pointer_line(max(0, min(pointer, len(messages))))]


@dataclass(frozen=True, slots=True)
class Line:
    """What one session line is, read as `load` reads it: `kind` is "meta", "pointer", "message" or "bad"
    (skipped with `why`); `value` is a meta line's created time, a pointer's count or a message's record."""

    kind: str
    value: Any = None
    why: str = ""


def read_line(raw: bytes | str, messages_before: int) -> Line:
    """One line of a session with `messages_before` messages before it (a pointer may not pass them)."""
    try:
        rec = json.loads(raw)
        if not isinstance(rec, dict):
            raise ValueError("not a JSON object")
        kind = rec.get("record")
        if kind == "meta":
            if int(rec.get("schema", 0)) > SCHEMA:
                raise NewerSchemaError(f"written by a newer Tusk (schema {rec['schema']})")
            return Line("meta", float(rec.get("created") or 0.0) or None)
        if kind == "pointer":
            value = rec.get("last_consolidated")
            if type(value) is not int or not 0 <= value <= messages_before:  # noqa: E721 (bool is no count)
                raise ValueError(f"impossible pointer {value!r} with {messages_before} messages before it")
            return Line("pointer", value)
        if kind is not None:
            raise ValueError(f"unknown record {kind!r}")
        Message.check_record(rec)
        return Line("message", rec)
    except NewerSchemaError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        return Line("bad", why=str(exc) or type(exc).__name__)


def _append_lines(session: Session, lines: list[str]) -> None:
    path = session.on_disk.session
    new_file = not path.exists()
    if new_file:
        session.on_disk.ensure()
    data = ("\n" if session.needs_newline else "") + "".join(lines)
    try:
        with os.fdopen(open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        session.needs_newline = True  # a partial write may have left a torn line
        raise
    session.needs_newline = False
    if new_file:
        _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _records(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, raw line, is last line without newline) for each non-blank line."""
    with os.fdopen(open_private(path, os.O_RDONLY), "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if raw.strip():
                yield number, raw, not raw.endswith(b"\n")


def load(files: ChatFiles, channel: str, chat_id: str) -> Session:
    session = Session(files, channel, chat_id)
    if not files.session.exists():
        return session
    messages: list[dict[str, Any]] = []  # checked records; only those past the pointer become Messages
    pointer = 0
    session.created = files.session.stat().st_mtime
    for number, raw, torn in _records(files.session):
        session.needs_newline = torn
        try:
            line = read_line(raw, len(messages))
        except NewerSchemaError as exc:
            raise NewerSchemaError(f"{files.session} was {exc}") from None
        if line.kind == "meta":
            session.created = line.value or session.created
        elif line.kind == "pointer":
            pointer = line.value
        elif line.kind == "message":
            messages.append(line.value)
        else:
            what = "torn last line (interrupted write)" if torn else f"undecodable line ({line.why})"
            logger.warning("%s: skipping %s at line %d", files.session, what, number)
    session.total = len(messages)
    session.last_consolidated = max(0, min(pointer, session.total))
    session.unconsolidated = [Message.from_record(r).counted() for r in messages[session.last_consolidated:]]
    return session


def iter_messages(files: ChatFiles) -> Iterator[Message]:
    """Every readable message of a chat's file, consolidated or not (for search and admin tools)."""
    if not files.session.exists():
        return
    for _, raw, _ in _records(files.session):
        line = read_line(raw, 0)
        if line.kind == "message":
            yield Message.from_record(line.value)
