"""The files of a Telegram message, as `Remote`s for channels/media_in.py.

    voice      -> kind voice, voice.ogg                       video_note -> kind voice, video_note.mp4
    audio      -> kind audio, its file name                   document   -> its name and MIME type
    photo      -> the largest size within the caps (Telegram sends several sizes of one photo)

Stickers, videos and animations are not taken. Each file is fetched with getFile, then streamed from
the file URL PTB builds on TELEGRAM_API_BASE (`<base>/file/bot<token>/<path>`), which holds the token
and is never logged. Telegram lets bots download files of at most 20 MB: a larger declared size is
refused before getFile is called. `file_unique_id` (the same for a file however often it is sent, and
for every bot) is the source id, so a forwarded file already kept is not downloaded again.

Albums (media groups) arrive as one message per photo or file, the caption on one of them: `Albums`
gathers the items of one album that arrive within ALBUM_WAIT seconds of the first into ONE message
(the caption, every item's file; addressed if any item is: a mention in the caption takes them all).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import mimetypes
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from telegram import Bot, Message
from telegram.error import BadRequest, TelegramError

from bot.errors import MediaRefused, MediaUnreachable
from bot.events import ChatKey, InboundMessage
from channels.media_in import UNREACHABLE, InOrder, MediaIntake, Remote
from memory.media import MB

DOWNLOAD_LIMIT = 20 * MB  # the Bot API's getFile limit for bots
ALBUM_WAIT = 0.5  # seconds an album's first item waits for the others (Telegram sends them together)
TOO_BIG = "Telegram lets bots download files of up to 20 MB, and that one is {size}."


def _seconds(value: int | dt.timedelta | None) -> float | None:
    """A duration as PTB gives it (seconds, or a timedelta when PTB_TIMEDELTA is set)."""
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def _photo(sizes: tuple[Any, ...], cap: int) -> Any:
    """The largest size of a photo whose declared size fits `cap` (the smallest if none does, to be refused)."""
    fitting = [p for p in sizes if p.file_size is None or p.file_size <= cap]
    return max(fitting or sizes[:1], key=lambda p: (p.width * p.height, p.file_size or 0))


def files_of(message: Message, bot: Bot, intake: MediaIntake) -> list[Remote]:
    """The files `message` carries that Tusk takes (none for text, stickers, videos)."""

    def remote(media: Any, name: str, mime: str, kind: Any = None, duration: Any = None) -> Remote:
        return Remote(media.file_unique_id, name, mime, lambda: download(bot, intake, media.file_id, media.file_size),
                      kind=kind, size=media.file_size, duration=_seconds(duration))

    found: list[Remote] = []
    if (voice := message.voice) is not None:
        found.append(remote(voice, "voice.ogg", voice.mime_type or "audio/ogg", "voice", voice.duration))
    if (note := message.video_note) is not None:
        found.append(remote(note, "video_note.mp4", "video/mp4", "voice", note.duration))
    if (audio := message.audio) is not None:
        mime = audio.mime_type or "audio/mpeg"
        name = audio.file_name or f"audio{mimetypes.guess_extension(mime) or ''}"
        found.append(remote(audio, name, mime, "audio", audio.duration))
    if message.photo:
        photo = _photo(message.photo, min(intake.file_cap, DOWNLOAD_LIMIT))
        found.append(remote(photo, "photo.jpg", "image/jpeg", "image"))
    if (doc := message.document) is not None:
        name = doc.file_name or "document"
        found.append(remote(doc, name, doc.mime_type or mimetypes.guess_type(name)[0] or "application/octet-stream"))
    return found


async def download(bot: Bot, intake: MediaIntake, file_id: str, size: int | None) -> AsyncIterator[bytes]:
    """getFile, then the file's bytes in chunks; over the Bot API's 20 MB limit: refused, nothing fetched."""
    if size is not None and size > DOWNLOAD_LIMIT:
        raise MediaRefused(TOO_BIG.format(size=f"{size / MB:.1f} MB"))
    try:
        file = await bot.get_file(file_id)
    except BadRequest as exc:
        if "too big" in exc.message.lower():
            raise MediaRefused(TOO_BIG.format(size="larger")) from exc
        raise MediaUnreachable(UNREACHABLE.format(platform="Telegram")) from exc
    except TelegramError as exc:
        raise MediaUnreachable(UNREACHABLE.format(platform="Telegram")) from exc
    if not file.file_path or not file.file_path.startswith(("http://", "https://")):
        raise MediaUnreachable(UNREACHABLE.format(platform="Telegram"))  # a local Bot API server's disk path
    async for chunk in intake.stream(file.file_path):
        yield chunk


class Albums:
    """The items of one album (one `media_group_id` in one chat) published as ONE message. The first item
    opens the album and waits ALBUM_WAIT seconds, in its chat's order, for the others; then the album's
    caption (Telegram puts it on one item) goes out with every item's file."""

    def __init__(self, order: InOrder, take: Callable[[Message, InboundMessage, list[Remote]], Awaitable[None]],
                 files: Callable[[Message], list[Remote]], wanted: Callable[[InboundMessage], Awaitable[bool]],
                 wait: float = ALBUM_WAIT) -> None:
        self._order, self._take, self._files, self._wanted, self._wait = order, take, files, wanted, wait
        self._open: dict[tuple[ChatKey, str], list[tuple[Message, InboundMessage]]] = {}

    def add(self, message: Message, msg: InboundMessage) -> None:
        album = (msg.key, str(message.media_group_id))
        if (items := self._open.get(album)) is not None:
            items.append((message, msg))
            return
        self._open[album] = [(message, msg)]
        self._order.run(msg.key, lambda: self._close(album))

    async def _close(self, album: tuple[ChatKey, str]) -> None:
        try:
            await asyncio.sleep(self._wait)
        finally:
            items = self._open.pop(album)
        message, msg = max(items, key=lambda item: (item[1].addressed, bool(item[1].text)))  # the caption's item
        msg = dataclasses.replace(msg, addressed=any(m.addressed for _, m in items))
        files = [file for m, _ in items for file in self._files(m)] if await self._wanted(msg) else []
        await self._take(message, msg, files)
