"""`tusk import SOURCE`: a chat history from elsewhere into Tusk's chats, one module per format.

Each format module has `detect(path) -> bool` and `read(path) -> Iterator[Imported]`, a stream of
messages parsed at the edge (streaming JSON: memory stays bounded whatever the file's size). The
source is read twice: once whole, writing nothing, so a truncated, too deep or hostile file is refused
before anything lands (and the counts for the estimate are known), then again to write
(bot/ops/imports/writer.py). Tusk must not run on the home meanwhile: its cached sessions would not
see the new lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from bot import running
from bot.ops.imports.model import Imported, ImportRefused

__all__ = ["Imported", "ImportRefused", "run_import"]

TUSK_CHANNELS = frozenset({"telegram", "discord", "slack", "http", "terminal"})


def _module(name: str):
    from bot.ops.imports import discord, nanobot, slack, telegram, tusk_export

    return {"telegram": telegram, "slack": slack, "discord": discord, "nanobot": nanobot,
            "tusk": tusk_export}[name]


def detect(source: Path) -> str:
    for name in ("nanobot", "telegram", "slack", "discord", "tusk"):
        if _module(name).detect(source):
            return name
    raise ImportRefused(f"{source}: not a format Tusk imports (a Telegram Desktop result.json, a Slack export "
                        "zip, a DiscordChatExporter JSON file, nanobot's workspace, a `tusk export` archive); name it with --format")


def _target(msg: Imported, to) -> tuple[str, str]:
    if to is not None:
        return to.channel, to.chat_id
    if msg.chat is not None and msg.chat[0] in TUSK_CHANNELS:
        return msg.chat
    raise ImportRefused(f"the source's chat {msg.chat and ':'.join(msg.chat)!r} is not a Tusk channel's: "
                        "choose the chat with --to CHANNEL:ID")


def _memory(home: Path, key: tuple[str, str], texts: dict[str, str]) -> Iterator[str]:
    """A moved chat's MEMORY.md and HISTORY.md, where the target has none of its own."""
    from memory.files import write_atomic
    from memory.paths import ChatFiles

    files = ChatFiles.locate(home, *key)
    for name, path in (("MEMORY.md", files.memory), ("HISTORY.md", files.history)):
        if texts.get(name) and not path.exists():
            write_atomic(path, texts[name])
            yield f"{name} taken from the archive"


def run_import(home: Path, source: Path, fmt: str | None, to, yes: bool) -> Iterator[str]:
    """Check the whole source, show what it would add, then (with `yes`) write it; yields lines to print."""
    from bot.ops.imports.writer import Writer

    if not source.exists():
        raise ImportRefused(f"{source} does not exist")
    fmt = fmt or detect(source)
    module = _module(fmt)
    counts: Counter[tuple[str, str]] = Counter()
    for msg in module.read(source):  # pass 1: everything parsed, nothing written
        counts[_target(msg, to)] += 1
    if not counts:
        yield f"{source}: no messages to import"
        return
    for (channel, chat_id), n in sorted(counts.items()):
        yield f"{fmt}: {n:,} messages for {channel}:{chat_id}"
    if not yes:
        yield "Nothing written: add --yes to import them (messages already imported are skipped)"
        return
    lock = running.exclusive(home)
    if lock is None:
        raise ImportRefused(f"a Tusk is running on {home}: stop it, import, start it again")
    try:
        with Writer(home) as writer:
            for msg in module.read(source):
                writer.add(_target(msg, to), msg)
        added, skipped = writer.added, writer.skipped
        if hasattr(module, "memory_files") and len(counts) == 1:
            yield from _memory(home, next(iter(counts)), module.memory_files(source))
    finally:
        running.release(lock)
    yield (f"Imported {sum(added.values()):,} messages ({skipped:,} already there) into "
           f"{len(added)} chat(s); Tusk's consolidation folds them into HISTORY.md and MEMORY.md as it runs")
