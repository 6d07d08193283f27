"""Where a chat's files live: `$TUSK_HOME/chats/<channel>/<chat-dir>/`.

`<chat-dir>` is the chat id itself when it is a plain name (`SAFE_ID`), otherwise `~`
followed by the unpadded base64url of its UTF-8 bytes. A plain name never starts with
`~`, and base64url is reversible, so two ids never share a folder; neither form can
contain `/`, NUL or be `.`/`..`, so no id reaches outside its channel folder.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from pathlib import Path

SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")
CHANNEL_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
MAX_ID_BYTES = 180  # base64 of 180 bytes is 240 characters: within every filesystem's 255


def chat_dir_name(chat_id: str) -> str:
    if SAFE_ID.fullmatch(chat_id):
        return chat_id
    raw = chat_id.encode("utf-8", "surrogatepass")
    if not raw or len(raw) > MAX_ID_BYTES:
        raise ValueError(f"chat id must be 1 to {MAX_ID_BYTES} bytes long, got {len(raw)}")
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
        return cls(Path(home) / "chats" / channel / chat_dir_name(chat_id))

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
    def versions(self) -> Path:
        return self.dir / "versions"

    @property
    def settings(self) -> Path:
        return self.dir / "settings.json"

    @property
    def search_index(self) -> Path:
        """search_history's index (a cache of HISTORY.md and session.jsonl: memory/search_index.py)."""
        return self.dir / "search.sqlite"
