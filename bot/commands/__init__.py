"""Chat commands: answered by Tusk itself, never sent to the LLM and never saved in the session.

    /help  /status  /new  /memory [history [n] | undo]  /forget [confirm]  /timezone [Area/City | reset]
    /memory why <words>  /memory forget <words> | <n>... | all <words>  (bot/commands/memory_why.py)
    /forget me [confirm]  /forget @name|id:<id> [confirm]  (one member of a group: bot/commands/erasure.py)
    /listen [on | off]  (a group's messages not addressed to the bot kept as context; admins)
    /persona [text | reset]  (this chat's persona: bot/commands/persona.py)
    (+ what the app adds: /reminders and /checkins from bot/commands/reminders.py, /usage, /model, /skills,
    /stop, /voice from bot/speech/command.py)

/forget lists and deletes everything the chat owns: its files, and what other components keep
for it (`Holder`s: its reminders, its running background tasks). What a command gets and gives
(`CommandContext`, `Command`, `Owned`) is in bot/commands/base.py.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from bot.commands.base import ADMINS_ONLY, Command, CommandContext, Holder, Owned, counted, delete_each
from bot.commands.memory_why import memory_subcommand
from bot.commands.persona import persona_command
from memory import chat_settings, persona, provenance, tombstones
from memory import files as memfiles
from memory.documents import kept_paths
from memory.media import size_text, usage_text
from memory.media import usage as media_usage
from memory.search_index import delete_index
from memory.tokens import count_text

if TYPE_CHECKING:
    from bot.commands.erasure import MemberErasure

COMMAND = re.compile(r"/([A-Za-z][A-Za-z0-9_]{0,31})(?:@\S+)?(?:\s+(.*))?", re.DOTALL)


def parse(text: str) -> tuple[str, str] | None:
    """`("status", "args")` when `text` is a command (`/status`, `/status@tuskbot args`), else None."""
    match = COMMAND.fullmatch(text.strip())
    return (match[1].lower(), (match[2] or "").strip()) if match else None


class Commands:
    def __init__(self, default_timezone: str = "UTC", holders: Sequence[Holder] = (),
                 extra: Iterable[Command] = (), erasure: MemberErasure | None = None,
                 persona_max_tokens: int = persona.DEFAULT_MAX_TOKENS,
                 status_extra: Sequence[Callable[[CommandContext], Sequence[str]]] = ()) -> None:
        self.default_timezone = default_timezone
        self.status_extra = tuple(status_extra)  # more /status lines (today's spend: bot/usage/view.py)
        self.holders = tuple(holders)
        self.erasure = erasure  # /forget me, /forget @name, /forget id:<id> (bot/commands/erasure.py)
        self.table: dict[str, Command] = {}
        for name, summary, fn in (("help", "this list", self._help),
                                  ("status", "model, conversation and memory size", self._status),
                                  ("new", "start a fresh conversation (memory is kept)", _new),
                                  ("memory", "what I remember here; '/memory why <words>', '/memory forget <words>', "
                                   "'/memory history [n]', '/memory undo'", _memory),
                                  ("forget", "erase everything I keep about this chat; "
                                   "'/forget me' just what you left here", self._forget),
                                  ("timezone", "this chat's time zone; '/timezone Europe/Berlin' sets it",
                                   self._timezone),
                                  ("listen", "in a group: '/listen on' keeps messages not for me as context",
                                   _listen)):
            self.add(Command(name, summary, fn))
        self.add(persona_command(persona_max_tokens))
        for command in extra:
            self.add(command)

    def add(self, command: Command) -> None:
        self.table[command.name] = command

    async def run(self, name: str, args: str, ctx: CommandContext) -> str:
        command = self.table.get(name)
        if command is None:
            return f"I don't know /{name}.\n\n" + await self._help(ctx, "")
        return await command.fn(ctx, args)

    async def _status(self, ctx: CommandContext, args: str) -> str:
        extra = [line for source in self.status_extra for line in source(ctx)]
        return "\n".join([await _status(ctx, args), *extra])

    async def _help(self, ctx: CommandContext, args: str) -> str:
        lines = [f"/{c.name} — {c.summary}" for c in self.table.values()]
        return "Commands:\n" + "\n".join(lines) + "\n\nAnything else you write goes to the model."

    async def _forget(self, ctx: CommandContext, args: str) -> str:
        words = args.split()
        if words and (words[0].lower() == "me" or words[0][:1] == "@" or words[0].lower().startswith("id:")):
            if words[0].lower() == "me" and not ctx.is_group:  # in a direct chat, all of it is theirs
                args = " ".join(words[1:])
            elif self.erasure is not None:
                return await self.erasure.run(ctx, words)
        if not ctx.may_erase:
            return ADMINS_ONLY.format(what="make me forget this chat")
        items = _inventory(ctx) + [item for holder in self.holders for item in holder.owned(ctx.key)]
        if all(item.quiet for item in items):
            return "I keep nothing about this chat: there is nothing to forget."
        if args.strip().lower() != "confirm":
            return ("This would delete:\n" + "\n".join(f"- {item.label}" for item in items)
                    + "\n\nSend /forget confirm to delete it all.")
        ctx.store.forget(ctx.files)  # a consolidation still running for this chat now discards its result
        if ctx.consolidator is not None:
            ctx.consolidator.stats.pop(ctx.files.dir, None)
        report = delete_each(items, "deleted")
        for stray in sorted(ctx.files.dir.glob(".*.tmp")):
            stray.unlink(missing_ok=True)
        try:
            ctx.files.dir.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            report.append("- the chat folder is not empty (files not made by Tusk were kept)")
        return "Forgotten:\n" + "\n".join(report)

    async def _timezone(self, ctx: CommandContext, args: str) -> str:
        current = chat_settings.read(ctx.files)
        name = args.strip()
        if not name:
            zone = chat_settings.zone(current.timezone or self.default_timezone)
            how = "set with /timezone" if current.timezone else "the default"
            return (f"This chat's time zone is {zone.key} ({how}); it is {datetime.now(zone):%H:%M} there.\n"
                    "Change it with /timezone Area/City, e.g. /timezone America/New_York; "
                    "/timezone reset goes back to the default.")
        if name.lower() in ("reset", "default"):
            if current.timezone is not None:
                chat_settings.write(ctx.files, replace(current, timezone=None))
            return f"This chat uses the default time zone again: {self.default_timezone}."
        try:
            zone = chat_settings.zone(name)
        except ValueError as exc:
            return f"{exc}."
        chat_settings.write(ctx.files, replace(current, timezone=zone.key))
        return (f"This chat's time zone is now {zone.key}; it is {datetime.now(zone):%H:%M} there. "
                "Reminders and the times I am given use it.")


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if ts else "never"


async def _status(ctx: CommandContext, args: str) -> str:
    s, c = ctx.session, ctx.consolidator
    memory = memfiles.read_memory(ctx.files)
    lines = [f"Model: {ctx.model}",
             f"Messages in this chat: {s.total} ({len(s.unconsolidated)} not yet consolidated)",
             f"Memory (MEMORY.md): {count_text(memory):,} tokens"]
    if c is not None:
        stats = c.stats.get(ctx.files.dir)
        lines[1:1] = [f"Prompt: ~{ctx.fixed_tokens + s.tokens:,} of {c.budget.limit:,} tokens "
                      f"(window {c.budget.window:,}{f' from {c.budget.source}' if c.budget.source else ''}, "
                      f"{c.budget.reserve:,} kept for the reply)"]
        lines.append(f"Consolidations since start: {stats.runs if stats else 0}, "
                     f"~{stats.tokens_sent if stats else 0:,} tokens sent")
        if stats and stats.last_error:
            lines.append(f"Last consolidation problem: {stats.last_error}")
    listen = chat_settings.read(ctx.files).listen
    if ctx.is_group or listen:
        lines.append(LISTEN_STATUS[listen])
    return "\n".join([*lines, *ctx.model_notes, *ctx.tool_status])


LISTEN_STATUS = {True: "Listening: on (messages here not meant for me are kept as context; /listen off stops it)",
                 False: "Listening: off (only messages meant for me are kept; /listen on keeps all as context)"}


async def _listen(ctx: CommandContext, args: str) -> str:
    """/listen on|off: whether a group's messages not addressed to the bot are saved as context."""
    current = chat_settings.read(ctx.files)
    word = args.strip().lower()
    if not word:
        return LISTEN_STATUS[current.listen]
    if word not in ("on", "off"):
        return "Use /listen on or /listen off."
    if not ctx.is_group:
        return "Listening is for group chats: here every message is already meant for me."
    if not ctx.may_erase:
        return ADMINS_ONLY.format(what="change what I listen to")
    if current.listen != (word == "on"):
        chat_settings.write(ctx.files, replace(current, listen=word == "on"))
    if word == "on":
        return ("Listening: on. Messages here that are not meant for me are now saved, with who wrote them, and "
                "become part of this chat's memory; I don't answer them. The platform must deliver them to me "
                "(see the README). /forget me takes a member out again.")
    return "Listening: off. From now on I keep only messages meant for me."


async def _new(ctx: CommandContext, args: str) -> str:
    s = ctx.session
    count = len(s.unconsolidated)
    if count == 0:
        return "This conversation is already empty."
    if ctx.consolidator is not None:
        await ctx.consolidator.run(s, lambda: 0, force=True)
    left = len(s.unconsolidated)
    ctx.store.set_pointer(s, s.total)
    if left:
        return (f"Started a new conversation. {count - left} messages were summarised into memory; "
                f"{left} could not be and stay only in the session file.")
    return f"Started a new conversation; the {count} earlier messages were summarised into memory."


async def _memory(ctx: CommandContext, args: str) -> str:
    words = args.split()
    if (answer := await memory_subcommand(ctx, words)) is not None:  # why, forget (bot/commands/memory_why.py)
        return answer
    if words[:1] == ["history"]:
        n = int(words[1]) if len(words) > 1 and words[1].isdigit() else 5
        entries = memfiles.history_entries(ctx.files)[-n:] if n else []
        return "\n\n".join(entries) if entries else "No history entries yet."
    if words[:1] == ["undo"]:
        if not ctx.may_erase:
            return ADMINS_ONLY.format(what="undo a memory change")
        if memfiles.restore_previous(ctx.files):
            return "Restored the previous version of MEMORY.md:\n\n" + (memfiles.read_memory(ctx.files) or "(empty)")
        return "There is no earlier version of MEMORY.md to restore."
    memory = memfiles.read_memory(ctx.files).strip()
    entries = memfiles.history_entries(ctx.files)
    last = ctx.consolidator.stats.get(ctx.files.dir) if ctx.consolidator else None
    cap = f" of {ctx.consolidator.max_memory_tokens:,}" if ctx.consolidator else ""
    head = (f"MEMORY.md: {count_text(memory):,}{cap} tokens; "
            f"{counted(len(entries), 'history entry', 'history entries')}; "
            f"last consolidation: {_when(last.last_run) if last else 'not since start'}")
    if ctx.files.media.is_dir():
        head += f"\nFiles: {usage_text(ctx.files.media)}"
    if not memory:
        return "I don't remember anything about this chat yet. Facts are saved as the conversation grows.\n" + head
    return f"{memory}\n\n{head}"


def _delete_path(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


def _settings_held(settings: chat_settings.ChatSettings) -> str:
    """What a chat's settings.json sets, for /forget: `: time zone Europe/Paris, model fast` ('' for nothing)."""
    held = [f"time zone {settings.timezone}" if settings.timezone else "",
            f"model {settings.model}" if settings.model else "", "listens to every message" if settings.listen else ""]
    return ": " + ", ".join(h for h in held if h) if any(held) else ""


def _received(media: Path) -> str:
    count, size = media_usage(media)
    return f"{counted(count, 'received file')} ({size_text(size)} in media/)"


def _inventory(ctx: CommandContext) -> list[Owned]:
    """The chat's own files that exist, with what each holds."""
    f = ctx.files
    items = [(f.memory, lambda: f"MEMORY.md ({f.memory.stat().st_size:,} bytes)"),
             (f.persona, lambda: "this chat's persona (PERSONA.md)"),
             (f.history, lambda: f"{counted(len(memfiles.history_entries(f)), 'history entry', 'history entries')} "
                                 "(HISTORY.md)"),
             (f.session, lambda: f"{counted(ctx.session.total, 'session message')} (session.jsonl)"),
             (f.versions, lambda: counted(len(memfiles.versions(f)), "earlier memory version")),
             (f.settings, lambda: f"chat settings (settings.json{_settings_held(chat_settings.read(f))})"),
             (f.input_history, lambda: "what was typed at the terminal (input-history)"),
             (f.media, lambda: _received(f.media)),
             (f.documents, lambda: f"the text of {counted(len(kept_paths(f)), 'document or web page', 'documents and web pages')} "
                                   "kept for search (documents/)"),
             (provenance.path(f), lambda: "where each remembered fact came from (provenance.json)"),
             (tombstones.path(f), lambda: f"{counted(len(tombstones.load(f)), 'forgotten fact')} kept out "
                                          "(forgotten.json)")]
    owned = [Owned(label(), partial(_delete_path, path)) for path, label in items if path.exists()]
    if f.search_index.exists():
        owned.append(Owned("the search index of the above (search.sqlite)", partial(delete_index, f)))
    return owned
