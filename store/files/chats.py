"""Every chat's keeping in files under `$TUSK_HOME/chats/<channel>/<chat-dir>/` (docs/data-layout.md): the
`ChatStore` and per-chat `ChatHandle` of store/base.py over today's file formats, unchanged.

One Tusk runs on a home (bot/running.py), so a chat's files have one writer and its loaded session is the
truth: `open` serves it from the session cache (memory/session.py) and re-reads MEMORY.md, PERSONA.md and
settings.json only when their stamps changed (a person may edit them in a text editor). MEMORY.md's
"version" is its stamp (inode, mtime, size), so a compare-and-set sees an edit made beside Tusk too.

A consolidation round is written in the order that makes a crash harmless: the HISTORY.md entry, the
round's documents, MEMORY.md (atomically, its old text kept as a version), then the pointer. A crash in
between may repeat a summary, never lose one.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from datetime import datetime, timezone
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from memory import files as memfiles
from memory import move as moving
from memory.chats import list_chats
from memory import chat_settings
from memory.chat_settings import ChatSettings
from memory.keys import ChatKey
from memory.paths import ChatFiles, open_private, private_dir
from memory.session import Message, SessionStore, iter_messages, whole_session
from store.base import DOCS, PERSONA, SETTINGS, Chat, ChatInfo, Entry, MediaFile, Memory, RoundCommit, Version
from store.errors import StaleWrite

READ_CHUNK = 1 << 16
DOC_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a kept document's id (memory/documents.py)


def stamp(path: Path) -> int:
    """What changes whenever the file does (an atomic replace is a new inode; an edit moves mtime): 0 if none."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return 0
    digest = hashlib.blake2b(f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}".encode(), digest_size=7).digest()
    return int.from_bytes(digest, "big") or 1


def _read(path: Path) -> str | None:
    try:
        return memfiles.read_text(path)
    except FileNotFoundError:
        return None


def _stamp_time(name: str) -> float:
    """When a version (`MEMORY.20261202T145000123456.md`) was replaced, as a Unix time (0 if unreadable)."""
    try:
        when = datetime.strptime(name.removeprefix("MEMORY.").removesuffix(".md"), "%Y%m%dT%H%M%S%f")
    except ValueError:
        return 0.0
    return when.replace(tzinfo=timezone.utc).timestamp()


def _entry(text: str) -> Entry:
    """A HISTORY.md entry as memory/files.py splits them ("## 2026-12-02 14:50 UTC\n\nparagraph", or a span)."""
    heading, _, body = text.partition("\n")
    try:
        at, until = memfiles.entry_span(heading)
    except (ValueError, IndexError):
        at, until = 0.0, 0.0
    return Entry(at, body.strip(), until if until != at else None)


class FileChats:
    """The ChatStore of one `$TUSK_HOME`."""

    def __init__(self, home: Path, sessions: SessionStore | None = None) -> None:
        self.home = Path(home)
        self.sessions = sessions or SessionStore(self.home)

    def files(self, key: ChatKey) -> ChatFiles:
        return ChatFiles.locate(self.home, key.channel, key.chat_id)

    async def open(self, key: ChatKey) -> Chat:
        session = self.sessions.get(key.channel, key.chat_id)
        files = session.on_disk
        memory = _read(files.memory) or ""
        persona = (_read(files.persona) or "").strip()
        return Chat(key, session, Memory(memory, stamp(files.memory)), persona, _read(files.settings),
                    files.dir.exists())

    async def append(self, chat: Chat, messages: Sequence[Message],
                     marks: Sequence[Mapping[str, Any] | None] | None = None) -> None:
        self.sessions.append(chat.session, messages, marks)
        chat.exists = True

    async def set_pointer(self, chat: Chat, pointer: int) -> None:
        self.sessions.set_pointer(chat.session, pointer)

    async def commit_round(self, chat: Chat, commit: RoundCommit) -> None:
        session, files = chat.session, chat.session.on_disk
        if self.sessions.cached(files) is not session or session.last_consolidated != commit.start:
            raise StaleWrite(f"{chat.key}: the chat was reset while the round ran; its result was discarded")
        if stamp(files.memory) != commit.memory_version:
            raise StaleWrite(f"{chat.key}: MEMORY.md changed while the round ran; its result was discarded")
        memfiles.append_history(files, commit.entry.text, commit.entry.at, commit.entry.until)
        for name, text in commit.docs.items():
            _put_doc(files, name, text)
        memfiles.write_memory(files, commit.memory)
        self.sessions.set_pointer(session, commit.pointer)
        chat.memory = Memory(commit.memory, stamp(files.memory))

    async def put_settings(self, chat: Chat, settings: ChatSettings) -> None:
        """Replace the chat's settings.json (and the loaded chat's copy)."""
        text = chat_settings.dump(settings)
        await self.handle(chat.key).put_doc(SETTINGS, text)
        chat.settings, chat.exists = text, True

    async def put_persona(self, chat: Chat, text: str | None) -> None:
        """Replace (None: delete) the chat's PERSONA.md (and the loaded chat's copy)."""
        await self.handle(chat.key).put_doc(PERSONA, text)
        chat.persona = (text or "").strip()

    def local_path(self, key: ChatKey, path: str) -> Path | None:
        """A kept file's own path on this machine (memory/media.py `MediaStore.local`), if it is there."""
        if not path.startswith("media/") or "/" in path[6:] or path[6:] in ("", ".", ".."):
            return None
        target = self.files(key).dir / path
        return target if target.is_file() and not target.is_symlink() else None

    def handle(self, key: ChatKey) -> FileChat:
        return FileChat(self, key)

    def known(self, key: ChatKey) -> bool:
        return self.files(key).dir.exists()

    def prefs_now(self, key: ChatKey) -> ChatSettings | None:
        try:
            return chat_settings.parse(_read(self.files(key).settings))
        except (ValueError, OSError):  # a folder reached through a symlink: no settings of Tusk's
            return None

    async def chats(self) -> list[ChatInfo]:
        return [ChatInfo(ChatKey(c.channel, c.chat_id), c.messages, c.memory_bytes, c.history_entries,
                         c.last_active) for c in list_chats(self.home)]

    async def erase(self, key: ChatKey) -> bool:
        """Delete the chat's folder (everything in it) and forget its cached session."""
        import shutil

        files = self.files(key)
        self.sessions.forget(files)
        if not files.dir.exists():
            return False
        files.check()
        shutil.rmtree(files.dir)
        return True

    async def move(self, old: ChatKey, new: ChatKey) -> str:
        self.sessions.forget(self.files(old))
        self.sessions.forget(self.files(new))
        return moving.move_chat(self.home, old.channel, old.chat_id, new.chat_id)


def _put_doc(files: ChatFiles, name: str, text: str | None) -> None:
    if name not in DOCS:
        raise ValueError(f"{name!r} is not a chat document ({', '.join(DOCS)})")
    path = files.dir / name
    if text is None:
        path.unlink(missing_ok=True)
    else:
        files.ensure()
        memfiles.write_atomic(path, text)


class FileChat:
    """One chat's ChatHandle: its folder."""

    def __init__(self, chats: FileChats, key: ChatKey) -> None:
        self.chats, self.key = chats, key
        self.files = chats.files(key)

    async def exists(self) -> bool:
        return self.files.dir.exists()

    async def caches(self) -> list[str]:
        """The folder's other files: the terminal's input history and the search index (a cache)."""
        found = [(self.files.input_history, "what was typed at the terminal (input-history)"),
                 (self.files.search_index, "the search index of the above (search.sqlite)")]
        return [label for path, label in found if path.exists()]

    async def messages(self, start: int = 0, stop: int | None = None) -> list[Message]:
        return list(iter_messages(self.files))[start:stop]

    async def replace_session(self, messages: Sequence[Message], pointer: int,
                              marks: Sequence[Mapping[str, Any] | None] | None = None) -> None:
        """The whole session.jsonl replaced atomically (`/forget me`): meta, messages, one pointer."""
        created = self.chats.sessions.get(self.key.channel, self.key.chat_id).created or time.time()
        lines = whole_session(self.key.channel, self.key.chat_id, created, [m.counted() for m in messages], pointer,
                              marks)
        self.files.ensure()
        memfiles.write_atomic(self.files.session, "".join(lines))
        self.chats.sessions.forget(self.files)

    async def memory(self) -> Memory:
        return Memory(memfiles.read_memory(self.files), stamp(self.files.memory))

    async def write_memory(self, text: str, expect: int | None = None) -> Memory:
        if expect is not None and stamp(self.files.memory) != expect:
            raise StaleWrite(f"{self.key}: MEMORY.md changed meanwhile")
        self.files.ensure()
        memfiles.write_memory(self.files, text)
        return await self.memory()

    async def versions(self) -> list[Version]:
        return [Version(p.name, _stamp_time(p.name), memfiles.read_text(p)) for p in memfiles.versions(self.files)]

    async def restore_previous(self) -> bool:
        return memfiles.restore_previous(self.files)

    async def replace_versions(self, texts: Sequence[str]) -> None:
        kept = memfiles.versions(self.files)
        for path, text in zip(kept[-len(texts):] if texts else [], texts[-len(kept):] if kept else []):
            memfiles.write_atomic(path, text)
        for path in kept[:max(0, len(kept) - len(texts))]:
            path.unlink(missing_ok=True)

    async def history(self) -> list[Entry]:
        return [_entry(e) for e in memfiles.history_entries(self.files)]

    async def append_history(self, entry: Entry) -> None:
        memfiles.append_history(self.files, entry.text, entry.at, entry.until)

    async def replace_history(self, entries: Sequence[Entry]) -> None:
        """HISTORY.md rewritten whole with `entries`; what a person wrote above its first entry is kept."""
        old = _read(self.files.history)
        if not entries and old is None:
            return
        first = memfiles.ENTRY_HEADING.search(old or "")
        preamble = (old or "")[:first.start() if first else None].strip()
        self.files.ensure()
        memfiles.write_atomic(self.files.history, (f"{preamble}\n\n" if preamble else "")
                              + "".join(f"{e.heading}\n\n" for e in entries))

    async def doc(self, name: str) -> str | None:
        if name not in DOCS:
            raise ValueError(f"{name!r} is not a chat document ({', '.join(DOCS)})")
        return _read(self.files.dir / name)

    async def put_doc(self, name: str, text: str | None) -> None:
        _put_doc(self.files, name, text)

    async def keep_media(self, name: str, chunks: AsyncIterable[bytes], max_bytes: int) -> MediaFile:
        """Stream a file into media/<name>: a temporary name first, renamed into place once whole and fsynced;
        over `max_bytes` it is refused (ValueError) and nothing is kept."""
        folder = private_dir(self.files.ensure() / "media")
        final = folder / name
        tmp = folder / f".{name}.{os.urandom(4).hex()}.part"
        written = 0
        try:
            with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as fh:
                async for piece in chunks:
                    written += len(piece)
                    if written > max_bytes:
                        raise ValueError(f"over {max_bytes} bytes")
                    fh.write(piece)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return MediaFile(f"media/{name}", written, final.stat().st_mtime)

    async def read_media(self, path: str) -> AsyncIterator[bytes]:
        target = self.files.dir / path
        if not path.startswith("media/") or "/" in path[6:] or path[6:] in ("", ".", ".."):
            raise FileNotFoundError(path)
        with os.fdopen(open_private(target, os.O_RDONLY), "rb") as fh:
            while piece := fh.read(READ_CHUNK):
                yield piece

    async def media(self) -> list[MediaFile]:
        folder = self.files.dir / "media"
        if not folder.is_dir():
            return []
        found = [(p, p.stat()) for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
        return [MediaFile(f"media/{p.name}", st.st_size, st.st_mtime)
                for p, st in sorted(found, key=lambda ps: (ps[1].st_mtime, ps[0].name))]

    async def delete_media(self, paths: Sequence[str]) -> int:
        gone = 0
        for path in paths:
            if path.startswith("media/") and "/" not in path[6:]:
                try:
                    (self.files.dir / path).unlink()
                    gone += 1
                except FileNotFoundError:
                    pass
        return gone

    async def documents(self) -> dict[str, str]:
        folder = self.files.dir / "documents"
        if not folder.is_dir():
            return {}
        out = {}
        for path in sorted(folder.iterdir()):
            if path.suffix == ".json" and not path.name.startswith("."):
                try:
                    out[path.stem] = memfiles.read_text(path)
                except (FileNotFoundError, UnicodeDecodeError):
                    continue
        return out

    async def keep_document(self, doc_id: str, record: str) -> None:
        if not DOC_ID.fullmatch(doc_id):
            raise ValueError(f"bad document id {doc_id!r}")
        self.files.ensure()
        memfiles.write_atomic(self.files.dir / "documents" / f"{doc_id}.json", record)

    async def drop_documents(self, doc_ids: Sequence[str]) -> int:
        gone = 0
        for doc_id in doc_ids:
            if DOC_ID.fullmatch(doc_id):
                try:
                    (self.files.dir / "documents" / f"{doc_id}.json").unlink()
                    gone += 1
                except FileNotFoundError:
                    pass
        return gone
