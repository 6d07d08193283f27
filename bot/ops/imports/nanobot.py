"""nanobot's files: its workspace (`sessions/*.jsonl`, `memory/MEMORY.md`, `memory/HISTORY.md`).

A session file starts with `{"_type": "metadata", "key": "telegram:123", ...}`, then one message a
line: `role`, `content`, `timestamp` (ISO 8601). User and assistant messages are imported; tool
messages and tool-call steps are left out. The chat is nanobot's key where it names a Tusk channel.
nanobot's MEMORY.md and HISTORY.md are not yet merged (they are one memory for all chats): copy what
matters with the console's memory editor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from bot.ops.imports.model import MAX_TEXT, Imported, ImportRefused


def _sessions(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    for folder in (path / "sessions", path / "workspace" / "sessions"):
        if folder.is_dir():
            return sorted(folder.glob("*.jsonl"))
    return []


def detect(path: Path) -> bool:
    files = _sessions(path)
    if not files or not files[0].suffix == ".jsonl":
        return False
    with open(files[0], "rb") as fh:
        return b'"_type"' in fh.readline(65536)


def read(path: Path) -> Iterator[Imported]:
    files = _sessions(path)
    if not files:
        raise ImportRefused(f"{path}: no nanobot session files (sessions/*.jsonl)")
    for file in files:
        chat = None
        with open(file, "rb") as fh:
            for number, line in enumerate(fh, 1):
                if len(line) > 4 * MAX_TEXT:
                    raise ImportRefused(f"{file}:{number}: a line of {len(line):,} bytes: refused, nothing written")
                try:
                    rec = json.loads(line)
                except ValueError as exc:
                    raise ImportRefused(f"{file}:{number}: not JSON ({exc}): nothing written") from exc
                if not isinstance(rec, dict):
                    continue
                if rec.get("_type") == "metadata":
                    channel, _, chat_id = str(rec.get("key", "")).partition(":")
                    chat = (channel, chat_id) if chat_id else None
                    continue
                if rec.get("role") not in ("user", "assistant") or not isinstance(rec.get("content"), str) \
                        or not rec["content"].strip() or rec.get("tool_calls"):
                    continue
                try:
                    when = datetime.fromisoformat(str(rec.get("timestamp")))
                except ValueError as exc:
                    raise ImportRefused(f"{file}:{number}: no readable timestamp: nothing written") from exc
                ts = (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
                yield Imported(chat, f"nanobot:{file.stem}:{number}", ts, rec["content"], None, None, rec["role"])
