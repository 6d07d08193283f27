"""Every chat under a `$TUSK_HOME`, read from the files alone (no running bot needed).

    for chat in list_chats(home):
        chat.channel, chat.chat_id, chat.messages, chat.memory_bytes, chat.last_active

Used by the admin CLI (`tusk chats`) and the web console; the counts come from the files
as they are on disk, so it works beside a running bot or without one.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

from memory.files import history_entries
from memory.paths import CHANNEL_NAME, ChatFiles, chat_id_from_dir


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
    """Write the chat's folder as a .tar.gz at `target`; returns the names it holds (not the
    search index: a cache rebuilt from the other files)."""
    names = []
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(files.dir.rglob("*")):
            if path.is_file() and not path.name.endswith(".tmp") and not path.name.startswith("search.sqlite"):
                name = f"{files.dir.name}/{path.relative_to(files.dir).as_posix()}"
                tar.add(path, arcname=name, recursive=False)
                names.append(name)
    return names
