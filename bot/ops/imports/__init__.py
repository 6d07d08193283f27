"""`tusk import SOURCE`: a chat history from elsewhere into Tusk's chats, one module per format.

Each format module has `detect(path) -> bool` and `read(path) -> Iterator[Imported]`, a stream of
messages parsed at the edge (streaming JSON: memory stays bounded whatever the file's size). The
source is read twice: once whole, writing nothing, so a truncated, too deep or hostile file is refused
before anything lands (and the counts for the estimate are known), then again to write
(bot/ops/imports/writer.py). Tusk must not run on the home meanwhile: its cached sessions would not
see the new lines.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from bot import running
from bot.ops.imports.model import Imported, ImportRefused
from bot.ops.imports.record import Records


class ImportStopped(RuntimeError):
    """The messages are written but folding them into memory stopped (the model failed, a spend limit):
    the same command goes on from there."""


__all__ = ["Imported", "ImportRefused", "ImportStopped", "run_import"]

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
                        "zip, a DiscordChatExporter JSON file, nanobot's workspace, a `tusk export` archive); "
                        "name it with --format")


def _target(msg: Imported, to) -> tuple[str, str]:
    if to is not None:
        return to.channel, to.chat_id
    if msg.chat is not None and msg.chat[0] in TUSK_CHANNELS:
        return msg.chat
    where = f"the source's chat {':'.join(msg.chat)!r} is not a Tusk channel's" if msg.chat else \
        "the source does not name a Telegram, Discord or Slack chat"
    raise ImportRefused(f"{where}: choose the chat with --to CHANNEL:ID")


async def _memory(chats, key: tuple[str, str], texts: dict[str, str]) -> list[str]:
    """A moved chat's MEMORY.md and HISTORY.md, where the target has none of its own; what was taken."""
    from memory.files import history_blocks
    from memory.keys import ChatKey
    from store.files.chats import FileChats

    if isinstance(chats, FileChats):  # the files as the archive holds them, byte for byte
        return list(_memory_files(chats.home, key, texts))
    handle, took = chats.handle(ChatKey(*key)), []
    if texts.get("MEMORY.md") and not (await handle.memory()).text:
        await handle.write_memory(texts["MEMORY.md"])
        took.append("MEMORY.md taken from the archive")
    if texts.get("HISTORY.md") and not await handle.history():
        from store.postgres.rows import block_entry  # a dated block as its entry (None: text before the first)

        entries = [e for e in map(block_entry, history_blocks(texts["HISTORY.md"])) if e is not None]
        await handle.replace_history(entries)
        took.append("HISTORY.md taken from the archive")
    return took


def _memory_files(home: Path, key: tuple[str, str], texts: dict[str, str]) -> Iterator[str]:
    from memory.files import write_atomic
    from memory.paths import ChatFiles

    files = ChatFiles.locate(home, *key)
    for name, path in (("MEMORY.md", files.memory), ("HISTORY.md", files.history)):
        if texts.get(name) and not path.exists():
            write_atomic(path, texts[name])
            yield f"{name} taken from the archive"


async def run_import(settings, source: Path, fmt: str | None, to, yes: bool, say: Callable[[str], None],
                     ask: Callable[[str], bool] | None = None) -> None:
    """Check the whole source and show what it would add and cost, then (with `yes`) write it and fold it
    into memory (bot/ops/imports/fold.py); `say` prints a line. A source with skills (a nanobot workspace's
    skills/) has them brought into $TUSK_HOME/skills (bot/skills/importer.py); `ask` asks before one is
    replaced (None: never replaced)."""
    from bot.ops.imports.fold import Folder, stopped
    from memory.consolidate import ConsolidationFailed
    from store import opened

    if not source.exists():
        raise ImportRefused(f"{source} does not exist")
    home = settings.home
    fmt = fmt or detect(source)
    module = _module(fmt)
    async with opened(home, settings.store_url()) as store:  # pass 1: everything parsed, nothing written
        counts, new, done = await _survey(Records.of(store), module.read(source), to)
    if hasattr(module, "skills_folder") and (skills := module.skills_folder(source)) is not None:
        from bot.skills.importer import bring

        bring(skills, home, yes, ask, say)
    if not counts:
        say(f"{source}: no messages to import")
        return
    for key, n in sorted(counts.items()):
        there = n - new[key][0]
        say(f"{fmt}: {n:,} messages for {':'.join(key)}" + (f" ({there:,} already there)" if there else ""))
    if done:
        say("Nothing to do: every message is there already and folded into memory")
        return
    folder = Folder(settings)
    try:
        await folder.ready()
        say((await folder.estimate({k: (v[0], v[1]) for k, v in new.items()})).line())
        if not yes:
            say("Nothing written: add --yes to import them and fold them into memory "
                "(messages already imported are skipped)")
            return
        lock = running.exclusive(home)
        if lock is None:
            raise ImportRefused(f"a Tusk is running on {home}: stop it, import, start it again")
        try:
            await _write(folder, module, source, to, counts, say)
        except ConsolidationFailed as exc:
            say(stopped(exc))
            raise ImportStopped(str(exc)) from exc
        finally:
            running.release(lock)
    finally:
        await folder.aclose()


async def _survey(records: Records, messages: Iterator[Imported], to
                  ) -> tuple[Counter[tuple[str, str]], dict[tuple[str, str], list[int]], bool]:
    """Every message of the source read: (messages per chat, per chat [those not there yet, their transcript
    lines' tokens], whether there is nothing to do: every message there and folded)."""
    from bot.ops.imports.writer import message
    from memory.round_request import line_costs

    counts: Counter[tuple[str, str]] = Counter()
    new: dict[tuple[str, str], list[int]] = {}
    try:
        for batch in _batched(messages, 500):
            by_chat: dict[tuple[str, str], list[Imported]] = {}
            for msg in batch:
                by_chat.setdefault(_target(msg, to), []).append(msg)
            for key, msgs in by_chat.items():
                counts[key] += len(msgs)
                tally = new.setdefault(key, [0, 0])
                there = await records.known(key, [m.source_id for m in msgs])
                for msg in (m for m in msgs if m.source_id not in there):
                    tally[0], tally[1] = tally[0] + 1, tally[1] + line_costs([message(msg)], math.inf)[0]
        done = True
        for key in counts:
            done = done and new[key][0] == 0 and await records.folded(key)
    finally:
        records.close()
    return counts, new, done


def _batched(items: Iterator[Imported], n: int) -> Iterator[list[Imported]]:
    batch: list[Imported] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


async def _write(folder, module, source: Path, to, counts: Counter[tuple[str, str]], say) -> None:
    """Pass 2: the messages written in batches, each chat folded as it grows and once it is complete. A moved
    chat's memory is taken first, so the messages it already holds are not summarised twice."""
    from bot.ops.imports.writer import Writer

    took: set[tuple[str, str]] = set()
    if hasattr(module, "memory_files") and len(counts) == 1:
        key = next(iter(counts))
        for line in await _memory(folder.chats, key, module.memory_files(source)):
            if line.startswith("MEMORY.md"):
                took.add(key)
            say(line)
    writer = Writer(folder.chats, Records.of(folder.app.store))
    try:
        with folder.progress(sum(counts.values())) as advance:
            left = Counter(counts)
            for msg in module.read(source):
                key = _target(msg, to)
                flushed = await writer.add(key, msg, settle=key in took)
                advance()
                left[key] -= 1
                if left[key] == 0:  # the chat is complete (an all-chats export goes chat by chat): all of it
                    await writer.flush(key)
                    await folder.fold(key, last=True)
                    await writer.close(key, folded=True)
                elif flushed:
                    await folder.fold(key)
            await writer.finish()
    finally:
        writer.abandon()
    added, skipped = writer.added, writer.skipped
    say(f"Imported {sum(added.values()):,} messages ({skipped:,} already there) into {len(counts)} chat(s); "
        f"{folder.folded:,} messages folded into HISTORY.md and MEMORY.md")
