"""Following an append-only file (HISTORY.md, session.jsonl) by what was added since the last read.

    tail = Tail(path, ino, offset, mark)   # where the last read stopped (kept by its reader between runs)
    data, reset = tail.read()              # the complete lines added since; reset: read again from the start

A file that shrank, was replaced (another inode) or changed before the last read's end (its last
`MARK` bytes differ) counts as new: it is read again whole, and `reset` says so. A line still being
written (no newline yet) is left for the next read. Never read through a symlink.
"""

from __future__ import annotations

import os
from pathlib import Path

from memory.paths import open_private

MARK = 64  # the bytes before the last read's end that must be unchanged for the file to count as appended to


class Tail:
    """Where the last read of an append-only file stopped, and the bytes just before it."""

    def __init__(self, path: Path, ino: int | None = None, offset: int = 0, mark: bytes = b"") -> None:
        self.path, self.ino, self.offset, self.mark = path, ino, offset, mark

    def read(self) -> tuple[bytes, bool]:
        """(the complete lines added since the last read, reset). `reset` is true when the file is
        new to us, gone or rewritten: the bytes are then all of it (none if it is gone)."""
        try:
            fh = os.fdopen(open_private(self.path, os.O_RDONLY), "rb")  # never through a symlink
        except FileNotFoundError:
            reset = self.ino is not None
            self.ino, self.offset, self.mark = None, 0, b""
            return b"", reset
        with fh:
            st = os.fstat(fh.fileno())
            fh.seek(max(0, self.offset - len(self.mark)))
            appended = st.st_ino == self.ino and st.st_size >= self.offset and fh.read(len(self.mark)) == self.mark
            if not appended:
                self.offset, self.mark = 0, b""
            fh.seek(self.offset)
            data = fh.read()
        data = data[:data.rfind(b"\n") + 1]  # a line still being written is left for the next read
        self.ino, self.offset = st.st_ino, self.offset + len(data)
        if data:
            self.mark = (self.mark + data)[-MARK:]
        return data, not appended

    def state(self, name: str) -> list[tuple[str, object]]:
        """Where it stopped, as (key, value) rows named after `name`, for its reader to keep."""
        return [(f"{name}.ino", self.ino), (f"{name}.offset", self.offset), (f"{name}.mark", self.mark)]
