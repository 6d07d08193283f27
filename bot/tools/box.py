"""Tools the model may call: plain typed async functions (or bound methods).

A tool's name is its function's `__name__`, its description the docstring, its JSON
schema the signature (via pydantic; `Annotated[str, Field(max_length=..., description=...)]`
adds constraints and parameter descriptions). A parameter annotated `ToolContext` is not
shown to the model: it is how a tool learns which chat it runs for, and the only way it
reaches files, so a tool can touch nothing outside its own chat. Arguments are validated
before the call; a failure of any kind becomes an error result for the model, never a
broken turn.

The chat's tools live beside what they serve: bot/tools/memory.py (search_history,
remember), bot/tools/reminders.py (set_reminder, list_reminders, cancel_reminder), bot/tools/tasks.py
(start_task). There are no shell or filesystem tools. Tools of MCP servers (bot/tools/mcp/) join
per chat through `ToolBox.extra`: `for_chat(msg)` gives one turn's tool set.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, get_type_hints
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic

from bot.errors import TuskError
from bot.events import ChatKey, InboundMessage
from bot.llm import ToolCall
from memory.chat_settings import ChatSettings
from store.base import Chat, ChatHandle, ChatStore

logger = logging.getLogger(__name__)

ToolFn = Callable[..., Awaitable[str]]
Notify = Callable[[str], Awaitable[None]]


async def no_notice(text: str) -> None:
    """Where Tusk's own notices go when there is no chat to post them to (a background task's steps)."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    key: ChatKey
    chat: Chat | None  # the chat as the turn loaded it (None where a tool runs for no loaded chat: a test)
    chats: ChatStore | None = None  # the store, for what the loaded chat does not hold
    notify: Notify = no_notice  # posts Tusk's own words (not the model's) to this chat, like a reply
    sender_id: str = ""  # who wrote the message the tool runs for ("tusk" for turns Tusk starts itself)
    sender_name: str = ""
    is_group: bool = False
    sender_is_admin: bool = False  # an admin of this group (the platform's rights), as on the InboundMessage
    message_text: str = ""  # the message the tool runs for (remember links a fact to it: memory/provenance.py)

    @property
    def prefs(self) -> ChatSettings:
        """The chat's own settings (time zone, ...): the defaults where no chat was loaded."""
        return self.chat.prefs if self.chat is not None else ChatSettings()

    @property
    def handle(self) -> ChatHandle:
        """Everything the chat keeps (store/base.py)."""
        assert self.chats is not None
        return self.chats.handle(self.key)


@dataclass(frozen=True, slots=True)
class ToolResult:
    call: ToolCall
    output: str = ""
    error: Exception | None = None

    def for_model(self) -> str:
        """The text the model sees for this call (the one place results are formatted)."""
        if self.error is None:
            return self.output
        return f"Error: {type(self.error).__name__}: {self.error}"


class ToolArgumentError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    fn: ToolFn
    args: type[pydantic.BaseModel]
    context_param: str | None

    @classmethod
    def from_function(cls, fn: ToolFn) -> Tool:
        hints = get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        context_param = None
        for name, param in inspect.signature(fn).parameters.items():
            if hints.get(name) in (ToolContext, ToolContext | None):  # None: a tool also called without a chat
                context_param = name
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[name] = (hints.get(name, str), default)
        model = pydantic.create_model(f"{fn.__name__}_args", __config__=pydantic.ConfigDict(extra="forbid"),
                                      **fields)
        return cls(fn.__name__, inspect.cleandoc(fn.__doc__ or ""), fn, model, context_param)

    def schema(self) -> dict[str, Any]:
        params = self.args.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": params}}

    def parse(self, arguments: str) -> dict[str, Any]:
        try:
            raw = json.loads(arguments or "{}")
            if isinstance(raw, str):  # some models double-encode
                raw = json.loads(raw)
            return dict(self.args.model_validate(raw))
        except (ValueError, TypeError) as exc:  # pydantic.ValidationError is a ValueError
            raise ToolArgumentError(f"invalid arguments for {self.name}: {exc}") from exc


class ChatToolSource(Protocol):
    """Tools some chats get besides the built-in ones (MCP servers, bot/tools/mcp/)."""

    def for_chat(self, box: ToolBox, msg: InboundMessage) -> Toolset: ...

    def status_lines(self, msg: InboundMessage) -> list[str]: ...


class Toolset(Protocol):
    """What one turn calls: the schemas to offer and how to run a call."""

    @property
    def schemas(self) -> list[dict[str, Any]]: ...

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult: ...


class ToolBox:
    def __init__(self, fns: Iterable[ToolFn], extra: ChatToolSource | None = None) -> None:
        self.extra = extra
        self.tools: dict[str, Tool] = {}
        for tool in map(Tool.from_function, fns):
            if tool.name in self.tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            self.tools[tool.name] = tool
        self.schemas = [tool.schema() for tool in self.tools.values()]

    def for_chat(self, msg: InboundMessage) -> Toolset:
        """The tools of one turn in `msg`'s chat: this box itself unless `extra` adds some for that chat."""
        return self.extra.for_chat(self, msg) if self.extra is not None else self

    def status(self, msg: InboundMessage) -> list[str]:
        """Lines /status adds about the extra tools of `msg`'s chat (none without `extra`)."""
        return self.extra.status_lines(msg) if self.extra is not None else []

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        tool = self.tools.get(call.name)
        try:
            if tool is None:
                raise ToolArgumentError(f"no tool named {call.name!r}; available: {', '.join(self.tools)}")
            if call.error is not None:  # not run on a guess: the model sees what it wrote and tries again
                raise ToolArgumentError(f"{call.error}; call {call.name} again with a JSON object")
            kwargs = tool.parse(call.arguments)
            if tool.context_param:
                kwargs[tool.context_param] = ctx
            return ToolResult(call, output=str(await tool.fn(**kwargs)))
        except Exception as exc:  # tool boundary: any failure is reported to the model, not raised
            if isinstance(exc, TuskError):  # a failure Tusk names itself (a refused fetch, an MCP error): no trace
                logger.warning("tool %s failed: %s", call.name, exc)
            elif not isinstance(exc, ToolArgumentError):
                logger.exception("tool %s failed", call.name)
            return ToolResult(call, error=exc)


async def current_time(timezone: str = "UTC") -> str:
    """The current date and time in an IANA time zone (e.g. Europe/Paris)."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {timezone!r}") from exc
    return datetime.now(zone).strftime("%A %Y-%m-%d %H:%M:%S %Z (UTC%z)")


BUILTIN_TOOLS: tuple[ToolFn, ...] = (current_time,)
