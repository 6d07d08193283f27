"""Files that came with a message, turned into the turn the model sees (issue 18).

    channel   downloads into the chat's media/ (memory/media.py), publishes InboundMessage.attachments
    reader    MediaReader.read(msg) -> Attached: per file, by kind
        voice/audio  transcribed (voice.py: litellm's transcription API) -> "[voice 0:42] <transcript>"
        image        vision model: scaled down (images.py) and sent as an image part in this turn only;
                     else TUSK_VISION_MODEL describes it into text; else a clear reply
        document     text files and PDFs (documents.py) read into this turn as a delimited block
                     framed as data; the session keeps name, size and a bounded excerpt
    turn      attach(reader, msg, ...) (turn.py): the files read, the transcript note sent first, or the
              reason they are not taken (`MediaRefused`)
    agent     saves `Attached.saved` (placeholders, transcripts, excerpts + the caption) with the file
              paths, sends `Attached.prompt` plus `Attached.images` in this turn's request only

A file Tusk will not take raises `MediaRefused`, whose text is the user's answer.
"""

from bot.media.reader import Attached, MediaReader, MediaSettings

__all__ = ["Attached", "MediaReader", "MediaSettings"]
