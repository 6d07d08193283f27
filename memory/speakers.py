"""Who said what, in the form the model reads it (the prompt's history, the consolidation transcript).

In a group chat each stored user message is shown as `Name: text`, the name as the platform
showed it when the message was written (`Message.sender_name`). Where two members of the chat
share a name, both are shown with their id: `Alice (id 42): text`. A member without a name is
`id 42`. Messages stored without a sender (files older than senders) are shown as they are.
Nothing here changes what is stored.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace

from memory.session import Message

SELF_ID = "tusk"  # the sender id of turns Tusk starts itself (reminders, task results): no member


def _member(m: Message) -> bool:
    return m.role == "user" and m.sender_id is not None and m.sender_id != SELF_ID


def labels(messages: Iterable[Message], extra: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """Sender id -> how the model sees them: their latest name, with the id where names collide."""
    names: dict[str, str] = {}
    for m in messages:
        if m.sender_id is not None and _member(m):
            names[m.sender_id] = (m.sender_name or "").strip() or names.get(m.sender_id, "")
    for sender_id, name in extra:
        if sender_id and sender_id != SELF_ID:
            names[sender_id] = name.strip() or names.get(sender_id, "")
    ids_by_name: defaultdict[str, set[str]] = defaultdict(set)
    for sender_id, name in names.items():
        ids_by_name[name.casefold()].add(sender_id)
    return {sender_id: label(sender_id, name, shared=len(ids_by_name[name.casefold()]) > 1)
            for sender_id, name in names.items()}


def label(sender_id: str, name: str, shared: bool = False) -> str:
    """`Alice`, or `Alice (id 42)` when another member has the same name, or `id 42` without a name."""
    if not name:
        return f"id {sender_id}"
    return f"{name} (id {sender_id})" if shared else name


def speakers(messages: Iterable[Message]) -> set[str]:
    """The distinct sender ids of the user messages."""
    return {m.sender_id for m in messages if m.sender_id is not None and _member(m)}


def named(messages: Sequence[Message], extra: Iterable[tuple[str, str]] = ()) -> list[Message]:
    """The messages with each user message's text prefixed by its speaker (`Name: text`)."""
    who = labels(messages, extra)
    return [replace(m, content=f"{who[m.sender_id]}: {m.content}")
            if m.sender_id is not None and _member(m) and m.content else m for m in messages]
