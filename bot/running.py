"""One Tusk per home. `tusk run` and `tusk chat` hold `$TUSK_HOME/tusk.lock` exclusively (`flock`: the kernel
drops it when the process ends, even by `kill -9`) and write into it who holds it:

    {"pid": 1234, "command": "tusk run", "home": "/srv/tusk", "url": "http://127.0.0.1:8765", "since": "..."}

A second start is refused at once with one line naming the holder (`HomeBusy`):

    tusk: a Tusk is already running on this home (pid 1234, http://127.0.0.1:8765): stop it first

The flock decides and the record only describes: a record left by a dead process blocks nothing and is
overwritten by the next holder. `tusk restore`, `tusk import` and `tusk forget` hold the same lock while
they write (`exclusive`), so no Tusk starts in the middle of their work. `holder()` says who holds it:
`tusk chat` then talks to that Tusk through its local API, `tusk forget` asks it to forget, and `tusk doctor`
tells its port from a Tusk of another home.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bot.errors import HomeBusy
from memory.paths import open_private, private_dir

LOCK_NAME = "tusk.lock"
ENGINES = frozenset({"tusk run", "tusk chat"})  # the commands that serve chats (the others only hold it to write)
TRIES = 10  # a look at the lock (`holder`, doctor) holds it for a moment: a start tries again before refusing
PAUSE = 0.03  # seconds between two tries


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a home's lock, as its record says (empty fields: no record yet, or an unreadable one)."""

    pid: int | None = None
    command: str = ""
    home: str = ""
    url: str | None = None  # where its HTTP API answers (a `tusk chat` alone serves none)

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        try:
            rec = json.loads(text)
            pid, url = rec.get("pid"), rec.get("url")
            return cls(pid if isinstance(pid, int) else None, str(rec.get("command") or ""), str(rec.get("home") or ""),
                       url if isinstance(url, str) and url else None)
        except (ValueError, AttributeError):
            return None

    @property
    def engine(self) -> bool:
        """A Tusk serving chats (`tusk run`, `tusk chat`), not a command that writes and ends."""
        return self.command in ENGINES

    def names(self) -> str:
        """`pid 1234, http://127.0.0.1:8765`; where it serves no API, its command."""
        who = f"pid {self.pid}" if self.pid else "pid unknown"
        what = self.url or (f"`{self.command}`" if self.command else "")
        return f"{who}, {what}" if what else who

    def refusal(self) -> str:
        """The one line that refuses a second Tusk (or a command that cannot work beside this holder)."""
        if self.command and not self.engine:
            return f"`{self.command}` is working on this home (pid {self.pid or 'unknown'}): try again when it ends"
        return f"a Tusk is already running on this home ({self.names()}): stop it first"


class Claim:
    """This process's exclusive hold on a home, with its record; `release` (or the process's end) drops it."""

    def __init__(self, home: Path, fd: int, command: str) -> None:
        self.home = Path(home)
        self.command = command
        self._fd: int | None = fd
        self.describe()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def covers(self, path: Path) -> bool:
        """True while held, for the home `path` is in (or is)."""
        here = Path(path).resolve()
        return self.held and (here == self.home.resolve() or self.home.resolve() in here.parents)

    def describe(self, url: str | None = None) -> None:
        """Write who holds the lock (`url`: where this Tusk's HTTP API answers, once it does)."""
        if self._fd is None:
            return
        data = json.dumps({"pid": os.getpid(), "command": self.command, "home": str(self.home.absolute()),
                           "url": url, "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}).encode()
        os.pwrite(self._fd, data, 0)  # never an empty file between two records: a reader sees one or retries
        os.ftruncate(self._fd, len(data))

    def release(self) -> None:
        """Drop the lock (its record emptied first); a second call is a no-op."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)  # the only descriptor of this open file: the flock goes with it


def claim(home: Path, command: str) -> Claim:
    """The home held exclusively by this process, recorded as `command`; HomeBusy naming the holder if taken."""
    private_dir(Path(home), follow=True)
    fd = open_private(Path(home) / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    for attempt in range(TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return Claim(Path(home), fd, command)
        except BlockingIOError:
            if attempt < TRIES - 1 or (there := holder(home)) is None:  # None: its holder ended just now
                time.sleep(PAUSE)
                continue
            os.close(fd)
            raise HomeBusy(there.refusal(), there) from None
    os.close(fd)
    raise HomeBusy(Holder().refusal(), Holder())


def this_command() -> str:
    """`tusk import` for the process started as `tusk import ...` (or `python -m bot.ops.cli import ...`)."""
    argv = sys.argv
    return f"tusk {argv[1]}" if len(argv) > 1 and Path(argv[0]).name in ("tusk", "cli.py") else ""


def exclusive(home: Path, command: str = "") -> Claim | None:
    """For a command that writes under the home and ends (restore, import, forget): the claim (recorded as
    `command`, else as this process's own command), or None when a Tusk or another such command holds it."""
    try:
        return claim(home, command or this_command())
    except HomeBusy:
        return None


def release(held: Claim | None) -> None:
    """Drop what `exclusive` returned; None (it was not taken) is a no-op."""
    if held is not None:
        held.release()


def holder(home: Path) -> Holder | None:
    """Who holds the home's lock now, or None when nobody does (whatever an old record says)."""
    try:
        fd = os.open(Path(home) / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        for _ in range(TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return None  # nobody holds it (our shared lock goes when fd is closed below)
            except BlockingIOError:
                pass
            if (found := Holder.parse(os.pread(fd, 4096, 0).decode(errors="replace"))) is not None:
                return found
            time.sleep(PAUSE)  # taken a moment ago: its record is being written
        return Holder()
    finally:
        os.close(fd)
