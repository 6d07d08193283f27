"""A message's files into its turn: read (bot/media/reader.py), or refused with the reason.

    attach(reader, msg, max_chars, send) -> Attached
      no reader (the channel takes no files)   MediaRefused: "I can't take files here: only text."
      a caption over TUSK_MAX_MESSAGE_CHARS     MediaRefused naming the limit
      a file Tusk does not take                 MediaRefused from the reader, naming the limit or setting
      read                                      the transcript note (TUSK_SHOW_TRANSCRIPT) is sent first,
                                                before the reply; the agent converses with `Attached.prompt`

On a refusal nothing is saved or sent to the model; the caption is never a command.
"""

from __future__ import annotations

from bot.delivery import Send
from bot.errors import MediaRefused
from bot.events import InboundMessage, OutboundMessage
from bot.media.reader import Attached, MediaReader
from bot.replies import NO_MEDIA_REPLY


async def attach(reader: MediaReader | None, msg: InboundMessage, max_chars: int,
                 send: Send) -> Attached:
    """`msg`'s files read into this turn; `MediaRefused`, whose text is the user's answer, when they are not."""
    if reader is None:
        raise MediaRefused(NO_MEDIA_REPLY)
    if len(msg.text) > max_chars:
        raise MediaRefused(f"That caption is {len(msg.text):,} characters long; I can read up to {max_chars:,}.")
    attached = await reader.read(msg)
    if attached.note:  # the transcript, shown before the reply (TUSK_SHOW_TRANSCRIPT)
        await send(OutboundMessage.answer(msg, attached.note, verbatim=True))
    return attached
