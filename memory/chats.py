"""Every chat under a `$TUSK_HOME`, read from the files alone (no running bot needed).

    for chat in list_chats(home):
        chat.channel, chat.chat_id, chat.messages, chat.memory_bytes, chat.last_active

Used by the admin CLI (`tusk chats`) and the web console; the counts come from the files
as they are on disk, so it works beside a running bot or without one.
"""

from __future__ import annotations

import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from memory.files import history_entries
from memory.paths import CHANNEL_NAME, ChatFiles, chat_id_from_dir, open_private


@dataclass(frozen=True, slots=True)
class ChatSummary:
    channel: str
    chat_id: str
    files: ChatFiles
    messages: int
    memory_bytes: int
    history_entries: int
    last_active: float | None  # newest modification of the chat's files


def count_messages(path: Path) -> int:
    """Messages in a session file: its lines less the meta and pointer records (torn lines count)."""
    try:
        with open(path, "rb") as fh:
            return sum(1 for line in fh if line.strip() and not line.startswith(b'{"record"'))
    except FileNotFoundError:
        return 0


def summarise(channel: str, chat_id: str, files: ChatFiles) -> ChatSummary:
    mtimes = [p.stat().st_mtime for p in (files.session, files.memory, files.history) if p.exists()]
    return ChatSummary(channel, chat_id, files, count_messages(files.session),
                       files.memory.stat().st_size if files.memory.exists() else 0,
                       len(history_entries(files)), max(mtimes, default=None))


def list_chats(home: Path) -> list[ChatSummary]:
    """Every chat folder Tusk made, by channel then id; folders it did not make are skipped."""
    chats = []
    for channel_dir in sorted((Path(home) / "chats").glob("*")):
        if not channel_dir.is_dir() or not CHANNEL_NAME.fullmatch(channel_dir.name):
            continue
        for chat_dir in sorted(p for p in channel_dir.iterdir() if p.is_dir()):
            try:
                chat_id = chat_id_from_dir(chat_dir.name)
                files = ChatFiles.locate(home, channel_dir.name, chat_id)
            except ValueError:
                continue
            if files.dir == chat_dir:
                chats.append(summarise(channel_dir.name, chat_id, files))
    return chats


def export(files: ChatFiles, target: Path) -> list[str]:
    """Write the chat's folder as a .tar.gz at `target` (0600); returns the names it holds (not the
    search index: a cache rebuilt from the other files). Only regular files are taken: a symlink
    inside the folder is skipped, never followed."""
    files.check()
    names = []
    fd = open_private(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as out, tarfile.open(fileobj=out, mode="w:gz") as tar:
        for folder, dirs, names_here in os.walk(files.dir):  # os.walk does not descend into symlinked folders
            dirs.sort()
            for name in sorted(names_here):
                path = Path(folder) / name
                if (not stat.S_ISREG(os.lstat(path).st_mode) or name.endswith(".tmp")
                        or name.startswith("search.sqlite")):
                    continue
                arcname = f"{files.dir.name}/{path.relative_to(files.dir).as_posix()}"
                with os.fdopen(open_private(path, os.O_RDONLY), "rb") as fh:
                    tar.addfile(tar.gettarinfo(arcname=arcname, fileobj=fh), fh)
                names.append(arcname)
    return names
