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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from bot.commands.base import ADMINS_ONLY, Command, CommandContext, Holder, counted, delete_each
from bot.commands.memory_why import memory_subcommand
from bot.commands.persona import persona_command
from memory import chat_settings, persona, tombstones
from memory.documents import kept
from memory.media import size_text
from memory.tokens import count_text
from store.base import FORGOTTEN, PERSONA, PROVENANCE, SETTINGS
from store.errors import StoreError

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
        kept_here = await _inventory(ctx)
        items = [item for holder in self.holders for item in holder.owned(ctx.key)]
        if not kept_here and all(item.quiet for item in items):
            return "I keep nothing about this chat: there is nothing to forget."
        if args.strip().lower() != "confirm":
            labels = [*kept_here, *(i.label for i in items)]
            return ("This would delete:\n" + "\n".join(f"- {label}" for label in labels)
                    + "\n\nSend /forget confirm to delete it all.")
        if ctx.consolidator is not None:
            ctx.consolidator.stats.pop(ctx.key, None)
        try:  # all of it at once; a consolidation still running for this chat then discards its result
            await ctx.chats.erase(ctx.key)
            report = [f"- deleted {label}" for label in kept_here]
        except (OSError, StoreError) as exc:
            report = [f"- FAILED to delete what this chat keeps: {getattr(exc, 'strerror', None) or exc}"]
        report += await delete_each(items, "deleted")
        return "Forgotten:\n" + "\n".join(report)

    async def _timezone(self, ctx: CommandContext, args: str) -> str:
        current = ctx.prefs
        name = args.strip()
        if not name:
            zone = chat_settings.zone(current.timezone or self.default_timezone)
            how = "set with /timezone" if current.timezone else "the default"
            return (f"This chat's time zone is {zone.key} ({how}); it is {datetime.now(zone):%H:%M} there.\n"
                    "Change it with /timezone Area/City, e.g. /timezone America/New_York; "
                    "/timezone reset goes back to the default.")
        if name.lower() in ("reset", "default"):
            if current.timezone is not None:
                await ctx.chats.put_settings(ctx.chat, replace(current, timezone=None))
            return f"This chat uses the default time zone again: {self.default_timezone}."
        try:
            zone = chat_settings.zone(name)
        except ValueError as exc:
            return f"{exc}."
        await ctx.chats.put_settings(ctx.chat, replace(current, timezone=zone.key))
        return (f"This chat's time zone is now {zone.key}; it is {datetime.now(zone):%H:%M} there. "
                "Reminders and the times I am given use it.")


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if ts else "never"


async def _status(ctx: CommandContext, args: str) -> str:
    s, c = ctx.session, ctx.consolidator
    memory = ctx.chat.memory.text
    lines = [f"Model: {ctx.model}",
             f"Messages in this chat: {s.total} ({len(s.unconsolidated)} not yet consolidated)",
             f"Memory (MEMORY.md): {count_text(memory):,} tokens"]
    if c is not None:
        stats = c.stats.get(ctx.key)
        lines[1:1] = [f"Prompt: ~{ctx.fixed_tokens + s.tokens:,} of {c.budget.limit:,} tokens "
                      f"(window {c.budget.window:,}{f' from {c.budget.source}' if c.budget.source else ''}, "
                      f"{c.budget.reserve:,} kept for the reply)"]
        lines.append(f"Consolidations since start: {stats.runs if stats else 0}, "
                     f"~{stats.tokens_sent if stats else 0:,} tokens sent")
        if stats and stats.last_error:
            lines.append(f"Last consolidation problem: {stats.last_error}")
    listen = ctx.prefs.listen
    if ctx.is_group or listen:
        lines.append(LISTEN_STATUS[listen])
    return "\n".join([*lines, *ctx.model_notes, *ctx.tool_status])


LISTEN_STATUS = {True: "Listening: on (messages here not meant for me are kept as context; /listen off stops it)",
                 False: "Listening: off (only messages meant for me are kept; /listen on keeps all as context)"}


async def _listen(ctx: CommandContext, args: str) -> str:
    """/listen on|off: whether a group's messages not addressed to the bot are saved as context."""
    current = ctx.prefs
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
        await ctx.chats.put_settings(ctx.chat, replace(current, listen=word == "on"))
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
        await ctx.consolidator.run(ctx.chat, lambda: 0, force=True)
    left = len(s.unconsolidated)
    await ctx.chats.set_pointer(ctx.chat, s.total)
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
        entries = (await ctx.handle.history())[-n:] if n else []
        return "\n\n".join(e.heading for e in entries) if entries else "No history entries yet."
    if words[:1] == ["undo"]:
        if not ctx.may_erase:
            return ADMINS_ONLY.format(what="undo a memory change")
        if await ctx.handle.restore_previous():
            ctx.chat.memory = await ctx.handle.memory()
            return "Restored the previous version of MEMORY.md:\n\n" + (ctx.chat.memory.text or "(empty)")
        return "There is no earlier version of MEMORY.md to restore."
    memory = ctx.chat.memory.text.strip()
    entries = await ctx.handle.history()
    last = ctx.consolidator.stats.get(ctx.key) if ctx.consolidator else None
    cap = f" of {ctx.consolidator.max_memory_tokens:,}" if ctx.consolidator else ""
    head = (f"MEMORY.md: {count_text(memory):,}{cap} tokens; "
            f"{counted(len(entries), 'history entry', 'history entries')}; "
            f"last consolidation: {_when(last.last_run) if last else 'not since start'}")
    if media := await ctx.handle.media():
        head += f"\nFiles: {counted(len(media), 'file')}, {size_text(sum(m.size for m in media))}"
    if not memory:
        return "I don't remember anything about this chat yet. Facts are saved as the conversation grows.\n" + head
    return f"{memory}\n\n{head}"


def _settings_held(settings: chat_settings.ChatSettings) -> str:
    """What a chat's settings.json sets, for /forget: `: time zone Europe/Paris, model fast` ('' for nothing)."""
    held = [f"time zone {settings.timezone}" if settings.timezone else "",
            f"model {settings.model}" if settings.model else "", "listens to every message" if settings.listen else ""]
    return ": " + ", ".join(h for h in held if h) if any(held) else ""


async def _inventory(ctx: CommandContext) -> list[str]:
    """What the chat itself keeps, a line each (erased together by `/forget confirm`)."""
    h = ctx.handle
    memory, history, versions = ctx.chat.memory.text, await h.history(), await h.versions()
    media, documents = await h.media(), await kept(h)
    docs = {name: await h.doc(name) for name in (PERSONA, SETTINGS, PROVENANCE, FORGOTTEN)}
    found = [(memory, f"MEMORY.md ({len(memory.encode()):,} bytes)"),
             (docs[PERSONA], "this chat's persona (PERSONA.md)"),
             (history, f"{counted(len(history), 'history entry', 'history entries')} (HISTORY.md)"),
             (ctx.session.total, f"{counted(ctx.session.total, 'session message')} (session.jsonl)"),
             (versions, counted(len(versions), "earlier memory version")),
             (docs[SETTINGS], f"chat settings (settings.json{_settings_held(ctx.prefs)})"),
             (media, f"{counted(len(media), 'received file')} ({size_text(sum(m.size for m in media))} in media/)"),
             (documents, f"the text of {counted(len(documents), 'document or web page', 'documents and web pages')} "
                         "kept for search (documents/)"),
             (docs[PROVENANCE], "where each remembered fact came from (provenance.json)"),
             (docs[FORGOTTEN], f"{counted(len(tombstones.parse(docs[FORGOTTEN])), 'forgotten fact')} kept out "
                               "(forgotten.json)")]
    return [label for held, label in found if held] + await h.caches()
