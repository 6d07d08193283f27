"""Slack payloads to Tusk's events, and chat keys to places: pure functions, tested with hand-built dicts.

    to_inbound(event, bot_user_id=..., thread_sessions=True)  -> InboundMessage | None
    command_to_inbound(payload, known_commands)               -> InboundMessage | None
    reply_route(event, thread_sessions) / route_of(chat key)  -> Route (channel, thread, response_url)

Chat ids are `D123` (a DM), `C123` (a channel, thread sessions off) or `C123-1700000000.000100`
(a thread): readable, plain folder names, and parsed back by `route_of`. Slack channel ids
never contain `-`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.events import ChatKey, InboundMessage
from channels.slack.format import from_slack

_KEPT_SUBTYPES = {None, "file_share", "thread_broadcast"}  # user messages; every other subtype is not one


@dataclass(frozen=True, slots=True)
class Route:
    """Where a reply goes: a channel (and thread), or a slash command's response_url."""

    channel: str
    thread_ts: str | None = None
    response_url: str | None = None


def chat_id(channel: str, thread_ts: str | None) -> str:
    """`C123` or `C123-1700000000.000100`: readable, and a plain folder name."""
    return f"{channel}-{thread_ts}" if thread_ts else channel


def route_of(key: ChatKey) -> Route:
    """The place a chat key names (the inverse of `chat_id`), for messages that answer nothing."""
    channel, _, thread_ts = key.chat_id.partition("-")
    return Route(channel, thread_ts or None)


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


def reply_route(event: dict[str, Any], thread_sessions: bool) -> Route:
    """Where the answer to a message event goes: its DM, its thread, or (thread sessions) a thread under it."""
    return Route(event["channel"], _thread(event, thread_sessions))


def to_inbound(event: dict[str, Any], *, bot_user_id: str | None,
               thread_sessions: bool = True) -> InboundMessage | None:
    """The message a `message` or `app_mention` event carries for Tusk, or None if it carries none."""
    kind, user, channel = event.get("type"), event.get("user"), event.get("channel")
    if kind not in ("message", "app_mention") or not user or not channel or not event.get("ts"):
        return None
    if event.get("subtype") not in _KEPT_SUBTYPES or event.get("bot_id") or event.get("hidden") or event.get("edited"):
        return None  # bots (this one included), edits, deletions, joins, ...
    if user == bot_user_id:
        return None
    direct = _direct(event)
    if kind == "message" and not direct:
        return _overheard(event, bot_user_id, thread_sessions)
    thread = _thread(event, thread_sessions) if thread_sessions else None
    text = from_slack(event.get("text") or "", bot_user_id)
    return InboundMessage(ChatKey("slack", chat_id(channel, thread)), text, sender_id=user, is_group=not direct,
                          ts=_seconds(event["ts"]))


def _overheard(event: dict[str, Any], bot_user_id: str | None, thread_sessions: bool) -> InboundMessage | None:
    """A channel message not addressed to Tusk (`addressed=False`: kept if the chat listens, /listen), in the
    chat it belongs to: the channel, or with thread sessions its thread (top-level chatter then has no chat).
    A message that mentions Tusk is left to its `app_mention` event."""
    if bot_user_id and f"<@{bot_user_id}" in (event.get("text") or ""):
        return None
    thread = event.get("thread_ts") if thread_sessions else None
    if thread_sessions and not thread:
        return None
    return InboundMessage(ChatKey("slack", chat_id(event["channel"], thread)),
                          from_slack(event.get("text") or "", bot_user_id), sender_id=event["user"], is_group=True,
                          ts=_seconds(event["ts"]), addressed=False)


def _seconds(ts: str) -> float:
    try:
        return float(ts)
    except ValueError:
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
    return InboundMessage(ChatKey("slack", channel), text, sender_id=user, is_group=not direct)


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
