"""Slack payloads to Tusk's events, and chat keys to places: pure functions, tested with hand-built dicts
(and `Seen`, the memory of messages already taken that makes doubled and retried events one).

    to_inbound(event, bot_user_id=..., thread_sessions=True)  -> InboundMessage | None
    command_to_inbound(payload, known_commands)               -> InboundMessage | None
    route_of(chat key, ref)                                   -> Route (channel, thread, response_url)

Which events carry a message for Tusk (real Slack sends many more than user messages):

    plain, file_share, thread_broadcast, me_message   a user's message (a /me message is what they said)
    message_changed (an edit)                         not answered again, and the session keeps the
                                                      first text; but a channel message edited within
                                                      EDIT_WINDOW to add Tusk's mention (Slack then
                                                      sends an `app_mention` with `edited`) is
                                                      answered unless it was answered before
    message_deleted, bot_message, any `bot_id`        nothing: no answer, nothing saved (bots, Tusk
    (Tusk's own), joins/leaves, huddles, unknown      itself included, are never answered: no loops);
                                                      a deletion does not erase what Tusk kept (/forget)
    empty `text` with `rich_text` blocks              the blocks' text (channels/slack/rich.py)

Chat ids are `D123` (a DM), `C123` (a channel, thread sessions off) or `C123-1700000000.000100`
(a thread): readable, plain folder names, and parsed back by `route_of`. Slack channel ids
never contain `-`. A message's `ref` (bot/events.py ReplyRef) holds the rest of where its replies go:
its ts (the "thinking" reaction's place), its thread, a slash command's response_url, the asker's team.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.events import ChatKey, InboundMessage, ReplyRef
from channels.slack.format import from_slack
from channels.slack.rich import rich_text

_KEPT_SUBTYPES = {None, "file_share", "thread_broadcast", "me_message"}  # user messages; no other subtype is one
EDIT_WINDOW = 600.0  # seconds after a message within which an edit adding Tusk's mention is answered


@dataclass(frozen=True, slots=True)
class Route:
    """Where a reply goes: a channel (and thread), or a slash command's response_url."""

    channel: str
    thread_ts: str | None = None
    response_url: str | None = None


class Seen:
    """The last `size` keys seen; `first(key)` is True only the first time."""

    def __init__(self, size: int = 4096) -> None:
        self._keys: OrderedDict[object, None] = OrderedDict()
        self._size = size

    def first(self, *keys: object) -> bool:
        new = not any(k in self._keys for k in keys)
        for k in keys:
            self._keys[k] = None
            self._keys.move_to_end(k)
        while len(self._keys) > self._size:
            self._keys.popitem(last=False)
        return new


def chat_id(channel: str, thread_ts: str | None) -> str:
    """`C123` or `C123-1700000000.000100`: readable, and a plain folder name."""
    return f"{channel}-{thread_ts}" if thread_ts else channel


def route_of(key: ChatKey, ref: ReplyRef | None = None) -> Route:
    """Where a reply goes: the place a chat key names (the inverse of `chat_id`), or within that channel the
    thread and response_url of the message it answers (`ref`)."""
    channel, _, thread_ts = key.chat_id.partition("-")
    return Route(channel, thread_ts or None) if ref is None else Route(channel, ref.thread, ref.interaction)


def _direct(event: dict[str, Any]) -> bool:
    """A one-to-one conversation with the bot: channel_type im (app_mention has none; DM ids start with D)."""
    if "channel_type" in event:
        return event["channel_type"] == "im"
    return str(event.get("channel", "")).startswith("D")


def _thread(event: dict[str, Any], thread_sessions: bool) -> str | None:
    """The thread a reply belongs in: the message's own, or (channels, thread sessions) one it starts."""
    if event.get("thread_ts"):
        return event["thread_ts"]
    return None if _direct(event) or not thread_sessions else event.get("ts")


def to_inbound(event: dict[str, Any], *, bot_user_id: str | None,
               thread_sessions: bool = True) -> InboundMessage | None:
    """The message a `message` or `app_mention` event carries for Tusk, or None if it carries none."""
    kind, user, channel = event.get("type"), event.get("user"), event.get("channel")
    if kind not in ("message", "app_mention") or not user or not channel or not event.get("ts"):
        return None
    if event.get("subtype") not in _KEPT_SUBTYPES or event.get("bot_id") or event.get("hidden"):
        return None  # bots (this one included), edits, deletions, joins, ...
    if event.get("edited") and not _mention_added(event):
        return None
    if user == bot_user_id:
        return None
    direct = _direct(event)
    if kind == "message" and not direct:
        return _overheard(event, bot_user_id, thread_sessions)
    thread = _thread(event, thread_sessions)  # where the answer goes: its DM, its thread, or a thread under it
    text = from_slack(raw_text(event), bot_user_id)
    ref = ReplyRef(message=event["ts"], thread=thread, team=event.get("user_team") or event.get("team"))
    return InboundMessage(ChatKey("slack", chat_id(channel, thread if thread_sessions else None)), text,
                          sender_id=user, is_group=not direct, ts=_seconds(event["ts"]), ref=ref)


def _overheard(event: dict[str, Any], bot_user_id: str | None, thread_sessions: bool) -> InboundMessage | None:
    """A channel message not addressed to Tusk (`addressed=False`: kept if the chat listens, /listen), in the
    chat it belongs to: the channel, or with thread sessions its thread (top-level chatter then has no chat).
    A message that mentions Tusk is left to its `app_mention` event."""
    if bot_user_id and f"<@{bot_user_id}" in raw_text(event):
        return None
    thread = event.get("thread_ts") if thread_sessions else None
    if thread_sessions and not thread:
        return None
    return InboundMessage(ChatKey("slack", chat_id(event["channel"], thread)),
                          from_slack(raw_text(event), bot_user_id), sender_id=event["user"], is_group=True,
                          ts=_seconds(event["ts"]), addressed=False)


def raw_text(event: dict[str, Any]) -> str:
    """A message's text as Slack writes it: `text`, else what its rich_text blocks say."""
    text = event.get("text")
    return text if isinstance(text, str) and text.strip() else rich_text(event.get("blocks"))


def _mention_added(event: dict[str, Any]) -> bool:
    """An `app_mention` for an edit, soon after the message: the edit may have added the mention (whether
    the message was answered before is the channel's to know)."""
    edited = event.get("edited")
    if event.get("type") != "app_mention" or not isinstance(edited, dict):
        return False
    try:
        return 0 <= float(edited.get("ts") or 0) - float(event["ts"]) <= EDIT_WINDOW
    except (TypeError, ValueError):
        return False


def _seconds(ts: str) -> float:
    try:
        return float(ts)
    except (TypeError, ValueError):
        return time.time()


def command_text(command: str, text: str, known: Iterable[str]) -> str:
    """The chat command a slash command stands for: `/memory undo` as is, `/tusk memory undo` as `/memory undo`."""
    name, text = command.lstrip("/").lower(), text.strip()
    if name in set(known):
        return f"/{name} {text}".strip()
    sub, _, rest = text.partition(" ")
    return f"/{sub.lstrip('/').lower()} {rest.strip()}".strip() if sub else "/help"


def command_to_inbound(payload: dict[str, Any], known: Iterable[str]) -> InboundMessage | None:
    """The message a slash command payload carries: its chat is the channel it was typed in."""
    user, channel = payload.get("user_id"), payload.get("channel_id")
    if not user or not channel or not payload.get("command"):
        return None
    direct = payload.get("channel_name") == "directmessage"
    text = command_text(payload["command"], payload.get("text") or "", known)
    url = payload.get("response_url")  # the answer goes there, to the asker alone
    return InboundMessage(ChatKey("slack", channel), text, sender_id=user, is_group=not direct,
                          ref=ReplyRef(interaction=url) if url else None)


@dataclass(frozen=True, slots=True)
class Sender:
    """What users.info says of a sender: a name to show the model, and workspace admin (or owner) status."""

    name: str = ""
    is_admin: bool = False


def sender_of(user: dict[str, Any]) -> Sender:
    """The Sender in a users.info `user` object."""
    profile = user.get("profile") or {}
    name = profile.get("display_name") or profile.get("real_name") or user.get("real_name") or user.get("name") or ""
    admin = any(user.get(flag) for flag in ("is_admin", "is_owner", "is_primary_owner"))
    return Sender(name=name, is_admin=admin)
