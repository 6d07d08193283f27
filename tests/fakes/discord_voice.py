"""Messages with files for the fake Discord: the multipart form discord.py sends, and voice messages checked as
Discord checks them.

    body, files = await read_form(request)     # payload_json + files[n], as POST /channels/{id}/messages takes them
    refusal = voice_refusal(body, files)      # None, or Discord's error body (code 50159/50160/50161/...)

A message flagged IS_VOICE_MESSAGE (1 << 13) must hold exactly one attachment and nothing else (no content,
embeds, stickers, components or poll); that attachment must carry `duration_secs` (a number) and `waveform`
(base64 of at most 256 bytes), be an OGG file with one Opus stream (tests/fakes/voice_check.py) whose
length matches `duration_secs` within a second, and fit the 10 MiB a bot may upload.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from aiohttp import web

from tests.fakes.discord_payloads import IS_VOICE_MESSAGE
from tests.fakes.voice_check import OggOpus, ogg_opus

UPLOAD_LIMIT = 10 * 1024 * 1024
MAX_WAVEFORM = 256


async def read_form(request: web.Request) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]]:
    """(the JSON payload, {"files[0]": (filename, bytes), ...}) of a multipart message, or of a JSON one."""
    if request.content_type != "multipart/form-data":
        return await request.json(), {}
    body: dict[str, Any] = {}
    files: dict[str, tuple[str, bytes]] = {}
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if part.name == "payload_json":
            body = json.loads(await part.text())
        elif part.filename is not None:
            files[part.name or ""] = (part.filename, await part.read())
    return body, files


def _error(code: int, message: str) -> dict[str, Any]:
    return {"message": message, "code": code}


def voice_refusal(body: dict[str, Any], files: dict[str, tuple[str, bytes]]) -> dict[str, Any] | None:
    """Discord's error body for a voice message it would refuse, or None (also for messages that are not one)."""
    if not int(body.get("flags") or 0) & IS_VOICE_MESSAGE:
        return None
    if body.get("content") or body.get("embeds") or body.get("sticker_ids") or body.get("components") \
            or body.get("poll"):
        return _error(50159, "Voice messages do not support additional content.")
    entries = body.get("attachments") or []
    if len(entries) != 1 or len(files) != 1:
        return _error(50160, "Voice messages must have a single audio attachment.")
    entry = entries[0]
    upload = files.get(f"files[{entry.get('id')}]")
    duration, waveform = entry.get("duration_secs"), entry.get("waveform")
    if upload is None or not isinstance(duration, int | float) or not isinstance(waveform, str):
        return _error(50161, "Voice messages must have supporting metadata.")
    try:
        if len(base64.b64decode(waveform, validate=True)) > MAX_WAVEFORM:
            return _error(50035, "Invalid Form Body (attachments.0.waveform: longer than 256 bytes)")
    except (binascii.Error, ValueError):
        return _error(50035, "Invalid Form Body (attachments.0.waveform: not base64)")
    if len(upload[1]) > UPLOAD_LIMIT:
        return _error(40005, "Request entity too large")
    try:
        info = ogg_opus(upload[1])
    except ValueError as exc:
        return _error(50161, f"Voice messages must have supporting metadata. (the file: {exc})")
    if abs(info.duration - duration) > 1.0:
        return _error(50161, f"Voice messages must have supporting metadata. (duration_secs {duration} for "
                             f"{info.duration:.2f} s of audio)")
    return None


def voice_attachment(channel: str, entry: dict[str, Any], filename: str, data: bytes, info: OggOpus | None,
               snowflake: str) -> dict[str, Any]:
    """The attachment object Discord answers with (a voice message's keeps its duration and waveform)."""
    out = {"id": snowflake, "filename": filename, "size": len(data), "content_type": "audio/ogg" if info else None,
           "url": f"https://cdn.discordapp.com/attachments/{channel}/{snowflake}/{filename}",
           "proxy_url": f"https://media.discordapp.net/attachments/{channel}/{snowflake}/{filename}"}
    if info is not None:
        out |= {"duration_secs": entry.get("duration_secs"), "waveform": entry.get("waveform")}
    return out
