"""A DiscordChatExporter JSON file (one channel): `{"guild", "channel", "messages": [...]}`.

A message has `id`, `type` ("Default", "Reply", or a system type such as "GuildMemberJoin", skipped),
`timestamp` (ISO 8601 with offset), `content`, `author` (`id`, `name`, `nickname`, `isBot`),
`attachments` (`fileName`), `stickers` (`name`), `embeds` and `reference` (`messageId`) for replies.
The Tusk chat is `discord:<channel id>`, as the Discord adapter names it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from bot.ops.imports.model import Imported, ImportRefused
from bot.ops.imports.stream import build, events

KEPT = frozenset({"Default", "Reply"})


def detect(path: Path) -> bool:
    if not path.is_file() or path.suffix != ".json":
        return False
    with open(path, "rb") as fh:
        head = fh.read(4096)
    return b'"guild"' in head and b'"channel"' in head


def to_imported(channel_id: str | None, m: object) -> Imported | None:
    if not isinstance(m, dict) or m.get("type", "Default") not in KEPT or "id" not in m:
        return None
    notes = []
    if isinstance(m.get("reference"), dict) and m["reference"].get("messageId"):
        notes.append(f"[reply to message {m['reference']['messageId']}]")
    notes += [f"[file {a.get('fileName', '')}]" for a in m.get("attachments") or () if isinstance(a, dict)]
    notes += [f"[sticker {s.get('name', '')}]" for s in m.get("stickers") or () if isinstance(s, dict)]
    text = " ".join([*notes, str(m.get("content") or "")]).strip()
    if not text:
        return None
    try:
        ts = datetime.fromisoformat(str(m["timestamp"])).timestamp()
    except (KeyError, ValueError) as exc:
        raise ImportRefused(f"message {m.get('id')}: no readable timestamp ({exc}): nothing written") from exc
    given = m.get("author")
    author = given if isinstance(given, dict) else {}
    chat = ("discord", channel_id) if channel_id else None
    return Imported(chat, f"discord:{channel_id}:{m['id']}", ts, text,
                    str(author["id"]) if author.get("id") else None,
                    author.get("nickname") or author.get("name"))


def read(path: Path) -> Iterator[Imported]:
    stream = events(path)
    channel_id, found = None, False
    for prefix, event, value in stream:
        if prefix == "channel.id" and event in ("string", "number"):
            channel_id = str(value)
        elif prefix == "messages.item" and event == "start_map":
            found = True
            if (msg := to_imported(channel_id, build(stream, (prefix, event, value)))) is not None:
                yield msg
    if not found:
        raise ImportRefused(f"{path}: no messages found: not a DiscordChatExporter JSON export")
