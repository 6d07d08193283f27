"""A Slack workspace export (the zip from Workspace settings, Import/Export data).

Shapes, as Slack documents them: `users.json` (id, name, real_name, profile.display_name), `channels.json`
(public: id, name), `groups.json`, `dms.json` and `mpims.json` (private channels, DMs and group DMs: id,
name or members), and one folder per conversation — named by the channel's name, or a DM's id — of
per-day files `YYYY-MM-DD.json`, each an array of messages: `type` "message", `subtype` (joins, bot and
channel events: skipped; `thread_broadcast`, `file_share` and `me_message` kept), `user`, `text`, `ts`
("1700000000.000100", unique within the channel), `files` (`name`). The chat is `slack:<channel id>`.

The zip is checked before anything is read: a member with an absolute path or `..` refuses it; a
member larger than `MAX_MEMBER` (uncompressed) refuses it as a bomb; each day file streams.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import ijson

from bot.ops.imports.model import Imported, ImportRefused

MAX_MEMBER = 512 << 20
LISTS = ("channels.json", "groups.json", "dms.json", "mpims.json")
KEPT_SUBTYPES = frozenset({None, "thread_broadcast", "file_share", "me_message"})


def detect(path: Path) -> bool:
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
    return "users.json" in names and any(name in names for name in LISTS)


def _checked(z: zipfile.ZipFile, path: Path) -> None:
    for info in z.infolist():
        parts = info.filename.replace("\\", "/").split("/")
        if info.filename.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            raise ImportRefused(f"{path}: member {info.filename!r} climbs out of the export: refused, nothing written")
        if info.file_size > MAX_MEMBER or info.compress_size and info.file_size / info.compress_size > 1000:
            raise ImportRefused(f"{path}: member {info.filename!r} unpacks to {info.file_size:,} bytes: refused "
                                "(a zip bomb, not an export); nothing written")


def _json(z: zipfile.ZipFile, name: str) -> list:
    if name not in z.namelist():
        return []
    try:
        value = json.loads(z.read(name))
    except ValueError as exc:
        raise ImportRefused(f"{name}: not JSON ({exc}): nothing written") from exc
    return value if isinstance(value, list) else []


def read(path: Path) -> Iterator[Imported]:
    try:
        with zipfile.ZipFile(path) as z:
            _checked(z, path)
            users = {u["id"]: (u.get("profile") or {}).get("display_name") or u.get("real_name") or u.get("name")
                     for u in _json(z, "users.json") if isinstance(u, dict) and "id" in u}
            folders = {}
            for listing in LISTS:
                for conv in _json(z, listing):
                    if isinstance(conv, dict) and conv.get("id"):
                        folders[conv.get("name") or conv["id"]] = conv["id"]
                        folders[conv["id"]] = conv["id"]
            for name in sorted(z.namelist()):
                folder, _, day = name.rpartition("/")
                if not day.endswith(".json") or folder not in folders:
                    continue
                yield from _day(z, name, folders[folder], users)
    except (zipfile.BadZipFile, EOFError) as exc:
        raise ImportRefused(f"{path}: damaged or truncated zip ({exc}): nothing written") from exc


def _day(z: zipfile.ZipFile, name: str, channel_id: str, users: dict) -> Iterator[Imported]:
    try:
        with z.open(name) as fh:
            for m in ijson.items(fh, "item", use_float=True):
                if not isinstance(m, dict) or m.get("type") != "message" or m.get("subtype") not in KEPT_SUBTYPES:
                    continue
                notes = [f"[file {f.get('name', '')}]" for f in m.get("files") or () if isinstance(f, dict)]
                text = " ".join([*notes, str(m.get("text") or "")]).strip()
                if not text or "ts" not in m:
                    continue
                user = m.get("user")
                given = m.get("user_profile")
                profile = given if isinstance(given, dict) else {}
                yield Imported(("slack", channel_id), f"slack:{channel_id}:{m['ts']}", float(m["ts"]), text,
                               user, users.get(user) or profile.get("display_name") or profile.get("real_name"))
    except ijson.JSONError as exc:
        raise ImportRefused(f"{name}: malformed or truncated JSON ({exc}): nothing written") from exc
