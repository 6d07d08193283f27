"""The attachments of a Discord message, as `Remote`s for channels/media_in.py.

Every attachment is taken (a message may carry up to ten); a voice message (an attachment with a
duration and a waveform, `is_voice_message()`) is kind voice, the rest follow their content type. The
declared `size` is checked against the cap before anything is fetched; the bytes are streamed from the
attachment's `url` (the CDN's signed link, which needs no token: the bot token is never sent there).
The attachment id is the source id.
"""

from __future__ import annotations

import functools
import mimetypes
from typing import Any

from channels.media_in import MediaIntake, Remote


def files_of(message: Any, intake: MediaIntake) -> list[Remote]:
    """The files of `message` (a `discord.Message`; only plain attributes are read)."""
    found = []
    for attachment in message.attachments:
        voice = attachment.is_voice_message()
        mime = attachment.content_type or mimetypes.guess_type(attachment.filename)[0] or "application/octet-stream"
        found.append(Remote(str(attachment.id), attachment.filename, mime.split(";")[0].strip(),
                            functools.partial(intake.stream, attachment.url), kind="voice" if voice else None,
                            size=attachment.size, duration=attachment.duration))
    return found
