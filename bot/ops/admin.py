"""The admin CLI's work: chats, their memory, forget and export, straight from the data dir.

Nothing here needs the bot running; it is safe beside a running bot too (files are only
read, a forget deletes whole files, and the running bot notices a deleted session). A
forget runs the same `/forget` as a chat does, so both report the same.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from bot.commands import Commands
from bot.commands.base import CommandContext
from bot.events import ChatKey
from bot.inbox import Inbox
from bot.schedules.store import SavedSchedules
from memory.chats import export
from memory.paths import ChatFiles
from store.base import ChatHandle, ChatStore


def parse_chat(value: str) -> ChatKey:
    """`telegram:-100123` -> ChatKey; raises ValueError with the expected form."""
    channel, sep, chat_id = value.partition(":")
    if not sep or not chat_id:
        raise ValueError(f"{value!r}: give a chat as CHANNEL:ID, e.g. telegram:123456 (see `tusk chats`)")
    return ChatKey(channel, chat_id)


def _ago(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M")


async def chats_table(chats: ChatStore, where: str) -> str:
    rows = [("CHAT", "MESSAGES", "MEMORY", "HISTORY", "LAST ACTIVE (UTC)")]
    for c in await chats.chats():
        rows.append((str(c.key), str(c.messages), f"{c.memory_bytes:,} B", str(c.history_entries),
                     _ago(c.last_active)))
    if len(rows) == 1:
        return f"No chats yet in {where}."
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


async def _existing(chats: ChatStore, key: ChatKey) -> ChatHandle:
    """The chat's handle; LookupError if Tusk keeps nothing for it."""
    handle = chats.handle(key)
    if not await handle.exists():
        raise LookupError(f"no chat {key} (see `tusk chats`)")
    return handle


async def show_memory(chats: ChatStore, key: ChatKey) -> str:
    return (await (await _existing(chats, key)).memory()).text.strip() or "(MEMORY.md is empty)"


async def show_history(chats: ChatStore, key: ChatKey, n: int) -> str:
    entries = (await (await _existing(chats, key)).history())[-n:] if n else []
    return "\n\n".join(e.heading for e in entries) or "(no history entries)"


async def forget(chats: ChatStore, home: Path, key: ChatKey, confirm: bool) -> str:
    """`/forget` (what would go) or `/forget confirm` (delete and report) for this chat."""
    await _existing(chats, key)
    ctx = CommandContext(key, await chats.open(key), chats, model="")
    holders = [SavedSchedules(home), Inbox(home / "inbox.jsonl")]
    return await Commands(holders=holders).run("forget", "confirm" if confirm else "", ctx)


def chat_files(home: Path, key: ChatKey) -> ChatFiles:
    """The chat's folder (the files backend); raises LookupError if Tusk keeps nothing for it."""
    files = ChatFiles.locate(home, key.channel, key.chat_id)
    if not files.dir.exists():
        raise LookupError(f"no chat {key} in {home} (see `tusk chats`)")
    return files


def export_chat(home: Path, key: ChatKey, target: Path | None) -> tuple[Path, list[str]]:
    files = chat_files(home, key)
    target = target or Path(f"tusk-{key.channel}-{files.dir.name}-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz")
    return target, export(files, target)
