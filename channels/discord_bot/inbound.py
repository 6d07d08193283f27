"""A Discord message as Tusk reads it: `to_inbound(message, me_id) -> InboundMessage | None` (pure).

Which messages are turns (Discord's message types, docs "Message Object" -> "Message Types"):
    default (0), reply (19)       yes; every other type is a system message and never a turn: member joins (7),
                                  pins (6), boosts (8-11), thread created (18), thread starter (21), calls, ...
    from a bot or a webhook       never (no bot-to-bot loops; the bot's own messages included)
    with nothing to read          never: no text, file, sticker, embed or forwarded message. This is what guild
                                  messages look like when the Message Content intent is not granted (Discord
                                  empties `content`, `embeds`, `attachments` unless the bot is mentioned): they
                                  are neither answered nor kept.
What the model reads:
    mentions                      `<@id>` / `<@!id>` -> `@Display Name`, `<@&id>` -> `@role`, `<#id>` -> `#channel`;
                                  the bot's own mention is removed
    a reply                       `(replying to Name: "their text")` before the text (at most QUOTE characters)
    stickers, embeds, forwards    `[sticker: name]`, `[embed: title: description]`, `[forwarded: text]`
A slash command becomes the text a user would type (`command_to_inbound`).
Edits (MESSAGE_UPDATE) and deletions are not turns: the answer given stands, the session keeps what was sent.
"""

from __future__ import annotations

import re
from typing import Any

import discord

from bot.events import ChatKey, InboundMessage

TURNS = (discord.MessageType.default, discord.MessageType.reply)
QUOTE = 300  # characters of a replied-to message shown to the model
_MENTION = re.compile(r"<(@[!&]?|#)(\d{15,20})>")


def _addressed(message: Any, me_id: int) -> bool:
    """In a guild: does the message mention the bot or reply to one of its messages?"""
    if any(user.id == me_id for user in message.mentions):
        return True
    resolved = message.reference.resolved if message.reference is not None else None
    author = getattr(resolved, "author", None)  # a deleted message has none
    return author is not None and author.id == me_id


def _manages_messages(channel: Any, author: Any) -> bool:
    """Manage Messages here: channel overwrites counted, a thread asks its parent."""
    if isinstance(channel, discord.PartialMessageable):  # not in the cache: the guild-wide roles
        perms = getattr(author, "guild_permissions", None)
    else:
        try:
            perms = channel.permissions_for(author)
        except discord.ClientException:  # a thread whose parent is not cached
            perms = getattr(author, "guild_permissions", None)
    return bool(perms is not None and perms.manage_messages)


def readable(text: str, message: Any, me_id: int) -> str:
    """`text` (of `message`) with the bot's mention removed and other mentions as names, as Discord shows them."""
    text = re.sub(rf"[ \t]*<@!?{me_id}>", "", text)
    guild = message.guild
    users = {u.id: u for u in message.mentions}
    roles = {r.id: r for r in getattr(message, "role_mentions", ())}

    def name(match: re.Match[str]) -> str:
        kind, id_ = match.group(1), int(match.group(2))
        if kind == "@&":
            role = roles.get(id_) or (guild.get_role(id_) if guild else None)
            return f"@{role.name}" if role else "@unknown-role"
        if kind == "#":
            channel = guild.get_channel_or_thread(id_) if guild else None
            return f"#{channel.name}" if channel else "#unknown-channel"
        user = users.get(id_) or (guild.get_member(id_) if guild else None)
        return f"@{user.display_name}" if user else "@unknown-user"

    return _MENTION.sub(name, text).strip()


def _extras(message: Any, me_id: int) -> list[str]:
    """What a message carries besides its text, as short lines: stickers, embeds, forwarded messages."""
    lines = [f"[sticker: {s.name}]" for s in getattr(message, "stickers", ())]
    for embed in getattr(message, "embeds", ()):
        parts = [p for p in (embed.title, embed.description) if p]
        if parts:
            lines.append(f"[embed: {': '.join(parts)}]")
    for snapshot in getattr(message, "message_snapshots", ()) or ():
        if snapshot.content:
            lines.append(f"[forwarded: {readable(snapshot.content, message, me_id)}]")
    return lines


def _quote(message: Any, me_id: int) -> str:
    """`(replying to Name: "text")` for a reply whose message Discord sent along; "" otherwise."""
    resolved = message.reference.resolved if message.reference is not None else None
    author = getattr(resolved, "author", None)
    if resolved is None or author is None:  # not a reply, or the replied-to message was deleted
        return ""
    text = " ".join(readable(resolved.content or "", resolved, me_id).split())
    text = text if len(text) <= QUOTE else text[:QUOTE - 1] + "…"
    return f'(replying to {author.display_name}: "{text}")' if text else f"(replying to {author.display_name})"


def guild_id(message: Any) -> int | None:
    """The message's guild, also for a guild not (or no longer) in the cache; None in a DM."""
    if message.guild is not None:
        return message.guild.id
    return getattr(message.channel, "guild_id", None)  # a PartialMessageable knows it; a DMChannel has none


def to_inbound(message: Any, me_id: int) -> InboundMessage | None:
    """The InboundMessage for a Discord message, or None if Tusk should not answer nor keep it.

    `message` is a `discord.Message` (only plain attributes are read, so tests hand-build
    them). Attachments without text become an empty text; the channel adds the files it downloads
    (channels/discord_bot/media.py). The allow-list needs the channel's settings and is checked there.
    """
    author = message.author
    if author.bot or message.webhook_id is not None or message.type not in TURNS:
        return None
    body = "\n".join(p for p in (readable(message.content, message, me_id), *_extras(message, me_id)) if p)
    if not body and not message.attachments:  # nothing to read: no Message Content intent, or an empty message
        return None
    command = body.startswith("/")  # "@bot /forget" as a reply stays a command
    quote = _quote(message, me_id) if message.type == discord.MessageType.reply and not command else ""
    is_group = guild_id(message) is not None
    addressed = not is_group or _addressed(message, me_id)  # if not, the chat's /listen decides (bot/agent.py)
    return InboundMessage(ChatKey("discord", str(message.channel.id)), f"{quote}\n{body}".strip(),
                          sender_id=str(author.id), sender_name=author.display_name, is_group=is_group,
                          sender_is_admin=is_group and _manages_messages(message.channel, author),
                          ts=message.created_at.timestamp(), addressed=addressed)


def command_to_inbound(interaction: Any, name: str, args: str) -> InboundMessage | None:
    """The InboundMessage for a slash command: the same text a user would type ("/memory undo")."""
    if interaction.channel_id is None:
        return None
    is_group = interaction.guild_id is not None
    user = interaction.user
    return InboundMessage(ChatKey("discord", str(interaction.channel_id)), f"/{name} {args}".strip(),
                          sender_id=str(user.id), sender_name=user.display_name, is_group=is_group,
                          sender_is_admin=is_group and interaction.permissions.manage_messages,
                          ts=interaction.created_at.timestamp())
