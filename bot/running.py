"""Whether a Tusk is running on a data dir: `tusk run` and `tusk chat` hold a shared `flock` on
`$TUSK_HOME/tusk.lock` while they are up (the kernel drops it when the process dies, even by
`kill -9`); `tusk restore` asks for it exclusively and refuses when it cannot have it."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from memory.paths import open_private, private_dir

LOCK_NAME = "tusk.lock"


def hold(home: Path) -> int:
    """Take the shared lock (several Tusks may share a home); returns the fd, closed by the caller."""
    private_dir(Path(home), follow=True)
    fd = open_private(Path(home) / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def release(fd: int | None) -> None:
    """Drop the lock; closing the only descriptor drops the flock. None (already released) is a no-op."""
    if fd is not None:
        os.close(fd)


def exclusive(home: Path) -> int | None:
    """The lock taken exclusively (no Tusk can start meanwhile), or None when a Tusk holds it."""
    private_dir(Path(home), follow=True)
    fd = open_private(Path(home) / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
