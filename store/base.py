"""The store seam: what every backend keeps for a chat, and the values that cross it.

    chats = store.chats                       # a ChatStore (store/files/ or store/postgres/)
    chat = await chats.open(key)              # load: the session past its pointer, MEMORY.md, persona, settings
    await chats.append(chat, messages)        # save: one transaction (inbound: the platform message it answers)
    await chats.commit_round(chat, commit)    # consolidation: pointer, MEMORY.md, HISTORY.md, documents, whole
    handle = chats.handle(key)                # everything else a chat keeps (commands, tools, the console)

A turn crosses the seam three times: `open`, `append`, and (when over budget) `commit_round`. Writes that
must not lose to a concurrent writer are compare-and-set: `commit_round` checks the pointer and the memory
version it read, `write_memory` the version it was given; a stale writer gets `StaleWrite` and nothing of
its write is kept.

Documents are the small per-chat texts read and written whole (DOCS): the files backend keeps each as a
file in the chat's folder (written atomically), the database as a row.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any, Protocol

from memory import chat_settings
from memory.chat_settings import ChatSettings
from memory.keys import ChatKey
from memory.search import Hit
from memory.session import Message, Session

SETTINGS, PERSONA, PROVENANCE, FORGOTTEN = "settings.json", "PERSONA.md", "provenance.json", "forgotten.json"
DOCS = (SETTINGS, PERSONA, PROVENANCE, FORGOTTEN)  # the documents a chat may keep


@dataclass(frozen=True, slots=True)
class Memory:
    """MEMORY.md as read: its text ("" when there is none) and the version a write must name to replace it."""

    text: str
    version: int


@dataclass(frozen=True, slots=True)
class Version:
    """An earlier MEMORY.md: its name (`MEMORY.<stamp>.md`, as the files backend's versions/ holds it), when it
    was replaced, and its text."""

    name: str
    saved: float
    text: str


@dataclass(frozen=True, slots=True)
class Entry:
    """One HISTORY.md entry: the time (or span, `at` to `until`) of the messages it summarises, and its text."""

    at: float
    text: str
    until: float | None = None

    @property
    def heading(self) -> str:
        """The entry as HISTORY.md shows it: `## 2023-06-01 10:09 UTC – 2023-06-03 18:40 UTC`, then its text."""
        from memory.files import entry_stamp

        return f"## {entry_stamp(self.at, self.until)}\n\n{self.text.strip()}"


@dataclass(slots=True)
class Chat:
    """A chat as `open` loaded it. The session is the live object the store appends to; the rest is a
    snapshot revalidated by the next `open` (a write through the store updates it at once)."""

    key: ChatKey
    session: Session
    memory: Memory
    persona: str = ""
    settings: str | None = None  # settings.json's text (`prefs` reads it)
    exists: bool = False  # the chat has stored anything at all

    @property
    def prefs(self) -> ChatSettings:
        """The chat's own settings (time zone, /listen, /model, /voice, /checkins)."""
        return chat_settings.parse(self.settings)


@dataclass(frozen=True, slots=True)
class RoundCommit:
    """What one consolidation round writes, whole or not at all."""

    start: int  # the pointer the round read: the commit fails (StaleWrite) if it moved meanwhile
    pointer: int  # the pointer after the round
    memory_version: int  # the MEMORY.md version the round read (compare-and-set)
    memory: str  # the new MEMORY.md
    entry: Entry  # the HISTORY.md entry
    docs: Mapping[str, str | None] = field(default_factory=dict)  # documents the round rewrote (None: deleted)


@dataclass(frozen=True, slots=True)
class ChatInfo:
    """A chat as `tusk chats` and the console list it."""

    key: ChatKey
    messages: int
    memory_bytes: int
    history_entries: int
    last_active: float | None


@dataclass(frozen=True, slots=True)
class MediaFile:
    """A file kept with a chat's messages: `path` is "media/<name>", as session records name it."""

    path: str
    size: int
    created: float


class ChatHandle(Protocol):
    """Everything one chat keeps, for what is not a turn's load/save/commit."""

    key: ChatKey

    async def exists(self) -> bool: ...

    async def caches(self) -> list[str]: ...  # what else the backend keeps for the chat, as /forget lists it

    # the session: every message, consolidated or not
    async def messages(self, start: int = 0, stop: int | None = None) -> list[Message]: ...

    async def replace_session(self, messages: Sequence[Message], pointer: int,
                              marks: Sequence[Mapping[str, Any] | None] | None = None) -> None: ...

    # MEMORY.md and its versions (oldest first)
    async def memory(self) -> Memory: ...

    async def write_memory(self, text: str, expect: int | None = None) -> Memory: ...

    async def versions(self) -> list[Version]: ...  # oldest first

    async def restore_previous(self) -> bool: ...

    async def replace_versions(self, texts: Sequence[str]) -> None: ...

    # HISTORY.md
    async def history(self) -> list[Entry]: ...

    async def append_history(self, entry: Entry) -> None: ...

    async def replace_history(self, entries: Sequence[Entry]) -> None: ...

    # documents (DOCS)
    async def doc(self, name: str) -> str | None: ...

    async def put_doc(self, name: str, text: str | None) -> None: ...

    # media
    async def keep_media(self, name: str, chunks: AsyncIterable[bytes], max_bytes: int) -> MediaFile: ...

    def read_media(self, path: str) -> AsyncIterator[bytes]: ...

    async def media(self) -> list[MediaFile]: ...

    async def delete_media(self, paths: Sequence[str]) -> int: ...

    # the text of documents kept for search (memory/documents.py): each a JSON record under its id
    async def documents(self) -> dict[str, str]: ...

    async def keep_document(self, doc_id: str, record: str) -> None: ...

    async def drop_documents(self, doc_ids: Sequence[str]) -> int: ...


class ChatSearch(Protocol):
    """search_history over one chat's consolidated messages, HISTORY.md and kept documents (memory/search.py's
    reading of the question, each backend's index)."""

    async def search(self, key: ChatKey, question: str, limit: int, zone: tzinfo,
                     now: datetime | None = None) -> list[Hit]: ...

    async def drop(self, key: ChatKey) -> None: ...

    def holds(self, key: ChatKey) -> bool: ...


class ChatStore(Protocol):
    """Every chat's keeping, in one backend."""

    async def open(self, key: ChatKey) -> Chat: ...

    async def append(self, chat: Chat, messages: Sequence[Message],
                     marks: Sequence[Mapping[str, Any] | None] | None = None) -> None: ...

    async def set_pointer(self, chat: Chat, pointer: int) -> None: ...

    async def commit_round(self, chat: Chat, commit: RoundCommit) -> None: ...

    def handle(self, key: ChatKey) -> ChatHandle: ...

    async def put_settings(self, chat: Chat, settings: ChatSettings) -> None: ...

    async def put_persona(self, chat: Chat, text: str | None) -> None: ...

    async def chats(self) -> list[ChatInfo]: ...

    def known(self, key: ChatKey) -> bool: ...  # a chat seen before (not new for the flood limits); no I/O wait

    def prefs_now(self, key: ChatKey) -> ChatSettings | None: ...  # a chat's settings as known now; no I/O wait

    async def erase(self, key: ChatKey) -> bool: ...

    async def move(self, old: ChatKey, new: ChatKey) -> str: ...
