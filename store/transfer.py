"""Everything a store keeps, as the files of a home: what `tusk backup` archives from either backend and what
`tusk restore` puts back into either (bot/ops/backup.py, restore.py). The files backend's home *is* that form;
the database is read out into it (`dump`) and filled from it (`load`), so an archive is the same whichever
store made it and a home moves onto PostgreSQL, or back, by a backup and a restore.

    stored(rel)          a home's file the store keeps (chats/..., the shared documents, ...): on PostgreSQL
                         these live in the database, the rest of the home (console token, .env) stays a file
    await dump(store, d) the database's part written under d as a files home would hold it
    await load(store, h) the stored files under home h into the database (each chat replaced whole)
    await empty(store)   every chat and shared document deleted (a forced restore)
"""

from __future__ import annotations

import os
from pathlib import Path

from memory.paths import CHANNEL_NAME, chat_id_from_dir, open_private, private_dir
from memory.keys import ChatKey
from store.shared import NAMES

SHARED = frozenset(NAMES) - {"backup-status.json"}  # the backup's own status stays with the process that made it


def stored(rel: str) -> bool:
    """Whether a home's file (by its path inside the home) is kept by the store rather than by the process."""
    return rel.startswith("chats/") or rel in SHARED


def chat_folders(home: Path) -> list[tuple[ChatKey, Path]]:
    """The chat folders of a files home, with their keys."""
    found = []
    chats = Path(home) / "chats"
    for channel in sorted(chats.iterdir()) if chats.is_dir() else []:
        if not channel.is_dir() or channel.is_symlink() or not CHANNEL_NAME.fullmatch(channel.name):
            continue
        for folder in sorted(channel.iterdir()):
            if folder.is_dir() and not folder.is_symlink():
                found.append((ChatKey(channel.name, chat_id_from_dir(folder.name)), folder))
    return found


async def dump(store, into: Path) -> int:
    """Write what the database keeps under `into` as a files home holds it; the number of chats (0 on files,
    whose home is already that)."""
    if store.kind == "files":
        return 0
    from store.postgres.transfer import write_folder
    from memory.paths import ChatFiles

    for name in sorted(SHARED):
        text = store.doc(name).read()
        if text is not None:
            _write(Path(into) / name, text.encode())
    n = 0
    for info in await store.chats.chats():
        folder = ChatFiles.locate(into, info.key.channel, info.key.chat_id).dir
        n += await write_folder(store.db, info.key, folder)
    return n


async def load(store, home: Path) -> int:
    """Put the stored files under `home` into the database (a chat there is replaced whole); the number of
    chats. Nothing to do on files."""
    if store.kind == "files":
        return 0
    from store.postgres.transfer import read_folder
    from store.shared import write

    for name in sorted(SHARED):
        path = Path(home) / name
        if path.is_file():
            write(store.doc(name), path.read_text(encoding="utf-8"))
    folders = chat_folders(home)
    for key, folder in folders:
        await read_folder(store.db, key, folder)
    return len(folders)


async def empty(store) -> int:
    """Every chat and shared document the database keeps, deleted (a forced restore replaces them); chats."""
    if store.kind == "files":
        return 0
    from store.shared import write

    infos = await store.chats.chats()
    for info in infos:
        await store.chats.erase(info.key)
    for name in sorted(SHARED):
        if store.doc(name).read() is not None:
            write(store.doc(name), None)
    return len(infos)


async def holds_anything(store) -> bool:
    """Whether the database keeps any chat or shared document (a restore then needs --force)."""
    if store.kind == "files":
        return False
    return bool(await store.chats.chats()) or any(store.doc(name).read() is not None for name in SHARED)


def _write(path: Path, data: bytes) -> None:
    private_dir(path.parent, follow=True)
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as fh:
        fh.write(data)
