"""Files that came with messages, kept per chat (voice notes, photos, documents): the files backend's
`media/` folder, the database's rows (store/base.py `keep_media`).

A channel streams a download into `MediaStore.keep`, which the store writes as it comes, refusing it the
moment it passes the per-file cap (nothing of it is kept). Nothing is downloaded twice: a file carries a short hash
of the platform's own file id in its name, and `keep` returns the kept copy without reading the
download when that id was seen before. After each file the chat's caps are enforced (total bytes,
file count): the oldest files go first, and each removal is logged (names only, never contents).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import time
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from bot.errors import MediaRefused
from bot.events import Attachment, ChatKey, MediaKind

logger = logging.getLogger(__name__)

MB = 1024 * 1024
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class MediaLimits:
    file_bytes: int = 20 * MB  # one file
    chat_bytes: int = 200 * MB  # all of one chat's files
    chat_files: int = 200  # how many files one chat keeps


@dataclass(frozen=True, slots=True)
class KeptFile:
    path: str  # "media/<name>", as session records and attachments name it
    size: int
    mtime: float


def size_text(size: int) -> str:
    """`1.2 MB`, `340 KB` (at least 1 KB for a file that is not empty)."""
    return f"{size / MB:.1f} MB" if size >= MB // 10 else f"{max(1, round(size / 1024)) if size else 0} KB"


def limit_text(size: int) -> str:
    """A cap as an owner sets it: `20 MB`, and `512 KB` or `1.5 MB` where it is not whole megabytes."""
    if size < MB:
        return f"{max(1, round(size / 1024))} KB"
    return f"{size // MB} MB" if size % MB == 0 else size_text(size)


def safe_name(name: str, fallback: str = "file") -> str:
    """A file name that is one plain path part (no `/`, no leading dot), at most 80 characters."""
    cleaned = _UNSAFE.sub("_", os.path.basename(name or "")).lstrip("._")[-80:]
    return cleaned or fallback


def kind_of(mime: str, name: str = "") -> MediaKind:
    """What a file is for Tusk, from its MIME type (and extension when the type is generic)."""
    mime = (mime or "").lower()
    if mime.startswith("image/"):
        return "image"
    if mime.startswith(("audio/", "video/ogg")):
        return "audio"
    ext = os.path.splitext(name.lower())[1]
    if ext in (".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".webm", ".flac"):
        return "audio"
    if ext in (".jpg", ".jpeg", ".png", ".gif", ".webp"):
        return "image"
    return "document"


class Kept(Protocol):
    """Where one chat's files are kept (a ChatHandle of store/base.py)."""

    async def keep_media(self, name: str, chunks: AsyncIterable[bytes], max_bytes: int) -> Any: ...

    def read_media(self, path: str) -> AsyncIterator[bytes]: ...

    async def media(self) -> list[Any]: ...  # each with .path ("media/<name>"), .size, .created; oldest first

    async def delete_media(self, paths: Sequence[str]) -> int: ...


H = TypeVar("H", bound=Kept)  # a chat's handle: what the store gives (store/base.py's ChatHandle keeps more)
H_co = TypeVar("H_co", bound=Kept, covariant=True)


class Keeping(Protocol[H_co]):
    def handle(self, key: ChatKey) -> H_co: ...

    async def open(self, key: ChatKey) -> Any: ...  # the chat as loaded: its `prefs.listen`


class MediaStore(Generic[H]):
    def __init__(self, chats: Keeping[H], limits: MediaLimits = MediaLimits()) -> None:
        self.chats = chats
        self.limits = limits

    async def listens(self, key: ChatKey) -> bool:
        """Does the chat keep its group chatter (/listen on), files included?"""
        return bool((await self.chats.open(key)).prefs.listen)

    async def files(self, key: ChatKey) -> list[KeptFile]:
        """The chat's kept files, oldest first."""
        return [KeptFile(m.path, m.size, m.created) for m in await self.chats.handle(key).media()]

    async def usage(self, key: ChatKey) -> tuple[int, int]:
        """(number of files, total bytes) the chat keeps."""
        kept = await self.files(key)
        return len(kept), sum(f.size for f in kept)

    def read(self, key: ChatKey, path: str) -> AsyncIterator[bytes]:
        """A kept file's bytes, streamed (FileNotFoundError when the chat has no such file)."""
        return self.chats.handle(key).read_media(path)

    @contextlib.asynccontextmanager
    async def local(self, key: ChatKey, attachment: Attachment) -> AsyncIterator[Path]:
        """A path to `attachment` on this machine for as long as the block runs (a library that reads a
        file by name: a transcriber, Pillow, pypdf): the kept copy itself, or a temporary one."""
        where = getattr(self.chats, "local_path", None)
        if where is not None and (path := where(key, attachment.path)) is not None:
            yield path
            return
        with tempfile.TemporaryDirectory(prefix="tusk-media-") as tmp:
            path = Path(tmp) / safe_name(attachment.name, attachment.kind)
            with open(path, "wb") as fh:
                async for chunk in self.read(key, attachment.path):
                    fh.write(chunk)
            yield path

    async def remove(self, key: ChatKey, paths: Sequence[str]) -> int:
        return await self.chats.handle(key).delete_media(paths)

    async def keep(self, key: ChatKey, chunks: AsyncIterable[bytes], *, name: str, mime: str,
                   kind: MediaKind | None = None, source_id: str = "", size: int | None = None,
                   duration: float | None = None) -> Attachment:
        """Keep the download `chunks` with the chat and describe it. `source_id` is the platform's id of the
        file (seen before: the kept copy is returned and `chunks` is never read); `size` is the size the
        platform declared (over the cap: refused before downloading)."""
        cap = self.limits.file_bytes
        if size is not None and size > cap:
            raise MediaRefused(f"That file is {size_text(size)}; I take files up to {limit_text(cap)}.")
        kind = kind or kind_of(mime, name)
        shown = safe_name(name, fallback=kind)
        tag = hashlib.sha256(source_id.encode()).hexdigest()[:12] if source_id else ""
        handle = self.chats.handle(key)
        if tag:
            for old in await self.files(key):
                if f"-{tag}-" in old.path:
                    return Attachment(kind, name or shown, mime, old.size, old.path, duration)
        stem = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{tag or os.urandom(6).hex()}-{shown}"
        kept = await handle.keep_media(stem, _capped(chunks, cap), cap)
        await self._enforce_caps(key, keep=kept.path)
        return Attachment(kind, name or shown, mime, kept.size, kept.path, duration)

    async def _enforce_caps(self, key: ChatKey, keep: str) -> None:
        """Remove the chat's oldest files until it is within its caps (never the file just kept)."""
        kept = await self.files(key)
        total = sum(f.size for f in kept)
        drop: list[str] = []
        for old in kept:
            if len(kept) - len(drop) <= self.limits.chat_files and total <= self.limits.chat_bytes:
                break
            if old.path == keep:
                continue
            drop.append(old.path)
            total -= old.size
            logger.info("removed %s (%d bytes) from %s: the chat's media is over its cap", old.path, old.size, key)
        if drop:
            await self.remove(key, drop)


async def _capped(chunks: AsyncIterable[bytes], cap: int) -> AsyncIterator[bytes]:
    """`chunks`, refused (MediaRefused) the moment they pass `cap` bytes: the store drops what it wrote. The
    refusal is told here rather than read from the store's own ValueError, which a path Tusk will not follow
    (memory/paths.py UnsafePathError) also is."""
    written = 0
    async for piece in chunks:
        written += len(piece)
        if written > cap:
            raise MediaRefused(f"That file is over {limit_text(cap)}, the most I take.")
        yield piece


async def chunks_of(data: bytes, size: int = 1 << 16) -> AsyncIterable[bytes]:
    """`data` as a download (for uploads that arrive whole, e.g. the HTTP API's base64 form)."""
    for start in range(0, len(data), size):
        yield data[start:start + size]
