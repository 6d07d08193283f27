"""/voice [on | off | auto | reset]: whether this chat's replies are read out (kept in its settings.json).

    on      every reply of the model is a voice message, its text beside it
    off     replies are text
    auto    a voice note is answered with voice, a typed message with text (the default once speech is set up)
    reset   back to the owner's default (TUSK_VOICE_REPLIES)

In a group only its administrators change it. Without a speech engine (TUSK_TTS_MODEL or TUSK_TTS_COMMAND),
or in a chat whose platform plays no voice (the terminal), it says so and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeGuard

from bot.commands.base import ADMINS_ONLY, Command, CommandContext
from bot.events import ChatKey
from bot.speech.config import Mode, SpeechSettings

NOT_SET_UP = ("Voice replies are not set up here: the operator can set TUSK_TTS_MODEL (a speech model such as "
              "openai/tts-1) or TUSK_TTS_COMMAND (a local engine such as espeak-ng) to have replies read out.")
NO_VOICE_HERE = "This chat cannot play voice messages, so its replies stay text."
MEANING: dict[Mode, str] = {"on": "every reply is read out as a voice message, with its text beside it",
                            "off": "replies are text only",
                            "auto": "a voice note is answered with voice, a typed message with text"}
USAGE = "Use /voice on, /voice off, /voice auto, or /voice reset (the default)."


def voice_command(settings: SpeechSettings, speaks: Callable[[ChatKey], bool]) -> Command:
    """The /voice command; `speaks(key)`: the chat's platform can send voice messages."""

    async def run(ctx: CommandContext, args: str) -> str:
        if not settings.configured:
            return NOT_SET_UP
        if not speaks(ctx.key):
            return NO_VOICE_HERE
        current = ctx.prefs
        word = args.strip().lower()
        if not word:
            mode = current.voice or settings.replies
            how = "set with /voice" if current.voice else "the default"
            return f"Voice replies: {mode} ({how}): {MEANING[mode]}.\n{USAGE}"
        if word in ("reset", "default"):
            chosen: Mode | None = None
        elif _is_mode(word):
            chosen = word
        else:
            return USAGE
        if ctx.is_group and not ctx.may_erase:
            return ADMINS_ONLY.format(what="change how I answer")
        if current.voice != chosen:
            await ctx.chats.put_settings(ctx.chat, replace(current, voice=chosen))
        mode = chosen or settings.replies
        return f"Voice replies: {mode}{' (the default)' if chosen is None else ''}: {MEANING[mode]}."

    return Command("voice", "read replies out: '/voice on', '/voice off', '/voice auto'", run)


def _is_mode(word: str) -> TypeGuard[Mode]:
    return word in MEANING
