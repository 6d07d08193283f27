"""A reply read out, as Discord's voice message: one OGG/Opus attachment with its duration and waveform, the
message flagged IS_VOICE_MESSAGE (1 << 13).

Discord plays such a message with its own player; it may carry nothing else (no content, embeds or other
files), so the reply's text always follows as a message of its own (bot/speech/replies.py). discord.py 2.7
reads voice messages (`Attachment.is_voice_message()`) but does not send them: `VoiceFile` is its `File`
with the two attachment fields Discord wants (`duration_secs`, `waveform`: base64 of up to 256 bytes), and
the message goes through discord.py's own HTTP client (`http.send_message`: rate limits, retries, the
multipart upload with `payload_json`) with the flag set and a nonce Discord enforces (which discord.py adds only
in its higher-level sends). In a guild the voice quotes the question.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import discord
from discord.http import handle_message_parameters

from bot.events import SpokenAudio

FILE_NAME = "voice-message.ogg"
MAX_BYTES = 10 * 1024 * 1024  # what every bot may upload


class VoiceFile(discord.File):
    """An attachment that is a voice message: `duration_secs` and `waveform` in its entry of `attachments`."""

    def __init__(self, audio: SpokenAudio) -> None:
        super().__init__(io.BytesIO(audio.data), filename=FILE_NAME)
        self.duration_secs = round(audio.duration, 3)
        self.waveform = base64.b64encode(audio.waveform).decode()

    def to_dict(self, index: int) -> dict[str, Any]:
        return {**super().to_dict(index), "duration_secs": self.duration_secs, "waveform": self.waveform}


async def send(client: discord.Client, channel_id: int, audio: SpokenAudio,
               reference: discord.MessageReference | None, nonce: str) -> None:
    """Post the voice message with `nonce` (enforced: channels/discord_bot/nonces.py); discord.py's HTTPException
    (Discord's 50173: no voice messages in this channel) and RateLimited pass to the caller."""
    if len(audio.data) > MAX_BYTES:
        raise discord.InvalidData(f"the spoken reply is {len(audio.data):,} bytes, over Discord's 10 MB")
    quoted = reference.to_dict() if reference else discord.utils.MISSING
    with handle_message_parameters(file=VoiceFile(audio), flags=discord.MessageFlags(voice=True),
                                   message_reference=quoted, nonce=nonce) as params:
        await client.http.send_message(channel_id, params=params)
