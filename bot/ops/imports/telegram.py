"""Telegram Desktop's JSON export (`result.json`): one chat, or all chats (`chats.list`).

Shapes, as Telegram Desktop writes them: a chat is `{"name", "type", "id", "messages": [...]}`; a
message has `id`, `type` ("message" or "service"), `date` and `date_unixtime`, `from`/`from_id`
("user123", "channel123"), `text` as a string or a list of strings and entity objects
(`{"type": "bold", "text": "..."}`), and optionally `edited`, `forwarded_from`, `reply_to_message_id`,
`photo`, `file`, `media_type`, `sticker_emoji`, `poll`, `location_information`, `contact_information`.
Service messages (joins, pins, title changes) are skipped, as Tusk skips them live; an edited message
is imported as last edited; a forward, a reply and an attachment become bracketed notes in the text
(the files themselves are not in Tusk's media). Chat ids become the Bot API's: a basic group `-ID`, a
supergroup or channel `-100ID`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from bot.ops.imports.model import Imported, ImportRefused
from bot.ops.imports.stream import build, events

MEDIA = {"voice_message": "voice message", "video_message": "video message", "video_file": "video",
         "audio_file": "audio", "animation": "GIF"}


def detect(path: Path) -> bool:
    if path.is_dir() and (path / "result.json").is_file():
        return True
    if not path.is_file() or path.suffix != ".json":
        return False
    with open(path, "rb") as fh:
        head = fh.read(4096)
    return b'"messages"' in head and (b'"personal_chat"' in head or b'"date_unixtime"' in head) or b'"chats"' in head


def bot_api_id(kind: str, chat_id: int) -> str:
    if kind in ("private_group",):
        return str(-abs(chat_id))
    if kind in ("private_supergroup", "public_supergroup", "private_channel", "public_channel"):
        return f"-100{abs(chat_id)}"
    return str(chat_id)


def text_of(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(part if isinstance(part, str) else str(part.get("text", "")) if isinstance(part, dict) else ""
                       for part in value)
    return ""


def to_imported(chat: tuple[str, str] | None, m: object) -> Imported | None:
    """One export message as Tusk keeps it; None for service messages and empty ones."""
    if not isinstance(m, dict) or m.get("type") != "message" or "id" not in m:
        return None
    notes = []
    if fwd := m.get("forwarded_from"):
        notes.append(f"[forwarded from {fwd}]")
    if (reply := m.get("reply_to_message_id")) is not None:
        notes.append(f"[reply to message {reply}]")
    if "photo" in m:
        notes.append("[photo]")
    if emoji := m.get("sticker_emoji"):
        notes.append(f"[sticker {emoji}]")
    elif kind := m.get("media_type"):
        notes.append(f"[{MEDIA.get(kind, kind.replace('_', ' '))}]")
    elif "file" in m:
        notes.append(f"[file {m.get('file_name') or ''}]".replace(" ]", "]"))
    if isinstance(m.get("poll"), dict):
        notes.append(f"[poll: {m['poll'].get('question', '')}]")
    if isinstance(m.get("location_information"), dict):
        loc = m["location_information"]
        notes.append(f"[location {loc.get('latitude')}, {loc.get('longitude')}]")
    if isinstance(m.get("contact_information"), dict):
        c = m["contact_information"]
        notes.append(f"[contact {c.get('first_name', '')} {c.get('last_name', '')}]".replace(" ]", "]"))
    text = " ".join([*notes, text_of(m.get("text"))]).strip()
    if not text:
        return None
    try:
        ts = float(m["date_unixtime"]) if "date_unixtime" in m else \
            datetime.fromisoformat(m["date"]).replace(tzinfo=timezone.utc).timestamp()
    except (KeyError, TypeError, ValueError) as exc:
        raise ImportRefused(f"message {m.get('id')}: no readable date ({exc}): nothing written") from exc
    sender = str(m.get("from_id") or "")
    sender_id = sender[4:] if sender.startswith("user") else sender or None
    return Imported(chat, f"telegram:{chat[1] if chat else ''}:{m['id']}", ts, text, sender_id,
                    str(m.get("from") or "") or None)


def read(path: Path) -> Iterator[Imported]:
    path = path / "result.json" if path.is_dir() else path
    stream = events(path)
    header: dict[str, object] = {}
    found = False
    for prefix, event, value in stream:
        base = prefix[:-len(".messages.item")] if prefix.endswith(".messages.item") else \
            "" if prefix == "messages.item" else None
        if base is None:
            if prefix.endswith(("name", "type", "id")) and event in ("string", "number"):
                header[prefix.rsplit(".", 1)[-1]] = value
            continue
        if event != "start_map":
            continue
        found = True
        kind, raw_id = header.get("type"), header.get("id")
        chat = ("telegram", bot_api_id(str(kind), int(raw_id))) if isinstance(raw_id, int | float) else None
        msg = to_imported(chat, build(stream, (prefix, event, value)))
        if msg is not None:
            yield msg
    if not found:
        raise ImportRefused(f"{path}: no messages found: not a Telegram Desktop JSON export")
