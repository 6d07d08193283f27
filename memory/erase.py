"""Taking one member out of a group chat (`/forget me`): pure rules, no I/O, no LLM; bot/commands/erasure.py
has the store write the result.

    the session    the member's whole turns dropped (their message, the bot's reply, its tool steps),
                   with a pointer recomputed for the kept messages, so the history stays legal and
                   the consolidated part stays consolidated (`without_turns`)
    MEMORY.md      their `## <Name>` section dropped, in the current text and in every kept version
                   (an erasure that a `/memory undo` could bring back is none: `drop_section`)
    HISTORY.md     which entries name them (`Member.mentioned_in`); how to rewrite them is the caller's

A member is known by their sender id and every name they were shown under in this chat.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory.session import Message
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


def members(messages: Sequence[Message]) -> dict[str, Member]:
    """Everyone who wrote in this chat's session, by sender id."""
    shown = labels(messages)
    names: dict[str, list[str]] = {}
    for m in messages:
        if m.role == "user" and m.sender_id in shown:
            found = names.setdefault(m.sender_id, [])
            for name in (m.sender_name or "", shown[m.sender_id]):
                if name.strip() and name not in found:
                    found.append(name)
    return {sid: Member(sid, tuple(reversed(n))) for sid, n in names.items()}  # newest name first


def member(messages: Sequence[Message], sender_id: str, name: str = "") -> Member:
    """The member with this id (with `name` as well, e.g. the sender's current name)."""
    known = members(messages).get(sender_id, Member(sender_id, ()))
    return Member(sender_id, tuple(dict.fromkeys(n for n in (name, *known.names) if n.strip())))


def _turn_owners(messages: Sequence[Message]) -> list[str | None]:
    """For each message, the sender of the turn it belongs to (the user message that opened it)."""
    owner: str | None = None
    out = []
    for m in messages:
        if m.role == "user":
            owner = m.sender_id
        out.append(owner)
    return out


def session_share(messages: Sequence[Message], sender_id: str) -> tuple[int, int]:
    """(turns, messages) of this member in the session."""
    owners = _turn_owners(messages)
    turns = sum(1 for m, o in zip(messages, owners) if m.role == "user" and o == sender_id)
    return turns, sum(1 for o in owners if o == sender_id)


def media_of(messages: Sequence[Message], sender_id: str) -> list[str]:
    """The kept files this member sent: the `media/<file>` paths of their messages (only plain names in the
    chat's own media: a hand-edited path cannot point elsewhere)."""
    found: dict[str, None] = {}
    for m in messages:
        if m.role == "user" and m.sender_id == sender_id:
            for rel in m.media:
                name = rel.removeprefix("media/")
                if rel.startswith("media/") and name and "/" not in name and name not in (".", ".."):
                    found[rel] = None
    return list(found)


def without_turns(messages: Sequence[Message], pointer: int, sender_id: str) -> tuple[list[Message], int, int]:
    """The session without this member's whole turns: (kept messages, their pointer, messages removed)."""
    keep = [o != sender_id for o in _turn_owners(messages)]
    kept = [m for m, k in zip(messages, keep) if k]
    return kept, sum(keep[:pointer]), keep.count(False)


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
