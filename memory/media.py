"""Files that came with messages, kept per chat under `media/` (voice notes, photos, documents).

A channel streams a download into `MediaStore.keep`, which writes it to a temporary name in the
chat's `media/` folder (0600, never through a symlink), refuses it the moment it passes the
per-file cap, and renames it into place. Nothing is downloaded twice: a file carries a short hash
of the platform's own file id in its name, and `keep` returns the kept copy without reading the
download when that id was seen before. After each file the chat's caps are enforced (total bytes,
file count): the oldest files go first, and each removal is logged (names only, never contents).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import AsyncIterable
from dataclasses import dataclass
from pathlib import Path

from bot.errors import MediaRefused
from bot.events import Attachment, ChatKey, MediaKind
from memory.paths import ChatFiles, open_private, private_dir

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
    path: Path
    size: int
    mtime: float


def kept_files(folder: Path) -> list[KeptFile]:
    """The files in a chat's media folder, oldest first (temporary downloads left out)."""
    if not folder.is_dir():
        return []
    kept = []
    for entry in os.scandir(folder):
        if entry.is_file(follow_symlinks=False) and not entry.name.startswith("."):
            info = entry.stat(follow_symlinks=False)
            kept.append(KeptFile(Path(entry.path), info.st_size, info.st_mtime))
    return sorted(kept, key=lambda f: (f.mtime, f.path.name))


def usage(folder: Path) -> tuple[int, int]:
    """(number of files, total bytes) in a chat's media folder."""
    kept = kept_files(folder)
    return len(kept), sum(f.size for f in kept)


def size_text(size: int) -> str:
    """`1.2 MB`, `340 KB` (at least 1 KB for a file that is not empty)."""
    return f"{size / MB:.1f} MB" if size >= MB // 10 else f"{max(1, round(size / 1024)) if size else 0} KB"


def usage_text(folder: Path) -> str:
    """`3 (1.2 MB in media/)`, for /memory and /forget."""
    count, size = usage(folder)
    return f"{count} ({size_text(size)} in media/)"


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


class MediaStore:
    def __init__(self, home: Path, limits: MediaLimits = MediaLimits()) -> None:
        self.home = Path(home)
        self.limits = limits

    def folder(self, key: ChatKey) -> Path:
        return ChatFiles.locate(self.home, key.channel, key.chat_id).dir / "media"

    def path(self, key: ChatKey, attachment: Attachment) -> Path:
        """Where `attachment` of `key`'s chat is on disk (its `path` is relative to the chat's folder)."""
        return ChatFiles.locate(self.home, key.channel, key.chat_id).dir / attachment.path

    def files(self, key: ChatKey) -> list[KeptFile]:
        """The chat's kept files, oldest first (temporary downloads left out)."""
        return kept_files(self.folder(key))

    def usage(self, key: ChatKey) -> tuple[int, int]:
        """(number of files, total bytes) the chat keeps."""
        return usage(self.folder(key))

    async def keep(self, key: ChatKey, chunks: AsyncIterable[bytes], *, name: str, mime: str,
                   kind: MediaKind | None = None, source_id: str = "", size: int | None = None,
                   duration: float | None = None) -> Attachment:
        """Write the download `chunks` under the chat's `media/` and describe it. `source_id` is the
        platform's id of the file (seen before: the kept copy is returned and `chunks` is never read);
        `size` is the size the platform declared (over the cap: refused before downloading)."""
        cap = self.limits.file_bytes
        if size is not None and size > cap:
            raise MediaRefused(f"That file is {size / MB:.1f} MB; I take files up to {cap / MB:.0f} MB.")
        kind = kind or kind_of(mime, name)
        shown = safe_name(name, fallback=kind)
        folder = private_dir(self.folder(key))
        tag = hashlib.sha256(source_id.encode()).hexdigest()[:12] if source_id else ""
        if tag:
            for old in folder.glob(f"*-{tag}-*"):
                if not old.name.startswith("."):
                    return Attachment(kind, name or shown, mime, old.stat().st_size, f"media/{old.name}", duration)
        stem = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{tag or os.urandom(6).hex()}-{shown}"
        tmp, final = folder / f".{stem}.{os.urandom(4).hex()}.part", folder / stem  # two uploads never share it
        written = 0
        fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            with os.fdopen(fd, "wb") as fh:
                async for chunk in chunks:
                    written += len(chunk)
                    if written > cap:
                        raise MediaRefused(f"That file is over {cap / MB:.0f} MB, the most I take.")
                    fh.write(chunk)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._enforce_caps(key, keep=final)
        return Attachment(kind, name or shown, mime, written, f"media/{final.name}", duration)

    def _enforce_caps(self, key: ChatKey, keep: Path) -> None:
        """Remove the chat's oldest files until it is within its caps (never the file just kept)."""
        kept = self.files(key)
        total = sum(f.size for f in kept)
        for old in kept:
            if len(kept) <= self.limits.chat_files and total <= self.limits.chat_bytes:
                return
            if old.path == keep:
                continue
            old.path.unlink(missing_ok=True)
            kept = [f for f in kept if f is not old]
            total -= old.size
            logger.info("removed %s (%d bytes) from %s: the chat's media is over its cap", old.path.name, old.size, key)


async def chunks_of(data: bytes, size: int = 1 << 16) -> AsyncIterable[bytes]:
    """`data` as a download (for uploads that arrive whole, e.g. the HTTP API's base64 form)."""
    for start in range(0, len(data), size):
        yield data[start:start + size]
