"""Where a chat's files live: `$TUSK_HOME/chats/<channel>/<chat-dir>/`.

`<chat-dir>` is the chat id itself when it is a plain name (`SAFE_ID`), otherwise `~`
followed by the unpadded base64url of its UTF-8 bytes. A plain name never starts with
`~`, and base64url is reversible, so two ids never share a folder; neither form can
contain `/`, NUL or be `.`/`..`, so no id reaches outside its channel folder.

Every folder and file made here is owner-only (0700/0600) whatever the umask, and none is
reached through a symlink: the folders from `chats/` down are checked with `lstat`, files
are opened with `O_NOFOLLOW`. A symlink there raises `UnsafePathError`.
"""

from __future__ import annotations

import base64
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from memory.keys import CHANNEL_NAME, check_chat_id

SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")


class UnsafePathError(ValueError):
    """A chat folder or file is a symlink (or not what Tusk made): it is never followed."""


def private_dir(path: Path, follow: bool = False) -> Path:
    """Make `path` a folder (missing parents too) that only its owner can enter, whatever the umask.
    Refuses a symlink at `path` unless `follow` (the data dir itself may be a link the operator made)."""
    missing = []
    here = Path(path)
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue
        os.chmod(folder, 0o700, follow_symlinks=False)
    info = os.stat(path) if follow else os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError(f"{path} is a symlink or not a folder: Tusk never follows links in its data dir; "
                              "move it away and let Tusk make a real folder")
    return Path(path)


def open_private(path: Path, flags: int) -> int:
    """os.open a file Tusk owns: never through a symlink, created 0600 whatever the umask."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafePathError(f"{path} is a symlink: Tusk never follows links in its data dir") from exc
        raise


def chat_dir_name(chat_id: str) -> str:
    if SAFE_ID.fullmatch(chat_id):
        return chat_id
    raw = check_chat_id(chat_id)
    return "~" + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def chat_id_from_dir(name: str) -> str:
    """The chat id a folder name stands for (the inverse of `chat_dir_name`)."""
    if not name.startswith("~"):
        return name
    encoded = name[1:]
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class ChatFiles:
    """The files of one chat. Nothing is created until something is written."""

    dir: Path

    @classmethod
    def locate(cls, home: Path, channel: str, chat_id: str) -> ChatFiles:
        if not CHANNEL_NAME.fullmatch(channel):
            raise ValueError(f"bad channel name {channel!r}")
        files = cls(Path(home) / "chats" / channel / chat_dir_name(chat_id))
        files.check()
        return files

    def check(self) -> None:
        """Raise UnsafePathError if `chats/`, the channel folder or the chat folder is a symlink or a file."""
        for folder in (self.dir.parent.parent, self.dir.parent, self.dir):
            try:
                info = os.lstat(folder)
            except FileNotFoundError:
                return
            if not stat.S_ISDIR(info.st_mode):
                raise UnsafePathError(f"{folder} is a symlink or not a folder: Tusk never follows links in its "
                                      "data dir; remove it (the chat's data is not there)")

    def ensure(self) -> Path:
        """Create the chat's folder (and `chats/`, the channel folder) owner-only; returns it."""
        self.check()
        return private_dir(self.dir)

    @property
    def session(self) -> Path:
        return self.dir / "session.jsonl"

    @property
    def memory(self) -> Path:
        return self.dir / "MEMORY.md"

    @property
    def history(self) -> Path:
        return self.dir / "HISTORY.md"

    @property
    def persona(self) -> Path:
        """This chat's persona, set with /persona (memory/persona.py)."""
        return self.dir / "PERSONA.md"

    @property
    def versions(self) -> Path:
        return self.dir / "versions"

    @property
    def settings(self) -> Path:
        return self.dir / "settings.json"

    @property
    def input_history(self) -> Path:
        """What was typed at `tusk chat` for this chat, for the Up key (channels/terminal/prompt.py)."""
        return self.dir / "input-history"

    @property
    def media(self) -> Path:
        """Files that came with messages (memory/media.py)."""
        return self.dir / "media"

    @property
    def documents(self) -> Path:
        """The text read from documents and web pages, kept for search_history (memory/documents.py)."""
        return self.dir / "documents"

    @property
    def search_index(self) -> Path:
        """search_history's index (a cache of HISTORY.md and session.jsonl: memory/search_index.py)."""
        return self.dir / "search.sqlite"
