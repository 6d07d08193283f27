"""Discord's payloads as the fake sends them: ids (snowflakes), users, guilds with roles, channels and threads.

Shapes follow discord.com/developers/docs (User, Guild, Channel, Thread, Guild Member objects); only the fields
discord.py reads are filled. Used by tests/fakes/fake_discord.py, whose names re-export these.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

MANAGE_MESSAGES = 1 << 13
MESSAGE_CONTENT = 1 << 15  # the gateway intent
EVERYONE = (1 << 10) | (1 << 11) | (1 << 16)  # view channel, send messages, read message history
IS_VOICE_MESSAGE = 1 << 13  # message flag
GATEWAY_MESSAGE_CONTENT, GATEWAY_MESSAGE_CONTENT_LIMITED = 1 << 18, 1 << 19  # application flags
CONTENT_FIELDS = {"content": "", "embeds": [], "attachments": [], "components": []}  # emptied without the intent
DISCORD_EPOCH_MS = 1_420_070_400_000
_counter = itertools.count()


def snowflake() -> str:
    """A unique id that dates from now, as Discord's do (discord.py reads `created_at` from it)."""
    return str((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22 | next(_counter) % (1 << 22))


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


def user(name: str, *, bot: bool = False, id: str | None = None) -> dict[str, Any]:
    return {"id": id or snowflake(), "username": name, "global_name": name.title(), "discriminator": "0",
            "avatar": None, "bot": bot}


@dataclass
class Guild:
    id: str = field(default_factory=snowflake)
    name: str = "Test guild"
    owner_id: str = field(default_factory=snowflake)  # nobody the tests use: owners may do anything
    channels: list[dict[str, Any]] = field(default_factory=list)
    threads: list[dict[str, Any]] = field(default_factory=list)
    roles: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.add_role("@everyone", EVERYONE, id=self.id)

    def add_role(self, name: str, permissions: int, *, id: str | None = None) -> str:
        role = {"id": id or snowflake(), "name": name, "permissions": str(permissions), "position": len(self.roles),
                "color": 0, "hoist": False, "managed": False, "mentionable": False}
        self.roles.append(role)
        return role["id"]

    def add_channel(self, name: str = "general", *, type: int = 0) -> str:
        """A text channel (type 0), or a forum (15) whose posts are threads."""
        channel = {"id": snowflake(), "type": type, "guild_id": self.id, "name": name, "position": len(self.channels),
                   "permission_overwrites": [], "nsfw": False, "parent_id": None, "topic": None}
        self.channels.append(channel)
        return channel["id"]

    def add_thread(self, parent: str, name: str = "a thread", *, private: bool = False) -> str:
        """A public thread (type 11; a forum's posts are these too) or a private one (12)."""
        thread = {"id": snowflake(), "type": 12 if private else 11, "guild_id": self.id, "parent_id": parent,
                  "owner_id": self.owner_id, "name": name, "message_count": 0, "member_count": 1, "rate_limit_per_user": 0,
                  "thread_metadata": {"archived": False, "auto_archive_duration": 1440, "archive_timestamp": now(),
                                      "locked": False}}
        self.threads.append(thread)
        return thread["id"]

    def payload(self, bot: dict[str, Any]) -> dict[str, Any]:
        me = {"user": bot, "roles": [], "joined_at": now(), "deaf": False, "mute": False, "flags": 0}
        return {"id": self.id, "name": self.name, "owner_id": self.owner_id, "unavailable": False, "member_count": 2,
                "roles": self.roles, "channels": self.channels, "threads": self.threads, "members": [me],
                "features": [], "emojis": [], "stickers": [], "large": False, "joined_at": now()}


def member(roles: list[str], **extra: Any) -> dict[str, Any]:
    return {"roles": roles, "joined_at": now(), "deaf": False, "mute": False, "flags": 0, "nick": None, **extra}
