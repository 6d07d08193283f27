"""Where nanobot (nanobot-ai 0.3) keeps its files, from the folder or file `tusk import` is given.

Three layouts are found, each from the instance folder (the one holding `config.json`, `~/.nanobot` by
default) or from the workspace folder (`~/.nanobot/workspace`, or `agents.defaults.workspace` in
config.json):

    0.3.0, and the 0.1/0.2 releases   workspace/sessions/<name>.jsonl
    0.3.5 (sessions moved out)        <instance>/sessions/<workspace id>/<name>.jsonl, the id in
                                      workspace/.nanobot/workspace-id
    the oldest, global                <instance>/sessions/<name>.jsonl

A session file is named by its key (`telegram:123`) in URL-safe base64 without padding (0.3), or with
the first `:` made `_` (before); its metadata record names the key too and wins. The memory is the
workspace's: `memory/MEMORY.md`, `memory/history.jsonl` (0.3) or `memory/HISTORY.md` (before 0.3).
A link among these files is refused: the import reads only what the folder itself holds.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from pathlib import Path

from bot.ops.imports.model import ImportRefused

WORKSPACE_ID = re.compile(r"[0-9a-f]{32}")
INTERNAL = ("cron:", "dream:", "heartbeat", "subagent:")  # nanobot's own runs, not conversations


@dataclass(frozen=True, slots=True)
class Layout:
    """The session files to read and the workspace (for the memory), as found."""

    sessions: tuple[Path, ...]
    workspace: Path | None
    single: bool = False  # one session file given: its chat's part of the memory


def plain(path: Path) -> Path:
    """`path` itself when it is no link, else refused."""
    if path.is_symlink():
        raise ImportRefused(f"{path} is a symbolic link: refused (the import reads only the folder's own files)")
    return path


def _jsonl(folder: Path) -> list[Path]:
    return sorted(plain(p) for p in folder.glob("*.jsonl") if not p.name.startswith("."))


def _configured_workspace(instance: Path) -> Path | None:
    """config.json's `agents.defaults.workspace`, when it names a folder that exists."""
    try:
        config = json.loads(plain(instance / "config.json").read_text(encoding="utf-8")[:1 << 20])
        named = config["agents"]["defaults"]["workspace"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    path = Path(named).expanduser() if isinstance(named, str) else None
    return path if path is not None and path.is_dir() else None


def _namespace(workspace: Path, instance: Path) -> list[Path]:
    """The workspace's sessions under the instance folder (0.3.5): `sessions/<workspace id>/`."""
    root = instance / "sessions"
    marker = workspace / ".nanobot" / "workspace-id"
    if marker.is_file():
        wid = plain(marker).read_text(encoding="ascii", errors="replace").strip()
        if WORKSPACE_ID.fullmatch(wid) and (root / wid).is_dir():
            return _jsonl(plain(root / wid))
    spaces = [p for p in root.glob("*") if WORKSPACE_ID.fullmatch(p.name) and p.is_dir()] if root.is_dir() else []
    if len(spaces) > 1:
        raise ImportRefused(f"{root} holds the sessions of {len(spaces)} nanobot workspaces: give the one "
                            "folder sessions/<workspace id> to import")
    return _jsonl(plain(spaces[0])) if spaces else []


def find(path: Path) -> Layout:
    """The nanobot files under `path` (an instance folder, a workspace, a sessions folder or one file)."""
    plain(path)
    if path.is_file():
        return Layout((path,), _workspace_of_file(path), single=True)
    if (path / "config.json").is_file() or (path / "workspace").is_dir():  # the instance folder
        workspace = path / "workspace" if (path / "workspace").is_dir() else _configured_workspace(path)
        found = _jsonl(plain(workspace / "sessions")) if workspace and (workspace / "sessions").is_dir() else []
        found += _namespace(workspace, path) if workspace else []
        found += _jsonl(path / "sessions") if (path / "sessions").is_dir() else []
        return Layout(tuple(found), workspace)
    if (path / "memory").is_dir() or (path / "sessions").is_dir() or (path / ".nanobot").is_dir():  # a workspace
        found = _jsonl(plain(path / "sessions")) if (path / "sessions").is_dir() else []
        return Layout(tuple(found + _namespace(path, path.parent)), path)
    return Layout(tuple(_jsonl(path)), None)  # a folder of session files


def _workspace_of_file(file: Path) -> Path | None:
    """The workspace a session file belongs to, when it sits where nanobot puts it."""
    folder = file.parent
    if folder.name == "sessions" and (folder.parent / "memory").is_dir():
        return folder.parent
    if WORKSPACE_ID.fullmatch(folder.name) and folder.parent.name == "sessions":
        instance = folder.parent.parent
        for workspace in (instance / "workspace", _configured_workspace(instance)):
            if workspace and (workspace / "memory").is_dir():
                return workspace
    return None


def key_of_name(stem: str) -> str:
    """A session key from its file's name: base64url of the key (0.3), else `channel_chat` (before)."""
    try:
        key = base64.urlsafe_b64decode(stem + "=" * (-len(stem) % 4)).decode("utf-8")
        if base64.urlsafe_b64encode(key.encode()).decode().rstrip("=") == stem and key.isprintable():
            return key
    except (binascii.Error, ValueError):
        pass
    return stem.replace("_", ":", 1)


def chat_of(key: str) -> tuple[str, str] | None:
    """The Tusk chat a nanobot session key stands for, where its channel is one of Tusk's; else None
    (the import then needs --to). Topics and threads become the chat ids Tusk's adapters give them."""
    channel, _, rest = key.partition(":")
    parts = rest.split(":")
    if not rest or not all(parts):
        return None
    if channel == "telegram" and (len(parts) == 1 or len(parts) == 3 and parts[1] == "topic"):
        return "telegram", ".".join(parts[::2])  # telegram:<chat>:topic:<thread> -> <chat>.<thread>
    if channel == "discord" and (len(parts) == 1 or len(parts) == 3 and parts[1] == "thread"):
        return "discord", parts[-1]  # a thread is its own channel id, as Tusk's Discord adapter keys it
    if channel == "slack" and len(parts) <= 2:
        return "slack", "-".join(parts)  # slack:<channel>:<thread ts> -> <channel>-<thread ts>
    return None


def internal(key: str) -> bool:
    """A session of nanobot's own (cron jobs, Dream, heartbeat, subagents): not a conversation."""
    return key.startswith(INTERNAL)
