"""One chat's rows in PostgreSQL as the `ChatHandle` of store/base.py: its whole session, MEMORY.md and its
versions, HISTORY.md, small documents, media (bytes in 256 KiB chunk rows, streamed in and out) and the
documents kept for search. Every write is a transaction on the chat's locked row that bumps its `version`
(store/postgres/chats.py: a loaded chat is re-read only when that changed).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

import psycopg

from memory.keys import ChatKey
from memory.session import Message, whole_session
from store.base import Entry, MediaFile, Memory, Version
from store.errors import StaleWrite
from store.postgres import rows as chat_rows
from store.postgres.indexing import index_document, reindex, unindex_documents

if TYPE_CHECKING:
    from store.postgres.chats import PgChats

CHUNK = 256 * 1024  # bytes per media chunk row


class PgChat:
    """One chat's ChatHandle."""

    def __init__(self, chats: PgChats, key: ChatKey) -> None:
        self.chats, self.key, self.db = chats, key, chats.db
        self._wrote: dict[int, tuple[int, int]] = {}  # (row id, version) each open transaction wrote, by connection

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A transaction; once it committed, a write that left the session as it was (memory, history, documents,
        media) moves the loaded session's version along (PgChats.follow), so the turn and a consolidation of the
        chat go on sharing one Session rather than the next `open` loading a second."""
        async with self.db.transaction() as conn:
            try:
                yield conn
            finally:
                wrote = self._wrote.pop(id(conn), None)
        if wrote is not None:
            self.chats.follow(self.key, *wrote)

    async def _id(self, conn: psycopg.AsyncConnection) -> int | None:
        row = await (await conn.execute("SELECT id FROM chats WHERE channel = %s AND chat_id = %s",
                                        (self.key.channel, self.key.chat_id))).fetchone()
        return row[0] if row else None

    @overload
    async def _write(self, conn: psycopg.AsyncConnection, create: Literal[True] = True,
                     session: bool = False) -> int: ...
    @overload
    async def _write(self, conn: psycopg.AsyncConnection, create: bool, session: bool = False) -> int | None: ...

    async def _write(self, conn: psycopg.AsyncConnection, create: bool = True, session: bool = False) -> int | None:
        """The chat's row, locked (made when missing and `create`), its version bumped; `session`: this write
        replaces the session (the loaded one is not followed)."""
        chat_id = await self.chats._row(conn, self.key, create)
        if chat_id is not None:
            version, *_ = await self.chats._bump(conn, chat_id)
            if not session:
                self._wrote[id(conn)] = (chat_id, version)
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
                "SELECT line FROM session_lines WHERE chat = %s AND seq >= %s AND (%s::int IS NULL OR seq < %s)"
                " ORDER BY seq", (chat_id, start, stop, stop))).fetchall()
        return [Message.from_record(json.loads(line)) for (line,) in rows]

    async def replace_session(self, messages: Sequence[Message], pointer: int,
                              marks: Sequence[Mapping[str, Any] | None] | None = None) -> None:
        """The whole session replaced (`/forget me`), with its pointer, in one transaction."""
        messages = [m.counted() for m in messages]
        marks = marks or [None] * len(messages)
        async with self._transaction() as conn:
            chat_id = await self._write(conn, session=True)
            row = await (await conn.execute("SELECT created FROM chats WHERE id = %s", (chat_id,))).fetchone()
            assert row is not None  # _write made and locked it
            created = row[0]
            lines = whole_session(self.key.channel, self.key.chat_id, created, messages, pointer, marks)
            await conn.execute("DELETE FROM session_lines WHERE chat = %s", (chat_id,))
            await conn.execute("UPDATE chats SET lines = 0, total = %s, pointer = %s WHERE id = %s",
                               (len(messages), max(0, min(pointer, len(messages))), chat_id))
            await chat_rows.add_lines(conn, chat_id, [(None, None, lines[0]),
                                                      *[(i, chat_rows.source(mark), line) for i, (mark, line)
                                                        in enumerate(zip(marks, lines[1:-1]))],
                                                      (None, None, lines[-1])])
            await reindex(conn, chat_id)
        self.chats.forget_cached(self.key)

    async def memory(self) -> Memory:
        async with self.db.connection() as conn:
            row = await (await conn.execute("SELECT memory, memory_version FROM chats WHERE channel = %s"
                                            " AND chat_id = %s", (self.key.channel, self.key.chat_id))).fetchone()
        return Memory(*row) if row else Memory("", 0)

    async def write_memory(self, text: str, expect: int | None = None) -> Memory:
        async with self._transaction() as conn:
            chat_id = await self._write(conn)
            current = await (await conn.execute("SELECT memory_version FROM chats WHERE id = %s",
                                                (chat_id,))).fetchone()
            assert current is not None  # _write made and locked it
            if expect is not None and current[0] != expect:
                raise StaleWrite(f"{self.key}: MEMORY.md changed meanwhile (version {current[0]}, not {expect})")
            await chat_rows.write_memory(conn, chat_id, text)
            row = await (await conn.execute("SELECT memory, memory_version FROM chats WHERE id = %s",
                                            (chat_id,))).fetchone()
        assert row is not None  # the row this transaction wrote
        return Memory(*row)

    async def versions(self) -> list[Version]:
        async with self.db.connection() as conn:
            chat_id = await self._id(conn)
            rows = await (await conn.execute("SELECT name, saved, text FROM memory_versions WHERE chat = %s"
                                              " ORDER BY n", (chat_id,))).fetchall() if chat_id else []
        return [Version(name, saved, text) for name, saved, text in rows]

    async def restore_previous(self) -> bool:
        """The newest kept version back as MEMORY.md (the current text dropped); False if none."""
        async with self._transaction() as conn:
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
        """The newest kept versions get `texts` (oldest first, their names kept); older ones are dropped."""
        async with self._transaction() as conn:
            chat_id = await self._write(conn, create=False)
            if chat_id is None:
                return
            kept = [n for (n,) in await (await conn.execute(
                "SELECT n FROM memory_versions WHERE chat = %s ORDER BY n", (chat_id,))).fetchall()]
            keep = kept[len(kept) - min(len(texts), len(kept)):]
            await conn.execute("DELETE FROM memory_versions WHERE chat = %s AND NOT n = ANY(%s)", (chat_id, keep))
            for n, text in zip(keep, texts[len(texts) - len(keep):]):
                await conn.execute("UPDATE memory_versions SET text = %s WHERE chat = %s AND n = %s",
                                   (chat_rows.clean(text), chat_id, n))

    async def history(self) -> list[Entry]:
        async with self.db.connection() as conn:
            chat_id = await self._id(conn)
            rows = await (await conn.execute("SELECT at, text, until FROM history WHERE chat = %s AND n > 0 ORDER BY n",
                                              (chat_id,))).fetchall() if chat_id else []
        return [Entry(at, text, until) for at, text, until in rows]

    async def append_history(self, entry: Entry) -> None:
        async with self._transaction() as conn:
            await chat_rows.append_history(conn, await self._write(conn), entry)

    async def replace_history(self, entries: Sequence[Entry]) -> None:
        async with self._transaction() as conn:
            chat_id = await self._write(conn, create=bool(entries))
            if chat_id is None:
                return
            await chat_rows.put_history_blocks(conn, chat_id, [f"{entry.heading}\n\n" for entry in entries])
            await reindex(conn, chat_id)

    async def doc(self, name: str) -> str | None:
        async with self.db.connection() as conn:
            row = await (await conn.execute(
                "SELECT d.body FROM chat_docs d JOIN chats c ON c.id = d.chat"
                " WHERE c.channel = %s AND c.chat_id = %s AND d.name = %s",
                (self.key.channel, self.key.chat_id, name))).fetchone()
        return row[0] if row else None

    async def put_doc(self, name: str, text: str | None) -> None:
        async with self._transaction() as conn:
            chat_id = await self._write(conn, create=text is not None)
            if chat_id is not None:
                await chat_rows.put_doc(conn, chat_id, name, text)

    # -- media ---------------------------------------------------------------------------------

    async def keep_media(self, name: str, chunks: AsyncIterable[bytes], max_bytes: int) -> MediaFile:
        """Stream a file in, CHUNK bytes a row; over `max_bytes` it is refused (ValueError) and nothing kept."""
        path = f"media/{name}"
        async with self._transaction() as conn:
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
            assert row is not None  # the row inserted above, in this transaction
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
        async with self._transaction() as conn:
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
        async with self._transaction() as conn:
            chat_id = await self._write(conn)
            await conn.execute("INSERT INTO chat_documents (chat, id, body) VALUES (%s, %s, %s)"
                               " ON CONFLICT (chat, id) DO UPDATE SET body = EXCLUDED.body",
                               (chat_id, doc_id, chat_rows.clean(record)))
            await index_document(conn, chat_id, doc_id, chat_rows.clean(record))

    async def drop_documents(self, doc_ids: Sequence[str]) -> int:
        async with self._transaction() as conn:
            chat_id = await self._write(conn, create=False)
            if chat_id is None:
                return 0
            cur = await conn.execute("DELETE FROM chat_documents WHERE chat = %s AND id = ANY(%s)",
                                     (chat_id, list(doc_ids)))
            await unindex_documents(conn, chat_id, doc_ids)
            return cur.rowcount
