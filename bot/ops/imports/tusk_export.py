"""A `tusk export` archive (memory/chats.py): `<chat-dir>/session.jsonl`, `MEMORY.md`, `HISTORY.md`, ...

To move or rename a chat: the session's messages are imported as they were stored (roles, senders,
dates), into the chat its metadata record names unless `--to`; MEMORY.md and HISTORY.md are taken
when the target chat has none (`memory_files`), and then the messages they already hold (before the
archive's pointer) count as consolidated in the target too, so they are not summarised twice. Members
that are links, absolute or hold `..` refuse the whole archive.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from bot.ops.imports.model import MAX_TEXT, Imported, ImportRefused

NAMES = ("session.jsonl", "MEMORY.md", "HISTORY.md")


def detect(path: Path) -> bool:
    if not path.is_file() or not path.name.endswith((".tar.gz", ".tgz")):
        return False
    try:
        with tarfile.open(path, "r:gz") as tar:
            return any(m.name.count("/") == 1 and m.name.endswith("/session.jsonl") for m in tar)
    except (tarfile.TarError, OSError, EOFError):
        return False


def _members(path: Path) -> Iterator[tuple[str, tarfile.TarInfo, tarfile.TarFile]]:
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar:
                parts = member.name.split("/")
                if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
                    raise ImportRefused(f"{path}: member {member.name!r} is a link, absolute or climbs out: refused, "
                                        "nothing written")
                if member.isfile() and len(parts) == 2 and parts[1] in NAMES:
                    yield parts[1], member, tar
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ImportRefused(f"{path}: damaged or truncated archive ({exc}): nothing written") from exc


def _file(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    """A member `_members` gave (a file, always) opened for reading."""
    fh = tar.extractfile(member)
    assert fh is not None  # only links and special files have no contents, and _members refused those
    return fh


def _pointer(lines: Iterable[bytes]) -> int:
    """The session's consolidation pointer: its last pointer record's count of messages."""
    pointer = 0
    for line in lines:
        if b'"pointer"' in line:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("record") == "pointer" and type(rec.get("last_consolidated")) is int:
                pointer = rec["last_consolidated"]
    return pointer


def read(path: Path) -> Iterator[Imported]:
    """The archive's messages; those its memory already holds (before its pointer) are marked `settled`."""
    found = False
    for name, member, tar in _members(path):
        if name != "session.jsonl":
            continue
        found, chat, folder, seen = True, None, member.name.split("/")[0], 0
        pointer = _pointer(_file(tar, member))
        for number, line in enumerate(_file(tar, member), 1):
            if len(line) > 4 * MAX_TEXT:
                raise ImportRefused(f"{path}: a session line of {len(line):,} bytes: refused, nothing written")
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a torn line, as Tusk skips it when loading
            if not isinstance(rec, dict):
                continue
            if rec.get("record") == "meta":
                chat = (str(rec.get("channel")), str(rec.get("chat_id"))) if rec.get("chat_id") else None
                continue
            if "record" in rec:
                continue
            seen += 1
            if rec.get("role") not in ("user", "assistant") or not isinstance(rec.get("content"), str) \
                    or not rec["content"] or rec.get("tool_calls"):
                continue
            given = rec.get("sender")
            sender = given if isinstance(given, dict) else {}
            yield Imported(chat, f"tusk:{folder}:{number}", float(rec.get("ts") or 0), rec["content"],
                           str(sender["id"]) if sender.get("id") is not None else None, sender.get("name"),
                           rec["role"], settled=seen <= pointer)
    if not found:
        raise ImportRefused(f"{path}: no session.jsonl: not a `tusk export` archive")


def memory_files(path: Path) -> dict[str, str]:
    """MEMORY.md and HISTORY.md of the archive, by name (bounded: each at most 16 MB)."""
    out = {}
    for name, member, tar in _members(path):
        if name != "session.jsonl" and member.size <= 16 << 20:
            out[name] = _file(tar, member).read().decode("utf-8", "replace")
    return out
