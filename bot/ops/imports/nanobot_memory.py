"""nanobot's memory as a Tusk chat's MEMORY.md and HISTORY.md (bot/ops/imports/__init__.py takes them
where the target chat has none, when the import has exactly one target chat).

nanobot keeps one memory for all its chats, in the workspace: `memory/MEMORY.md` (long-term facts, taken
as it is) and `memory/history.jsonl` (0.3: `{"cursor", "timestamp": "YYYY-MM-DD HH:MM" local time,
"content", "session_key"}` a line), or `memory/HISTORY.md` before 0.3 (`[YYYY-MM-DD HH:MM] summary`
paragraphs). The history becomes Tusk's dated entries (`## YYYY-MM-DD HH:MM UTC`); from one session
file, only that session's entries (and those naming none); from a folder, all but nanobot's own runs
(cron, Dream, heartbeat). SOUL.md and USER.md (nanobot's persona and profile) are left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from bot.ops.imports import nanobot_layout as layout
from bot.ops.imports.model import MAX_TEXT, ImportRefused

MAX_HISTORY = 16 * MAX_TEXT  # bytes of nanobot's history: more is not a chat bot's
LEGACY_ENTRY = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\]\s*", re.MULTILINE)


def memory_files(path: Path) -> dict[str, str]:
    """{"MEMORY.md": text, "HISTORY.md": text} for what nanobot's workspace holds (empty ones left out)."""
    found = layout.find(path)
    if found.workspace is None:
        return {}
    folder = found.workspace / "memory"
    out = {"MEMORY.md": _read(folder / "MEMORY.md", MAX_TEXT)}
    only = _key(found.sessions[0]) if found.single else None
    if (folder / "history.jsonl").is_file():
        out["HISTORY.md"] = "".join(_entries(folder / "history.jsonl", only))
    elif (folder / "HISTORY.md").is_file():
        out["HISTORY.md"] = "".join(_legacy(_read(folder / "HISTORY.md", MAX_HISTORY)))
    return {name: text for name, text in out.items() if text.strip()}


def _read(file: Path, limit: int) -> str:
    if not file.is_file():
        return ""
    layout.plain(file)
    if file.stat().st_size > limit:
        raise ImportRefused(f"{file}: {file.stat().st_size:,} bytes, more than {limit:,}: refused, nothing written")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ImportRefused(f"{file}: not UTF-8 text ({exc}): nothing written") from exc


def _key(session: Path) -> str:
    """A session file's key, as its metadata record (or else its name) gives it."""
    with open(session, "rb") as fh:
        try:
            first = json.loads(fh.readline(1 << 20) or b"{}")
        except ValueError:
            first = {}
    key = first.get("key") if isinstance(first, dict) else None
    return key if isinstance(key, str) and key else layout.key_of_name(session.stem)


def _heading(file: Path, stamp: object) -> str:
    try:
        when = datetime.strptime(str(stamp)[:16], "%Y-%m-%d %H:%M")
    except ValueError as exc:
        raise ImportRefused(f"{file}: an entry dated {stamp!r}, not YYYY-MM-DD HH:MM: nothing written") from exc
    return f"## {when.astimezone(UTC):%Y-%m-%d %H:%M} UTC\n\n"


def _entries(file: Path, only: str | None) -> Iterator[str]:
    """history.jsonl's entries, oldest first, as Tusk's HISTORY.md entries."""
    text = _read(file, MAX_HISTORY)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ImportRefused(f"{file}:{number}: not JSON, or cut short: nothing written") from exc
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            raise ImportRefused(f"{file}:{number}: not a history entry (no content): nothing written")
        key = entry.get("session_key")
        if (only is not None and key not in (None, only)
                or only is None and isinstance(key, str) and layout.internal(key)):
            continue
        if entry["content"].strip():
            yield _heading(file, entry.get("timestamp")) + entry["content"].strip() + "\n\n"


def _legacy(text: str) -> Iterator[str]:
    """HISTORY.md before 0.3: a paragraph a summary, each starting `[YYYY-MM-DD HH:MM]`."""
    starts = [m.start() for m in LEGACY_ENTRY.finditer(text)]
    if not starts:
        if text.strip():
            yield text.strip() + "\n\n"
        return
    if text[:starts[0]].strip():
        yield text[:starts[0]].strip() + "\n\n"
    for a, b in zip(starts, [*starts[1:], len(text)]):
        chunk = text[a:b]
        m = LEGACY_ENTRY.match(chunk)
        assert m is not None  # the chunk starts where finditer found an entry
        yield _heading(Path("HISTORY.md"), m.group(1)) + chunk[m.end():].strip() + "\n\n"
