"""Tusk's chat commands (/memory, /forget, ...) as Discord application commands: each invocation handed on as
the typed command would be ("/memory undo"), with one optional free-text option where the command takes one.

    tree.add_command(slash("memory", "what I remember", on_command))   # on_command(interaction, name, text)
    ephemeral = msg.is_group and name in PRIVATE
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Optional

import discord
from discord import app_commands

NO_ARGUMENTS = frozenset({"help", "status", "new", "stop"})  # every other command has one optional free-text option,
ARGUMENTS = {  # named and described here if known; its text follows the command ("/memory undo")
    "memory": ("what", "'history 3' for the last 3 history entries, or 'undo'"),
    "forget": ("confirm", "type 'confirm' to erase everything I keep about this chat"),
    "voice": ("mode", "on, off, auto (a voice note gets voice) or reset"),
}
PRIVATE = frozenset({"help", "status", "memory", "stop"})  # in guilds only the asker sees these answers

OnCommand = Callable[[discord.Interaction, str, str], Awaitable[None]]


def slash(name: str, summary: str, on_command: OnCommand) -> app_commands.Command:
    """An application command whose invocation is handed to `on_command(interaction, name, text)`."""
    async def plain(interaction: discord.Interaction) -> None:
        await on_command(interaction, name, "")

    async def with_text(interaction: discord.Interaction, text: Optional[str] = None) -> None:
        await on_command(interaction, name, text or "")

    callback: Any = plain
    if name not in NO_ARGUMENTS:
        option, description = ARGUMENTS.get(name, ("text", f"what follows /{name} (see /help)"))
        callback = app_commands.rename(text=option)(app_commands.describe(text=description)(with_text))
    return app_commands.Command(name=name, description=summary[:100] or name, callback=callback)
