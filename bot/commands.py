"""Chat commands (`/help`, `/status`, `/new`): answered by Tusk itself, never sent to the LLM
and never saved in the session.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from bot.events import ChatKey
from memory.paths import ChatFiles
from memory.session import Session, SessionStore

COMMAND = re.compile(r"/([A-Za-z][A-Za-z0-9_]{0,31})(?:@\S+)?(?:\s+(.*))?", re.DOTALL)


@dataclass(frozen=True, slots=True)
class CommandContext:
    key: ChatKey
    files: ChatFiles
    session: Session
    store: SessionStore
    model: str


CommandFn = Callable[[CommandContext, str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    summary: str
    fn: CommandFn


def parse(text: str) -> tuple[str, str] | None:
    """`("status", "args")` when `text` is a command (`/status`, `/status@tuskbot args`), else None."""
    match = COMMAND.fullmatch(text.strip())
    return (match[1].lower(), (match[2] or "").strip()) if match else None


class Commands:
    def __init__(self) -> None:
        self.table: dict[str, Command] = {}
        for name, summary, fn in (("help", "this list", self._help),
                                  ("status", "model, conversation and memory size", _status),
                                  ("new", "start a fresh conversation (memory is kept)", _new)):
            self.add(Command(name, summary, fn))

    def add(self, command: Command) -> None:
        self.table[command.name] = command

    async def run(self, name: str, args: str, ctx: CommandContext) -> str:
        command = self.table.get(name)
        if command is None:
            return f"I don't know /{name}.\n\n" + await self._help(ctx, "")
        return await command.fn(ctx, args)

    async def _help(self, ctx: CommandContext, args: str) -> str:
        lines = [f"/{c.name} — {c.summary}" for c in self.table.values()]
        return "Commands:\n" + "\n".join(lines) + "\n\nAnything else you write goes to the model."


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if ts else "never"


async def _status(ctx: CommandContext, args: str) -> str:
    s = ctx.session
    memory_chars = ctx.files.memory.stat().st_size if ctx.files.memory.exists() else 0
    last = s.unconsolidated[-1].ts if s.unconsolidated else None
    return "\n".join([
        f"Model: {ctx.model}",
        f"Messages in this chat: {s.total} ({len(s.unconsolidated)} in the current conversation)",
        f"Memory (MEMORY.md): {memory_chars} bytes",
        f"Last message: {_when(last)}",
    ])


async def _new(ctx: CommandContext, args: str) -> str:
    count = len(ctx.session.unconsolidated)
    if count == 0:
        return "This conversation is already empty."
    ctx.store.set_pointer(ctx.session, ctx.session.total)
    return f"Started a new conversation; {count} earlier messages stay on disk and out of the prompt."
