"""Taking one member out of a group chat's files (`/forget me`): pure file work, no LLM.

    session.jsonl  the member's whole turns dropped (their message, the bot's reply, its tool
                   steps), rewritten atomically (temporary file, fsync, rename) with a pointer
                   recomputed for the kept messages, so the history stays legal and the
                   consolidated part stays consolidated
    MEMORY.md      their `## <Name>` section dropped, in the current file and in every kept
                   version (an erasure that a `/memory undo` could bring back is none)
    HISTORY.md     split into entries here; which to rewrite and how is the caller's (bot/commands/erasure.py)

A member is known by their sender id and every name they were shown under in this chat.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memory import files as memfiles
from memory.files import ENTRY_HEADING, write_atomic
from memory.paths import ChatFiles
from memory.session import Message, iter_messages
from memory.speakers import labels

SECTION = re.compile(r"^## +(.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Member:
    id: str
    names: tuple[str, ...]  # display names, and the `Name (id N)` labels the model saw

    @property
    def shown(self) -> str:
        return self.names[0] if self.names else f"id {self.id}"

    def mentioned_in(self, text: str) -> bool:
        """Does `text` name this member (a whole-word, case-insensitive match of a name or their id label)?"""
        terms = [*self.names, f"id {self.id}"]
        return any(re.search(rf"(?<!\w){re.escape(t)}(?!\w)", text, re.IGNORECASE) for t in terms if t.strip())


def members(files: ChatFiles) -> dict[str, Member]:
    """Everyone who wrote in this chat's session, by sender id."""
    messages = list(iter_messages(files))
    shown = labels(messages)
    names: dict[str, list[str]] = {}
    for m in messages:
        if m.role == "user" and m.sender_id in shown:
            found = names.setdefault(m.sender_id, [])
            for name in (m.sender_name or "", shown[m.sender_id]):
                if name.strip() and name not in found:
                    found.append(name)
    return {sid: Member(sid, tuple(reversed(n))) for sid, n in names.items()}  # newest name first


def member(files: ChatFiles, sender_id: str, name: str = "") -> Member:
    """The member with this id (with `name` as well, e.g. the sender's current name)."""
    known = members(files).get(sender_id, Member(sender_id, ()))
    return Member(sender_id, tuple(dict.fromkeys(n for n in (name, *known.names) if n.strip())))


def _turn_owners(messages: list[Message]) -> list[str | None]:
    """For each message, the sender of the turn it belongs to (the user message that opened it)."""
    owner: str | None = None
    out = []
    for m in messages:
        if m.role == "user":
            owner = m.sender_id
        out.append(owner)
    return out


def session_share(files: ChatFiles, sender_id: str) -> tuple[int, int]:
    """(turns, messages) of this member in the session file."""
    messages = list(iter_messages(files))
    owners = _turn_owners(messages)
    turns = sum(1 for m, o in zip(messages, owners) if m.role == "user" and o == sender_id)
    return turns, sum(1 for o in owners if o == sender_id)


def media_of(files: ChatFiles, sender_id: str) -> list[Path]:
    """The kept files this member sent: the `media/<file>` paths of their messages (only plain names in the
    chat's own media folder: a hand-edited path cannot point elsewhere)."""
    found: dict[Path, None] = {}
    for m in iter_messages(files):
        if m.role == "user" and m.sender_id == sender_id:
            for rel in m.media:
                name = rel.removeprefix("media/")
                if rel.startswith("media/") and name and "/" not in name and name not in (".", ".."):
                    found[files.media / name] = None
    return list(found)


def drop_turns(files: ChatFiles, sender_id: str) -> int:
    """Rewrite session.jsonl without this member's turns; returns the messages removed. Lines that
    cannot be read (a torn write) are dropped too: they may be theirs, and loading skips them anyway."""
    if not files.session.exists():
        return 0
    meta: list[str] = []
    kept_lines: list[tuple[str, Message]] = []
    pointer = 0
    for raw in files.session.read_bytes().splitlines():
        try:
            rec = json.loads(raw)
            if not isinstance(rec, dict):
                continue
            kind = rec.get("record")
            if kind == "meta":
                meta = [raw.decode("utf-8")]
            elif kind == "pointer" and type(rec.get("last_consolidated")) is int:  # noqa: E721
                if 0 <= rec["last_consolidated"] <= len(kept_lines):
                    pointer = rec["last_consolidated"]
            elif kind is None:
                kept_lines.append((raw.decode("utf-8"), Message.from_record(rec)))
        except (ValueError, TypeError, KeyError, UnicodeDecodeError):
            continue
    owners = _turn_owners([m for _, m in kept_lines])
    keep = [o != sender_id for o in owners]
    new_pointer = sum(keep[:pointer])
    lines = [*meta, *(line for (line, _), k in zip(kept_lines, keep) if k)]
    lines.append(json.dumps({"record": "pointer", "last_consolidated": new_pointer, "ts": time.time()},
                            separators=(",", ":")))
    write_atomic(files.session, "\n".join(lines) + "\n")
    return keep.count(False)


def drop_section(text: str, who: Member) -> str:
    """`text` (a MEMORY.md) without the `## <Name>` sections of this member."""
    heads = list(SECTION.finditer(text))
    bounds = zip(heads, [h.start() for h in heads[1:]] + [len(text)])
    wanted = {n.casefold() for n in who.names} | {f"id {who.id}"}
    cut = [(h.start(), end) for h, end in bounds
           if h[1].casefold() in wanted or f"(id {who.id})" in h[1]]
    for start, end in reversed(cut):
        text = text[:start] + text[end:]
    return text


def memory_sections(files: ChatFiles, who: Member) -> tuple[bool, int]:
    """(their section is in MEMORY.md, kept versions holding it)."""
    def has(path_text: str) -> bool:
        return drop_section(path_text, who) != path_text
    current = has(memfiles.read_memory(files))
    return current, sum(has(p.read_text(encoding="utf-8")) for p in memfiles.versions(files))


def drop_memory_sections(files: ChatFiles, who: Member) -> tuple[bool, int]:
    """Remove their section from MEMORY.md and every kept version (no new version is made: the old
    text must not survive); returns (removed from MEMORY.md, versions changed)."""
    text = memfiles.read_memory(files)
    current = False
    if (new := drop_section(text, who)) != text:
        write_atomic(files.memory, new)
        current = True
    changed = 0
    for path in memfiles.versions(files):
        old = path.read_text(encoding="utf-8")
        if (new := drop_section(old, who)) != old:
            write_atomic(path, new)
            changed += 1
    return current, changed


def history_parts(files: ChatFiles) -> tuple[str, list[str]]:
    """(text before the first entry, the entries each with its dated heading) of HISTORY.md."""
    try:
        text = files.history.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", []
    starts = [m.start() for m in ENTRY_HEADING.finditer(text)]
    if not starts:
        return text, []
    return text[:starts[0]], [text[a:b].strip() for a, b in zip(starts, [*starts[1:], len(text)])]


def write_history(files: ChatFiles, preamble: str, entries: Iterable[str]) -> None:
    """Replace HISTORY.md whole (atomically) with these entries."""
    body = "".join(f"{e.strip()}\n\n" for e in entries)
    write_atomic(files.history, (preamble.strip() + "\n\n" if preamble.strip() else "") + body)
