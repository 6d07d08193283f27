"""The shared documents (store/shared.py) as files under $TUSK_HOME: read again only when changed (inode,
mtime, size), replaced atomically (0600), their writers serialised by `flock` on `<name>.lock`, so the CLI and
a running Tusk never lose each other's change."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from memory.files import read_text, write_atomic
from store.shared import NAMES, Box


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class FileDoc:
    def __init__(self, home: Path, name: str) -> None:
        if name not in NAMES:
            raise ValueError(f"{name!r} is not a shared document")
        self.name, self.path = name, Path(home) / name
        self.where = str(self.path)
        self._cached: tuple[tuple[int, int, int] | None, str | None] = (None, None)

    def read(self) -> str | None:
        stamp = _stamp(self.path)
        if stamp is None:
            return None
        if self._cached[0] == stamp:
            return self._cached[1]
        try:
            text = read_text(self.path)
        except FileNotFoundError:
            return None
        self._cached = (stamp, text)
        return text

    @contextlib.contextmanager
    def updating(self) -> Iterator[Box]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                box = Box(read_text(self.path))
            except FileNotFoundError:
                box = Box(None)
            before = box.text
            yield box
            if box.text != before:
                if box.text is None:
                    self.path.unlink(missing_ok=True)
                else:
                    write_atomic(self.path, box.text, follow_dir=True)  # $TUSK_HOME itself may be a link
                self._cached = (None, None)
        finally:
            os.close(fd)  # releases the lock
