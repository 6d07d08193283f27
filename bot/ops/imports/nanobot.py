"""nanobot's sessions (nanobot-ai 0.3, and the layouts before it): one Tusk chat per session file.

Where the files are: nanobot_layout.py; a record's text: nanobot_text.py; the memory: nanobot_memory.py.
A session file starts with `{"_type": "metadata", "key": "telegram:123", "last_consolidated": N, ...}`
(0.3.5 writes `last_archived` too, and may add a `provider_state` record), then one message a line:
`role`, `content` (a string or a list of parts), `timestamp` (ISO 8601, local time without an offset),
`media` (file paths), `tool_calls`. User and assistant messages are imported: list content joined as
text, media as `[image]` or `[file NAME]`; tool calls and results, slash commands, nanobot's hidden
records (compaction checkpoints, automation triggers) and subagent reports are left out, and so is
the runtime context nanobot appends to a user message. The first N messages, those nanobot had already
consolidated into its own memory, are marked `settled`. A message's id is a digest of its session, role,
time and text, so it stays the same when nanobot later trims or rewrites the file.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from bot.ops.imports import nanobot_layout as layout
from bot.ops.imports.model import MAX_DEPTH, MAX_TEXT, Imported, ImportRefused
from bot.ops.imports.nanobot_memory import memory_files
from bot.ops.imports.nanobot_text import text_of

__all__ = ["detect", "memory_files", "read", "skills_folder"]

MAX_LINE = 4 * MAX_TEXT  # bytes of one record: a message and its tool calls, escaped


def detect(path: Path) -> bool:
    try:
        files = layout.find(path).sessions
    except (ImportRefused, OSError):
        return False
    if not files or files[0].suffix != ".jsonl":
        return False
    with open(files[0], "rb") as fh:
        return b'"_type"' in fh.readline(65536)


def read(path: Path) -> Iterator[Imported]:
    found = layout.find(path)
    if not found.sessions:
        raise ImportRefused(f"{path}: no nanobot session files: give nanobot's instance folder (the one with "
                            "config.json, ~/.nanobot by default), its workspace, or one sessions/*.jsonl file")
    for file in found.sessions:
        yield from _session(file, found.single)
    memory_files(path)  # read whole in the first pass too: a bad memory file is refused before anything lands


def skills_folder(path: Path) -> Path | None:
    """The workspace's own skills/ folder, if it has one (bot/skills/importer.py brings it into Tusk's home)."""
    workspace = layout.find(path).workspace
    folder = workspace / "skills" if workspace is not None else None
    return folder if folder is not None and folder.is_dir() and not folder.is_symlink() else None


def _records(file: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) of a session file, each line checked before it is parsed."""
    with open(file, "rb") as fh:
        for number, line in enumerate(iter(lambda: fh.readline(MAX_LINE + 1), b""), 1):
            if len(line) > MAX_LINE:
                raise ImportRefused(f"{file}:{number}: a line of more than {MAX_LINE:,} bytes: "
                                    "refused, nothing written")
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except RecursionError as exc:
                raise ImportRefused(f"{file}:{number}: JSON nested too deep: refused, nothing written") from exc
            except ValueError as exc:
                raise ImportRefused(f"{file}:{number}: not JSON, or cut short ({exc}): nothing written") from exc
            if not isinstance(rec, dict):
                raise ImportRefused(f"{file}:{number}: a record that is not a JSON object: nothing written")
            if _depth(rec) > MAX_DEPTH:
                raise ImportRefused(f"{file}:{number}: JSON nested deeper than {MAX_DEPTH} levels: "
                                    "refused, nothing written")
            yield number, rec


def _depth(value: object) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _session(file: Path, single: bool) -> Iterator[Imported]:
    key, chat, done = layout.key_of_name(file.stem), None, 0
    total = sum(1 for _, rec in _records(file) if "_type" not in rec)  # nanobot ignores a pointer past the end
    index, ids = -1, Counter[str]()
    for number, rec in _records(file):
        if rec.get("_type") == "metadata":
            key = rec["key"] if isinstance(rec.get("key"), str) and rec["key"] else key
            done = next((v for v in (rec.get("last_archived"), rec.get("last_consolidated"))
                         if isinstance(v, int) and not isinstance(v, bool)), 0)
            done = done if 0 <= done <= total else 0
            continue
        if "_type" in rec:  # provider_state and records of later versions: not messages
            continue
        index += 1
        if index == 0:  # the key is known: the metadata record comes first
            if layout.internal(key) and not single:
                return
            chat = layout.chat_of(key)
        text = text_of(rec)
        if text is None:
            continue
        if len(text) > MAX_TEXT:
            raise ImportRefused(f"{file}:{number}: a message of {len(text):,} characters: refused, nothing written")
        ts = _when(file, number, rec.get("timestamp"))
        digest = hashlib.sha256(json.dumps([key, rec["role"], rec.get("timestamp"), text]).encode()).hexdigest()[:24]
        ids[digest] += 1
        source_id = f"nanobot:{key}:{digest}" + (f":{ids[digest]}" if ids[digest] > 1 else "")
        yield Imported(chat, source_id, ts, text, None, None, rec["role"], settled=index < done)


def _when(file: Path, number: int, stamp: object) -> float:
    """nanobot's ISO timestamp as seconds; one without an offset is local time, as nanobot wrote it."""
    if isinstance(stamp, str):
        try:
            return datetime.fromisoformat(stamp).timestamp()
        except (ValueError, OverflowError, OSError):
            pass
    raise ImportRefused(f"{file}:{number}: no readable timestamp ({stamp!r}): nothing written")
