"""Replies read out, on the HTTP API: the audio kept in the chat's media/ and linked from the answer.

    POST /v1/chats/{chat}/messages   -> {"replies": [...], "voice": [{"url": "/v1/chats/{chat}/voice/<name>",
                                         "mime_type": "audio/ogg", "duration_secs": 3.9, "bytes": 15537}]}
    GET  /v1/chats/{chat}/voice/{name}   the OGG/Opus file, with the same token as the rest of the API (an
                                         owner's API key reaches the files of the chats its prefix names)

The file is kept like a received one (memory/media.py: capped per chat, deleted with the chat by /forget),
under a name nobody can guess (`...-<random>-spoken-reply.ogg`). `voice` is present only when a reply was
read out (bot/speech/); the OpenAI-compatible endpoint puts the same object on its message as `tusk_voice`.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from aiohttp import web

from bot.errors import DeliveryError, MediaRefused
from bot.events import ChatKey, OutboundVoice
from memory.media import MediaStore, chunks_of
from memory.paths import UnsafePathError

NAME = "spoken-reply.ogg"
FILE = re.compile(r"\d{8}-\d{6}-[0-9a-f]{12}-spoken-reply\.ogg")
PATH = re.compile(r"/v1/chats/([^/]+)/voice/[^/]+")


def url_of(key: ChatKey, name: str) -> str:
    return f"/v1/chats/{quote(key.chat_id, safe='')}/voice/{name}"


async def keep(store: MediaStore | None, msg: OutboundVoice) -> dict[str, Any]:
    """Keep the voice message's audio in the chat's media/; its reference for the answer."""
    if store is None:
        raise DeliveryError("this server keeps no files (no media store): the reply goes as text")
    audio = msg.audio
    try:
        kept = await store.keep(msg.key, chunks_of(audio.data), name=NAME, mime=audio.mime, kind="audio",
                                size=len(audio.data), duration=audio.duration)
    except (MediaRefused, OSError) as exc:
        raise DeliveryError(f"the spoken reply could not be kept: {exc}") from exc
    name = kept.path.removeprefix("media/")
    return {"url": url_of(msg.key, name), "mime_type": audio.mime, "duration_secs": round(audio.duration, 3),
            "bytes": len(audio.data)}


async def serve(store: MediaStore | None, key: ChatKey, name: str) -> web.Response:
    """A spoken reply's file (404 for any other name, a missing file, or a link in its place)."""
    if store is None or not FILE.fullmatch(name):
        raise web.HTTPNotFound(text="no such spoken reply")
    try:
        data = b"".join([chunk async for chunk in store.read(key, f"media/{name}")])
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        raise web.HTTPNotFound(text="no such spoken reply (gone with the chat's older files, or never kept)") from None
    return web.Response(body=data, content_type="audio/ogg")
