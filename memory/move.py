"""A chat's files following it to a new id: Telegram upgrades a group to a supergroup with a new chat id
(`-100...`), and the chat's session, MEMORY.md, HISTORY.md, versions, media and settings go with it.

    move_chat(home, "telegram", "-4001", "-1001234") -> "moved" | "done before" | "nothing" | "kept both"

One `rename` of the chat's folder: atomic, so a crash leaves the files either all under the old id or all
under the new one, never split; moving again finds the old folder gone and does nothing ("done before"),
so the two notices Telegram sends (one in each chat) move it once. If the new id already has files of its
own (someone spoke there before the move was seen), neither folder is touched ("kept both") and the
caller logs it: nothing is merged, overwritten or lost. The session's meta record keeps the id the chat
was created under (the file is append-only); the folder's name says where it lives now.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal

from memory.paths import ChatFiles

logger = logging.getLogger(__name__)

Moved = Literal["moved", "done before", "nothing", "kept both"]


def move_chat(home: Path, channel: str, old_id: str, new_id: str) -> Moved:
    """Move the chat folder of `old_id` to `new_id`'s place, in one rename (see the module's docstring)."""
    old, new = ChatFiles.locate(home, channel, old_id), ChatFiles.locate(home, channel, new_id)
    if not old.dir.exists():
        return "done before" if new.dir.exists() else "nothing"
    if new.dir.exists() and any(new.dir.iterdir()):
        return "kept both"
    old.check()
    os.replace(old.dir, new.dir)  # an empty folder at the new place is replaced; no symlink is followed
    fd = os.open(new.dir.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself is on disk before anyone is told
    finally:
        os.close(fd)
    return "moved"
