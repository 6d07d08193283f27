"""Every chat's keeping in PostgreSQL (store/postgres/schema/0001_chats.sql): the `ChatStore` and the
per-chat `ChatHandle` of store/base.py.

A chat is one `chats` row (pointer, message count, MEMORY.md and its version, a `version` bumped by
every write) and rows that hang off it. `open` reads that row and the chat's documents in one query, and
the messages past the pointer only when the cached session is older than the row's `version`: a warm turn
costs one round trip whatever the chat's length. Every write is one transaction that bumps `version`;
`commit_round` and `write_memory(expect=...)` are compare-and-set on the pointer and the memory version
(a stale writer gets StaleWrite and writes nothing). Fencing across processes (`epoch`) is checked by the
caller's transaction hook (`guard`), so a paused worker cannot write into a chat another has taken.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memory import chat_settings
from memory.chat_settings import ChatSettings
from memory.keys import ChatKey
from memory.session import Message, Session
from store.base import DOCS, PERSONA, SETTINGS, Chat, ChatInfo, Entry, MediaFile, Memory, RoundCommit, Version
from store.errors import StaleWrite
from store.postgres.indexing import index_entries, index_messages, reindex
from store.postgres.pool import Database

KEEP_VERSIONS = 10


def version_name(n: int, saved: float) -> str:
    """A version's name as the files backend gives it (`MEMORY.<stamp>.md`), its row number breaking ties."""
    stamp = datetime.fromtimestamp(saved, timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"MEMORY.{stamp}{n % 1_000_000:06d}.md"
CHUNK = 256 * 1024  # bytes per media chunk row
CACHE = 256  # chats whose loaded session is kept

Guard = Callable[[psycopg.AsyncConnection, int], Awaitable[None]]  # raises when this process may not write


async def _no_guard(conn: psycopg.AsyncConnection, chat: int) -> None:
    return None


def _record(message: Message, mark: Mapping[str, Any] | None = None) -> Jsonb:
    """A message as its row keeps it: session.jsonl's line. jsonb cannot hold NUL (U+0000), which a message may
    carry: it is kept as U+FFFD, the replacement character (the rest of the text as it was)."""
    return Jsonb(_without_nul({**message.to_record(), **(mark or {})}))


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nul(v) for v in value]
    return value


class PgChats:
    """The ChatStore of one database."""

    def __init__(self, db: Database, guard: Guard = _no_guard, cache_size: int = CACHE) -> None:
        self.db = db
        self.guard = guard
        self._cache: OrderedDict[ChatKey, tuple[int, int, Session]] = OrderedDict()  # key -> (row id, version, session)
        self._cache_size = cache_size
        self._prefs: dict[ChatKey, ChatSettings] = {}  # each chat's settings as last opened (no I/O wait to read)

    # -- load ---------------------------------------------------------------------------------

    async def open(self, key: ChatKey) -> Chat:
        async with self.db.connection() as conn:
            row = await (await conn.execute(
                "SELECT c.id, c.created, c.pointer, c.total, c.memory, c.memory_version, c.version,"
                " (SELECT body FROM chat_docs WHERE chat = c.id AND name = %s),"
                " (SELECT body FROM chat_docs WHERE chat = c.id AND name = %s)"
                " FROM chats c WHERE c.channel = %s AND c.chat_id = %s",
                (PERSONA, SETTINGS, key.channel, key.chat_id))).fetchone()
            if row is None:
                self._cache.pop(key, None)
                return Chat(key, Session(None, key.channel, key.chat_id), Memory("", 0))
            chat_id, created, pointer, total, memory, memory_version, version, persona, settings = row
            cached = self._cache.get(key)
            if cached is not None and cached[0] == chat_id and cached[1] == version:
                session = cached[2]
                self._cache.move_to_end(key)
            else:
                rows = await (await conn.execute(
                    "SELECT record FROM messages WHERE chat = %s AND seq >= %s ORDER BY seq",
                    (chat_id, pointer))).fetchall()
                session = Session(None, key.channel, key.chat_id, pointer, total,
                                  [Message.from_record(r[0]).counted() for r in rows], created)
                self._remember(key, chat_id, version, session)
        chat = Chat(key, session, Memory(memory, memory_version), (persona or "").strip(), settings, True)
        self._prefs[key] = chat.prefs
        return chat

    def _remember(self, key: ChatKey, chat_id: int, version: int, session: Session) -> None:
        self._cache[key] = (chat_id, version, session)
        self._cache.move_to_end(key)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # -- write --------------------------------------------------------------------------------

    async def _row(self, conn: psycopg.AsyncConnection, key: ChatKey, create: bool = True) -> int | None:
        """The chat's row id, locked for this transaction (made when `create` and missing)."""
        row = await (await conn.execute("SELECT id FROM chats WHERE channel = %s AND chat_id = %s FOR UPDATE",
                                        (key.channel, key.chat_id))).fetchone()
        if row is None and create:
            row = await (await conn.execute(
                "INSERT INTO chats (channel, chat_id, created) VALUES (%s, %s, %s)"
                " ON CONFLICT (channel, chat_id) DO UPDATE SET channel = EXCLUDED.channel RETURNING id",
                (key.channel, key.chat_id, time.time()))).fetchone()
        if row is None:
            return None
        await self.guard(conn, row[0])
        return row[0]

    async def _bump(self, conn: psycopg.AsyncConnection, chat_id: int, sets: str = "", args: tuple = ()) -> tuple:
        row = await (await conn.execute(
            f"UPDATE chats SET version = version + 1, active = %s{sets} WHERE id = %s"
            " RETURNING version, pointer, total, memory_version, created",
            (time.time(), *args, chat_id))).fetchone()
        assert row is not None
        return row

    async def append(self, chat: Chat, messages: Sequence[Message],
                     marks: Sequence[Mapping[str, Any]] | None = None) -> None:
        if not messages:
            return
        messages = [m.counted() for m in messages]
        session = chat.session
        async with self.db.transaction() as conn:
            chat_id = await self._row(conn, chat.key)
            total_row = await (await conn.execute("SELECT total FROM chats WHERE id = %s", (chat_id,))).fetchone()
            start = total_row[0]
            if start != session.total:
                raise StaleWrite(f"{chat.key}: the session has {start} messages, not {session.total}: "
                                 "another process wrote to this chat")
            async with conn.cursor() as cur:
                await cur.executemany("INSERT INTO messages (chat, seq, record) VALUES (%s, %s, %s)",
                                      [(chat_id, start + i, _record(m, (marks or [None] * len(messages))[i]))
                                       for i, m in enumerate(messages)])
            await index_messages(conn, chat_id, start, messages)
            version, *_, created = await self._bump(conn, chat_id, ", total = total + %s", (len(messages),))
        session.created = session.created or created
        session.unconsolidated.extend(messages)
        session.total += len(messages)
        chat.exists = True
        self._remember(chat.key, chat_id, version, session)

    async def set_pointer(self, chat: Chat, pointer: int) -> None:
        session = chat.session
        n = max(0, min(pointer, session.total))
        if not chat.exists and n == 0:
            return
        async with self.db.transaction() as conn:
            chat_id = await self._row(conn, chat.key)
            version, *_ = await self._bump(conn, chat_id, ", pointer = %s", (n,))
            if n < session.last_consolidated:  # moving back (an undo) needs the older messages again
                rows = await (await conn.execute(
                    "SELECT record FROM messages WHERE chat = %s AND seq >= %s AND seq < %s ORDER BY seq",
                    (chat_id, n, session.last_consolidated))).fetchall()
        if n >= session.last_consolidated:
            del session.unconsolidated[:n - session.last_consolidated]
        else:
            session.unconsolidated[:0] = [Message.from_record(r[0]).counted() for r in rows]
        session.last_consolidated = n
        self._remember(chat.key, chat_id, version, session)

    async def commit_round(self, chat: Chat, commit: RoundCommit) -> None:
        session = chat.session
        async with self.db.transaction() as conn:
            chat_id = await self._row(conn, chat.key)
            pointer, memory_version = (await (await conn.execute(
                "SELECT pointer, memory_version FROM chats WHERE id = %s", (chat_id,))).fetchone())
            if pointer != commit.start or memory_version != commit.memory_version:
                raise StaleWrite(f"{chat.key}: the chat moved on while the round ran (pointer {pointer}, "
                                 f"memory version {memory_version}); the round's result was discarded")
            await _write_memory(conn, chat_id, commit.memory)
            await _append_history(conn, chat_id, commit.entry)
            for name, text in commit.docs.items():
                await _put_doc(conn, chat_id, name, text)
            version, _, _, memory_version, _ = await self._bump(conn, chat_id, ", pointer = %s", (commit.pointer,))
        del session.unconsolidated[:commit.pointer - session.last_consolidated]
        session.last_consolidated = commit.pointer
        chat.memory = Memory(commit.memory, memory_version)
        self._remember(chat.key, chat_id, version, session)

    # -- the rest ------------------------------------------------------------------------------

    async def put_settings(self, chat: Chat, settings: ChatSettings) -> None:
        """Replace the chat's settings.json (and the loaded chat's copy)."""
        text = chat_settings.dump(settings)
        await self.handle(chat.key).put_doc(SETTINGS, text)
        chat.settings, chat.exists = text, True
        self._prefs[chat.key] = settings

    async def put_persona(self, chat: Chat, text: str | None) -> None:
        """Replace (None: delete) the chat's PERSONA.md (and the loaded chat's copy)."""
        await self.handle(chat.key).put_doc(PERSONA, text)
        chat.persona = (text or "").strip()

    def handle(self, key: ChatKey) -> PgChat:
        return PgChat(self, key)

    def forget_cached(self, key: ChatKey) -> None:
        self._cache.pop(key, None)

    def known(self, key: ChatKey) -> bool:
        """A chat this process opened or wrote (a new one to the flood limits otherwise)."""
        return key in self._cache or key in self._prefs

    def prefs_now(self, key: ChatKey) -> ChatSettings | None:
        """The settings of a chat this process opened (none known otherwise)."""
        return self._prefs.get(key)

    async def chats(self) -> list[ChatInfo]:
        async with self.db.connection() as conn:
            rows = await (await conn.execute(
                "SELECT c.channel, c.chat_id, c.total, octet_length(c.memory),"
                " (SELECT count(*) FROM history h WHERE h.chat = c.id), c.active"
                " FROM chats c ORDER BY c.channel, c.chat_id")).fetchall()
        return [ChatInfo(ChatKey(ch, cid), total, size, entries, active)
                for ch, cid, total, size, entries, active in rows]

    async def erase(self, key: ChatKey) -> bool:
        """Delete the chat's row, and with it every row of the chat (ON DELETE CASCADE)."""
        self._cache.pop(key, None)
        async with self.db.transaction() as conn:
            chat_id = await self._row(conn, key, create=False)
            if chat_id is None:
                return False
            await conn.execute("DELETE FROM chats WHERE id = %s", (chat_id,))
        return True

    async def move(self, old: ChatKey, new: ChatKey) -> str:
        """A chat taking a new id (a Telegram group upgraded): one UPDATE, so all of it moves or none."""
        self._cache.pop(old, None)
        self._cache.pop(new, None)
        async with self.db.transaction() as conn:
            source = await self._row(conn, old, create=False)
            target = await self._row(conn, new, create=False)
            if source is None:
                return "done before" if target is not None else "nothing"
            if target is not None:
                holds = await (await conn.execute("SELECT total > 0 OR memory <> '' FROM chats WHERE id = %s",
                                                  (target,))).fetchone()
                if holds and holds[0]:
                    return "kept both"
                await conn.execute("DELETE FROM chats WHERE id = %s", (target,))
            await conn.execute("UPDATE chats SET chat_id = %s, version = version + 1 WHERE id = %s",
                               (new.chat_id, source))
        return "moved"


async def _write_memory(conn: psycopg.AsyncConnection, chat_id: int, text: str) -> bool:
    """Replace MEMORY.md, keeping the old text as a version (the last KEEP_VERSIONS); False if unchanged."""
    old = await (await conn.execute("SELECT memory FROM chats WHERE id = %s", (chat_id,))).fetchone()
    if old is None or old[0] == text:
        return False
    if old[0]:
        await conn.execute("INSERT INTO memory_versions (chat, saved, text) VALUES (%s, %s, %s)",
                           (chat_id, time.time(), old[0]))
        await conn.execute("DELETE FROM memory_versions WHERE chat = %s AND n NOT IN"
                           " (SELECT n FROM memory_versions WHERE chat = %s ORDER BY n DESC LIMIT %s)",
                           (chat_id, chat_id, KEEP_VERSIONS))
    await conn.execute("UPDATE chats SET memory = %s, memory_version = memory_version + 1 WHERE id = %s",
                       (text, chat_id))
    return True


async def _append_history(conn: psycopg.AsyncConnection, chat_id: int, entry: Entry) -> None:
    await conn.execute("INSERT INTO history (chat, n, at, until, text)"
                       " SELECT %s, coalesce(max(n), 0) + 1, %s, %s, %s FROM history WHERE chat = %s",
                       (chat_id, entry.at, entry.until, entry.text.strip(), chat_id))
    await index_entries(conn, chat_id)


async def _put_doc(conn: psycopg.AsyncConnection, chat_id: int, name: str, text: str | None) -> None:
    if name not in DOCS:
        raise ValueError(f"{name!r} is not a chat document ({', '.join(DOCS)})")
    if text is None:
        await conn.execute("DELETE FROM chat_docs WHERE chat = %s AND name = %s", (chat_id, name))
    else:
        await conn.execute("INSERT INTO chat_docs (chat, name, body) VALUES (%s, %s, %s)"
                           " ON CONFLICT (chat, name) DO UPDATE SET body = EXCLUDED.body", (chat_id, name, text))


class PgChat:
    """One chat's ChatHandle."""

    def __init__(self, chats: PgChats, key: ChatKey) -> None:
        self.chats, self.key, self.db = chats, key, chats.db

    async def _id(self, conn: psycopg.AsyncConnection) -> int | None:
        row = await (await conn.execute("SELECT id FROM chats WHERE channel = %s AND chat_id = %s",
                                        (self.key.channel, self.key.chat_id))).fetchone()
        return row[0] if row else None

    async def _write(self, conn: psycopg.AsyncConnection, create: bool = True) -> int | None:
        """The chat's row, locked (made when missing and `create`), its version bumped."""
        chat_id = await self.chats._row(conn, self.key, create)
        if chat_id is not None:
            await self.chats._bump(conn, chat_id)
        return chat_id

    async def exists(self) -> bool:
        async with self.db.connection() as conn:
            return await self._id(conn) is not None

    async def caches(self) -> list[str]:
        """Nothing beyond the chat's rows (its search rows are part of them)."""
        return []

    async def messages(self, start: int = 0, stop: int | None = None) -> list[Message]:
        async with self.db.connection() as conn:
            chat_id = await self._id(conn)
            if chat_id is None:
                return []
            rows = await (await conn.execute(
                "SELECT record FROM messages WHERE chat = %s AND seq >= %s AND (%s::int IS NULL OR seq < %s)"
                " ORDER BY seq", (chat_id, start, stop, stop))).fetchall()
        out = []
        for (record,) in rows:
            try:
                out.append(Message.from_record(record))
            except (ValueError, TypeError):
                continue
        return out

    async def replace_session(self, messages: Sequence[Message], pointer: int,
                              marks: Sequence[Mapping[str, Any]] | None = None) -> None:
        """The whole session replaced (`/forget me`), with its pointer, in one transaction."""
        messages = [m.counted() for m in messages]
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn)
            await conn.execute("DELETE FROM messages WHERE chat = %s", (chat_id,))
            async with conn.cursor() as cur:
                await cur.executemany("INSERT INTO messages (chat, seq, record) VALUES (%s, %s, %s)",
                                      [(chat_id, i, _record(m, (marks or [None] * len(messages))[i]))
                                       for i, m in enumerate(messages)])
            await conn.execute("UPDATE chats SET total = %s, pointer = %s WHERE id = %s",
                               (len(messages), max(0, min(pointer, len(messages))), chat_id))
            await reindex(conn, chat_id)
        self.chats.forget_cached(self.key)

    async def memory(self) -> Memory:
        async with self.db.connection() as conn:
            row = await (await conn.execute("SELECT memory, memory_version FROM chats WHERE channel = %s"
                                            " AND chat_id = %s", (self.key.channel, self.key.chat_id))).fetchone()
        return Memory(*row) if row else Memory("", 0)

    async def write_memory(self, text: str, expect: int | None = None) -> Memory:
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn)
            current = await (await conn.execute("SELECT memory_version FROM chats WHERE id = %s",
                                                (chat_id,))).fetchone()
            if expect is not None and current[0] != expect:
                raise StaleWrite(f"{self.key}: MEMORY.md changed meanwhile (version {current[0]}, not {expect})")
            await _write_memory(conn, chat_id, text)
            row = await (await conn.execute("SELECT memory, memory_version FROM chats WHERE id = %s",
                                            (chat_id,))).fetchone()
        return Memory(*row)

    async def versions(self) -> list[Version]:
        async with self.db.connection() as conn:
            chat_id = await self._id(conn)
            rows = await (await conn.execute("SELECT n, saved, text FROM memory_versions WHERE chat = %s ORDER BY n",
                                              (chat_id,))).fetchall() if chat_id else []
        return [Version(version_name(n, saved), saved, text) for n, saved, text in rows]

    async def restore_previous(self) -> bool:
        """The newest kept version back as MEMORY.md (the current text dropped); False if none."""
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn, create=False)
            if chat_id is None:
                return False
            row = await (await conn.execute("DELETE FROM memory_versions WHERE chat = %s AND n ="
                                            " (SELECT max(n) FROM memory_versions WHERE chat = %s) RETURNING text",
                                            (chat_id, chat_id))).fetchone()
            if row is None:
                return False
            await conn.execute("UPDATE chats SET memory = %s, memory_version = memory_version + 1 WHERE id = %s",
                               (row[0], chat_id))
        return True

    async def replace_versions(self, texts: Sequence[str]) -> None:
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn, create=False)
            if chat_id is None:
                return
            await conn.execute("DELETE FROM memory_versions WHERE chat = %s", (chat_id,))
            for text in texts[-KEEP_VERSIONS:]:
                await conn.execute("INSERT INTO memory_versions (chat, saved, text) VALUES (%s, %s, %s)",
                                   (chat_id, time.time(), text))

    async def history(self) -> list[Entry]:
        async with self.db.connection() as conn:
            chat_id = await self._id(conn)
            rows = await (await conn.execute("SELECT at, text, until FROM history WHERE chat = %s ORDER BY n",
                                              (chat_id,))).fetchall() if chat_id else []
        return [Entry(at, text, until) for at, text, until in rows]

    async def append_history(self, entry: Entry) -> None:
        async with self.db.transaction() as conn:
            await _append_history(conn, await self._write(conn), entry)

    async def replace_history(self, entries: Sequence[Entry]) -> None:
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn, create=bool(entries))
            if chat_id is None:
                return
            await conn.execute("DELETE FROM history WHERE chat = %s", (chat_id,))
            for n, entry in enumerate(entries, 1):
                await conn.execute("INSERT INTO history (chat, n, at, until, text) VALUES (%s, %s, %s, %s, %s)",
                                   (chat_id, n, entry.at, entry.until, entry.text.strip()))
            await reindex(conn, chat_id)

    async def doc(self, name: str) -> str | None:
        async with self.db.connection() as conn:
            row = await (await conn.execute(
                "SELECT d.body FROM chat_docs d JOIN chats c ON c.id = d.chat"
                " WHERE c.channel = %s AND c.chat_id = %s AND d.name = %s",
                (self.key.channel, self.key.chat_id, name))).fetchone()
        return row[0] if row else None

    async def put_doc(self, name: str, text: str | None) -> None:
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn, create=text is not None)
            if chat_id is not None:
                await _put_doc(conn, chat_id, name, text)

    # -- media ---------------------------------------------------------------------------------

    async def keep_media(self, name: str, chunks: AsyncIterable[bytes], max_bytes: int) -> MediaFile:
        """Stream a file in, CHUNK bytes a row; over `max_bytes` it is refused (ValueError) and nothing kept."""
        path = f"media/{name}"
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn)
            await conn.execute("DELETE FROM media WHERE chat = %s AND path = %s", (chat_id, path))
            await conn.execute("INSERT INTO media (chat, path, size, created) VALUES (%s, %s, 0, %s)",
                               (chat_id, path, time.time()))
            size, n, pending = 0, 0, bytearray()
            async for piece in chunks:
                size += len(piece)
                if size > max_bytes:
                    raise ValueError(f"over {max_bytes} bytes")
                pending += piece
                while len(pending) >= CHUNK:
                    await conn.execute("INSERT INTO media_chunks (chat, path, n, data) VALUES (%s, %s, %s, %s)",
                                       (chat_id, path, n, bytes(pending[:CHUNK])))
                    del pending[:CHUNK]
                    n += 1
            if pending:
                await conn.execute("INSERT INTO media_chunks (chat, path, n, data) VALUES (%s, %s, %s, %s)",
                                   (chat_id, path, n, bytes(pending)))
            row = await (await conn.execute(
                "UPDATE media SET size = %s, complete = true WHERE chat = %s AND path = %s RETURNING created",
                (size, chat_id, path))).fetchone()
        return MediaFile(path, size, row[0])

    async def read_media(self, path: str) -> AsyncIterator[bytes]:
        """The file's bytes, a chunk at a time (FileNotFoundError if the chat has no such complete file)."""
        n = 0
        while True:
            async with self.db.connection() as conn:
                row = await (await conn.execute(
                    "SELECT k.data FROM media_chunks k JOIN media m ON m.chat = k.chat AND m.path = k.path"
                    " JOIN chats c ON c.id = m.chat WHERE c.channel = %s AND c.chat_id = %s AND m.path = %s"
                    " AND m.complete AND k.n = %s",
                    (self.key.channel, self.key.chat_id, path, n))).fetchone()
                if row is None and n == 0 and not await self._has_media(conn, path):
                    raise FileNotFoundError(path)
            if row is None:
                return
            yield bytes(row[0])
            n += 1

    async def _has_media(self, conn: psycopg.AsyncConnection, path: str) -> bool:
        row = await (await conn.execute(
            "SELECT 1 FROM media m JOIN chats c ON c.id = m.chat WHERE c.channel = %s AND c.chat_id = %s"
            " AND m.path = %s AND m.complete", (self.key.channel, self.key.chat_id, path))).fetchone()
        return row is not None

    async def media(self) -> list[MediaFile]:
        async with self.db.connection() as conn:
            rows = await (await conn.execute(
                "SELECT m.path, m.size, m.created FROM media m JOIN chats c ON c.id = m.chat"
                " WHERE c.channel = %s AND c.chat_id = %s AND m.complete ORDER BY m.created, m.path",
                (self.key.channel, self.key.chat_id))).fetchall()
        return [MediaFile(*r) for r in rows]

    async def delete_media(self, paths: Sequence[str]) -> int:
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn, create=False)
            if chat_id is None:
                return 0
            cur = await conn.execute("DELETE FROM media WHERE chat = %s AND path = ANY(%s)", (chat_id, list(paths)))
            return cur.rowcount

    # -- documents kept for search --------------------------------------------------------------

    async def documents(self) -> dict[str, str]:
        async with self.db.connection() as conn:
            rows = await (await conn.execute(
                "SELECT d.id, d.body FROM chat_documents d JOIN chats c ON c.id = d.chat"
                " WHERE c.channel = %s AND c.chat_id = %s ORDER BY d.id",
                (self.key.channel, self.key.chat_id))).fetchall()
        return dict(rows)

    async def keep_document(self, doc_id: str, record: str) -> None:
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn)
            await conn.execute("INSERT INTO chat_documents (chat, id, body) VALUES (%s, %s, %s)"
                               " ON CONFLICT (chat, id) DO UPDATE SET body = EXCLUDED.body", (chat_id, doc_id, record))

    async def drop_documents(self, doc_ids: Sequence[str]) -> int:
        async with self.db.transaction() as conn:
            chat_id = await self._write(conn, create=False)
            if chat_id is None:
                return 0
            cur = await conn.execute("DELETE FROM chat_documents WHERE chat = %s AND id = ANY(%s)",
                                     (chat_id, list(doc_ids)))
            return cur.rowcount
