"""A chat's memory files: MEMORY.md (rewritten whole, atomically, versioned) and HISTORY.md
(append-only dated entries).

MEMORY.md is replaced by writing a temporary file in the same folder, fsyncing it and
renaming it over the old one, so a reader (or a crash) only ever sees the old or the new
file whole. The previous text is first kept in `versions/` (the last `KEEP_VERSIONS`).
Files are created 0600 in 0700 folders and never opened through a symlink (memory/paths.py).
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path

from memory.paths import ChatFiles, open_private, private_dir

KEEP_VERSIONS = 10
ENTRY_HEADING = re.compile(r"^## \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", re.MULTILINE)
ENTRY_TIME = re.compile(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC")


def read_text(path: Path) -> str:
    """A file's text, never through a symlink (UnsafePathError)."""
    with os.fdopen(open_private(path, os.O_RDONLY), encoding="utf-8") as fh:
        return fh.read()


def read_memory(files: ChatFiles) -> str:
    try:
        return read_text(files.memory)
    except FileNotFoundError:
        return ""


def write_atomic(path: Path, text: str, follow_dir: bool = False) -> None:
    """Replace `path` whole: a temporary file in the same folder, fsynced, renamed over it (a symlink at
    `path` is replaced, never followed). The folder is made owner-only; `follow_dir` allows it to be a
    symlink (only for $TUSK_HOME itself)."""
    private_dir(path.parent, follow=follow_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def versions(files: ChatFiles) -> list[Path]:
    """Earlier MEMORY.md texts, oldest first."""
    return sorted(files.versions.glob("MEMORY.*.md")) if files.versions.is_dir() else []


def write_memory(files: ChatFiles, text: str) -> None:
    """Replace MEMORY.md whole, keeping the text it had as a version."""
    old = read_memory(files)
    if old == text:
        return
    if old:
        write_atomic(files.versions / version_name(time.time()), old)
        for stale in versions(files)[:-KEEP_VERSIONS]:
            stale.unlink(missing_ok=True)
    write_atomic(files.memory, text)


def version_name(saved: float) -> str:
    """A kept MEMORY.md text's file name: `MEMORY.<UTC time to the microsecond>.md` (names sort by age)."""
    return f"MEMORY.{datetime.fromtimestamp(saved, timezone.utc).strftime('%Y%m%dT%H%M%S%f')}.md"


def history_blocks(text: str) -> list[str]:
    """HISTORY.md cut before each dated heading, nothing dropped: joined again they are the text (the first
    block is what came before the first heading when that is not empty)."""
    starts = [m.start() for m in ENTRY_HEADING.finditer(text)]
    cuts = [0, *[a for a in starts if a > 0], len(text)]
    return [text[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def restore_previous(files: ChatFiles) -> bool:
    """Put the newest kept version back as MEMORY.md (the current text is dropped); False if none."""
    kept = versions(files)
    if not kept:
        return False
    write_atomic(files.memory, read_text(kept[-1]))
    kept[-1].unlink()
    return True


def entry_stamp(when: float, until: float | None = None) -> str:
    """An entry heading's time: `2023-06-01 10:09 UTC`, or the span of the messages it summarises,
    `2023-06-01 10:09 UTC – 2023-06-03 18:40 UTC` (ENTRY_HEADING matches both)."""
    first, last = (datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
                   for t in (when, until or when))
    return first if last == first else f"{first} – {last}"


def entry_span(heading: str) -> tuple[float, float]:
    """(first, last) time of an entry heading as `entry_stamp` writes it (both the same for one time)."""
    times = [datetime.strptime(t, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc).timestamp()
             for t in ENTRY_TIME.findall(heading)[:2]]
    return times[0], times[-1]


def append_history(files: ChatFiles, entry: str, when: float | None = None, until: float | None = None) -> None:
    """Add an entry to HISTORY.md (fsynced), dated `when` (default now) or, with `until`, that span."""
    stamp = entry_stamp(when or time.time(), until)
    files.ensure()
    with os.fdopen(open_private(files.history, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8") as fh:
        fh.write(f"## {stamp}\n\n{entry.strip()}\n\n")
        fh.flush()
        os.fsync(fh.fileno())


def history_entries(files: ChatFiles) -> list[str]:
    """HISTORY.md split into its entries, oldest first, each starting with its dated heading."""
    try:
        text = read_text(files.history)
    except FileNotFoundError:
        return []
    starts = [m.start() for m in ENTRY_HEADING.finditer(text)]
    return [text[a:b].strip() for a, b in zip(starts, [*starts[1:], len(text)])]
