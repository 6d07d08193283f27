"""The admin CLI's work: chats, their memory, forget and export, straight from the data dir.

Nothing here needs the bot running; it is safe beside a running bot too (files are only
read, a forget deletes whole files, and the running bot notices a deleted session). A
forget runs the same `/forget` as a chat does, so both report the same.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from bot import stores
from bot.commands import Commands
from bot.commands.base import CommandContext
from bot.config import Settings
from bot.events import ChatKey
from bot.inbox import Inbox
from bot.schedules.store import SavedSchedules
from memory.chats import export
from memory.paths import ChatFiles
from store import Store, opened
from store.base import ChatHandle, ChatStore

T = TypeVar("T")


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


async def forget(chats: ChatStore, home: Path, key: ChatKey, confirm: bool, store: Store | None = None) -> str:
    """`/forget` (what would go) or `/forget confirm` (delete and report) for this chat; the schedules and the
    inbox journal of `store` (the database's rows), else those of the files under `home`."""
    await _existing(chats, key)
    ctx = CommandContext(key, await chats.open(key), chats, model="")
    if store is not None and store.kind == "postgres":
        holders = [stores.saved_schedules(store), stores.inbox(store)]
    else:
        holders = [SavedSchedules(home), Inbox(home / "inbox.jsonl")]
    return await Commands(holders=holders).run("forget", "confirm" if confirm else "", ctx)


async def export_chat(store: Store, key: ChatKey, target: Path | None) -> tuple[Path, list[str]]:
    """The chat's files in a .tar.gz (memory/chats.py: what `tusk import` reads back); from the database, its
    rows as those files first (store/postgres/transfer.py)."""
    await _existing(store.chats, key)
    if store.kind == "files":
        files = ChatFiles.locate(store.home, key.channel, key.chat_id)
        return _export(files, key, target)
    from store.postgres.transfer import write_folder

    with tempfile.TemporaryDirectory(prefix="tusk-export-") as scratch:
        files = ChatFiles.locate(Path(scratch), key.channel, key.chat_id)
        await write_folder(store.db, key, files.dir)
        return _export(files, key, target)


def _export(files: ChatFiles, key: ChatKey, target: Path | None) -> tuple[Path, list[str]]:
    target = target or Path(f"tusk-{key.channel}-{files.dir.name}-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz")
    return target, export(files, target)


def on_store(settings: Settings, work: Callable[[Store], Awaitable[T]]) -> T:
    """`work` run on the settings' store (files, or the database), opened for it and closed after."""
    async def run() -> T:
        async with opened(settings.home, settings.store_url()) as store:
            return await work(store)

    return asyncio.run(run())


# -- the commands: `tusk chats`, `tusk memory`, `tusk export`, `tusk forget` (called by bot/ops/cli.py) --------

def chats_command(args: argparse.Namespace, settings: Settings) -> int:  # noqa: ARG001  (the handler signature)
    where = str(settings.home) if settings.store_url() is None else "the database"
    print(on_store(settings, lambda store: chats_table(store.chats, where)))
    return 0


def memory_command(args: argparse.Namespace, settings: Settings) -> int:
    print(on_store(settings, lambda store: show_memory(store.chats, args.chat) if args.what == "show"
                   else show_history(store.chats, args.chat, args.n)))
    return 0


def export_command(args: argparse.Namespace, settings: Settings) -> int:
    target, names = on_store(settings, lambda store: export_chat(store, args.chat, args.output))
    print(f"Wrote {target} ({len(names)} files)")
    return 0
