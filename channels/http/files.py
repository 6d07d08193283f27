"""Files sent to the HTTP API: `multipart/form-data` on POST /v1/chats/{chat_id}/messages.

    curl -H "Authorization: Bearer $TOKEN" \\
         -F text="what is in it?" -F user=alice -F file=@photo.jpg http://127.0.0.1:8765/v1/chats/alice/messages

Fields: `text` (the caption, may be empty), `user` (optional sender id), and up to `MAX_FILES`
`file` parts (a part named `voice` instead is a voice note: transcribed, and answered with voice where the
chat's /voice is auto). Each file is streamed straight into the chat's `media/` folder (memory/media.py),
which refuses it the moment it passes TUSK_MEDIA_MAX_MB, so nothing is held in memory whole.
The upload must arrive within `upload_deadline` (channels/http/limits.py), so a slow sender
cannot hold a connection for long; the text fields are capped like a JSON body.
"""

from __future__ import annotations

import mimetypes
from urllib.parse import unquote
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import BodyPartReader, web

from bot.errors import MediaRefused
from bot.events import Attachment, ChatKey, MediaKind
from memory.media import MediaStore

MAX_FILES = 4
FIELD_BYTES = 256 * 1024  # a caption or sender id
CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Upload:
    text: str
    user: str
    attachments: tuple[Attachment, ...]


async def _chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(CHUNK):
        yield chunk


async def _field(part: BodyPartReader) -> str:
    data = bytearray()
    async for chunk in _chunks(part):
        data += chunk
        if len(data) > FIELD_BYTES:
            raise web.HTTPRequestEntityTooLarge(max_size=FIELD_BYTES, actual_size=len(data),
                                                text=f"the {part.name} field is over {FIELD_BYTES // 1024} KiB")
    return data.decode("utf-8", errors="replace")


async def read_upload(request: web.Request, key: ChatKey, store: MediaStore) -> Upload:
    """The caption, sender and kept files of a multipart message; raises web.HTTPException (4xx) for a bad
    form, MediaRefused for a file the store does not take (the files kept before it are removed again)."""
    fields = {"text": "", "user": "http"}
    kept: list[Attachment] = []
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                raise web.HTTPBadRequest(text="nested multipart bodies are not taken")
            if part.filename is None:
                if part.name in fields:
                    fields[part.name] = await _field(part)
                else:
                    await part.release()
                continue
            if len(kept) == MAX_FILES:
                raise web.HTTPBadRequest(text=f"at most {MAX_FILES} files per message")
            name = unquote(part.filename) or "file"  # clients percent-encode what a quoted header cannot hold
            mime = part.headers.get("Content-Type") or mimetypes.guess_type(name)[0] or "application/octet-stream"
            if mime == "application/octet-stream":
                mime = mimetypes.guess_type(name)[0] or mime
            # a voice note (the console's, an app's recording)
            kind: MediaKind | None = "voice" if part.name == "voice" else None
            kept.append(await store.keep(key, _chunks(part), name=name, mime=mime, kind=kind))
    except (MediaRefused, web.HTTPException, ValueError):
        if kept:  # a message is taken whole or not at all: the files kept before the refused one go again
            await store.remove(key, [att.path for att in kept])
        raise
    user = fields["user"].strip() or "http"
    if len(user) > 200:
        raise web.HTTPBadRequest(text="user: at most 200 characters")
    if not kept and not fields["text"].strip():
        raise web.HTTPBadRequest(text="a multipart message needs a file part (or a text field)")
    return Upload(fields["text"], user, tuple(kept))
