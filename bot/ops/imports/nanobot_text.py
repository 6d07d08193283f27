"""One nanobot session record as the text Tusk keeps, or None for what is not a conversation message.

User and assistant messages only: tool calls and results, slash commands (`_command`), nanobot's hidden
records (compaction checkpoints, automation and cron triggers) and subagent reports (`injected_event`)
are None. List content is joined as text, a picture part as `[image]`; the runtime context nanobot
appends to a user message for the model (recorded in `_runtime_context`) is cut off, and so is the
`[Message Time: ...]` line it strips from its own replies; `media` paths become `[image]` or
`[file NAME]` notes (the files are not imported).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

HIDDEN = ("_command", "_hidden_history", "_automation_turn", "_cron_turn", "injected_event")
IMAGES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".heic"})
TIME_PREFIX = re.compile(r"^\[Message Time: [^\]]+\]\n?")


def text_of(rec: dict) -> str | None:
    """The message as Tusk keeps it, or None for what is not a conversation message."""
    role = rec.get("role")
    if role not in ("user", "assistant") or rec.get("tool_calls") or any(rec.get(k) for k in HIDDEN):
        return None
    content = _without_runtime_context(rec)
    if isinstance(content, list):
        content = " ".join(_part(p) for p in content if _part(p))
    elif not isinstance(content, str):
        content = ""
    if role == "assistant":
        content = TIME_PREFIX.sub("", content, count=1)
    given = rec.get("media")
    media = given if isinstance(given, list) else []
    notes = [_note(m) for m in media if isinstance(m, str) and m]
    text = " ".join([*notes, content.strip()]).strip()
    return text or None


def _without_runtime_context(rec: dict) -> object:
    """`content` without the blocks nanobot appended for the model (it records them in `_runtime_context`)."""
    content, marker = rec.get("content"), rec.get("_runtime_context")
    if not isinstance(marker, dict):
        return content
    suffix, blocks = marker.get("suffix"), marker.get("blocks")
    if isinstance(content, str) and isinstance(suffix, str) and suffix:
        return "" if content == suffix else content.removesuffix("\n\n" + suffix)
    if isinstance(content, list) and isinstance(blocks, list) and blocks and content[-len(blocks):] == blocks:
        return content[:-len(blocks)]
    return content


def _part(part: object) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    kind = part.get("type")
    if kind == "text":
        return part["text"] if isinstance(part.get("text"), str) else ""
    return "[image]" if kind in ("image_url", "image", "input_image") else f"[{kind}]" if isinstance(kind, str) else ""


def _note(media: str) -> str:
    name = PurePosixPath(media.replace("\\", "/")).name
    return "[image]" if PurePosixPath(name).suffix.lower() in IMAGES else f"[file {name}]"
