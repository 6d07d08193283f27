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

import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, overload

import psycopg

from memory import chat_settings
from memory.chat_settings import ChatSettings
from memory.keys import ChatKey
from memory.session import Message, Session
from store.base import PERSONA, SETTINGS, Chat, ChatInfo, Memory, RoundCommit
from store.errors import StaleWrite
from store.postgres import rows as chat_rows
from store.postgres.chat import PgChat
from store.postgres.pool import Database

CACHE = 256  # chats whose loaded session is kept

Guard = Callable[[psycopg.AsyncConnection, int], Awaitable[None]]  # raises when this process may not write


async def _no_guard(conn: psycopg.AsyncConnection, chat: int) -> None:
    return None


def parsed(rows: Sequence[tuple[str]]) -> list[Message]:
    """Message lines (`SELECT line ... WHERE seq ...`) as counted messages."""
    return [Message.from_record(json.loads(line)).counted() for (line,) in rows]


class PgChats:
    """The ChatStore of one database."""

    def __init__(self, db: Database, guard: Guard = _no_guard, cache_size: int = CACHE,
                 claim: Guard = _no_guard) -> None:
        """`guard`: called in every write's transaction with the chat's row locked (fencing); `claim`: in an
        append's, before the messages go in (a queued message's turn saved once: store/fence.py)."""
        self.db = db
        self.guard = guard
        self.claim = claim
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
                    "SELECT line FROM session_lines WHERE chat = %s AND seq >= %s ORDER BY seq",
                    (chat_id, pointer))).fetchall()
                session = Session(None, key.channel, key.chat_id, pointer, total, parsed(rows), created)
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

    @overload
    async def _row(self, conn: psycopg.AsyncConnection, key: ChatKey, create: Literal[True] = True) -> int: ...
    @overload
    async def _row(self, conn: psycopg.AsyncConnection, key: ChatKey, create: bool) -> int | None: ...

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
                     marks: Sequence[Mapping[str, Any] | None] | None = None) -> None:
        if not messages:
            return
        messages = [m.counted() for m in messages]
        session = chat.session
        async with self.db.transaction() as conn:
            chat_id = await self._row(conn, chat.key)
            total_row = await (await conn.execute("SELECT total FROM chats WHERE id = %s", (chat_id,))).fetchone()
            assert total_row is not None  # _row made and locked it
            if total_row[0] != session.total:
                raise StaleWrite(f"{chat.key}: the session has {total_row[0]} messages, not {session.total}: "
                                 "another process wrote to this chat")
            await self.claim(conn, chat_id)
            _, created = await chat_rows.add_messages(conn, chat_id, (chat.key.channel, chat.key.chat_id), messages,
                                                      marks)
            version, *_ = await self._bump(conn, chat_id)
        session.created = created  # the row's, as its first line set it (a file kept may have made the row)
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
            await chat_rows.move_pointer(conn, chat_id, n)
            version, *_ = await self._bump(conn, chat_id)
            if n < session.last_consolidated:  # moving back (an undo) needs the older messages again
                rows = await (await conn.execute(
                    "SELECT line FROM session_lines WHERE chat = %s AND seq >= %s AND seq < %s ORDER BY seq",
                    (chat_id, n, session.last_consolidated))).fetchall()
        if n >= session.last_consolidated:
            del session.unconsolidated[:n - session.last_consolidated]
        else:
            session.unconsolidated[:0] = parsed(rows)
        session.last_consolidated = n
        self._remember(chat.key, chat_id, version, session)

    async def commit_round(self, chat: Chat, commit: RoundCommit) -> None:
        session = chat.session
        async with self.db.transaction() as conn:
            chat_id = await self._row(conn, chat.key, create=False)
            if chat_id is None:  # erased (/forget) while the round ran: nothing of it is written
                raise StaleWrite(f"{chat.key}: the chat was erased while the round ran; its result was discarded")
            row = await (await conn.execute(
                "SELECT pointer, memory_version, created FROM chats WHERE id = %s", (chat_id,))).fetchone()
            assert row is not None  # _row found and locked it
            pointer, memory_version, created = row
            if session.created and created != session.created:  # erased, then begun again
                raise StaleWrite(f"{chat.key}: the chat was erased and begun again while the round ran; "
                                 "its result was discarded")
            if pointer != commit.start or memory_version != commit.memory_version:
                raise StaleWrite(f"{chat.key}: the chat moved on while the round ran (pointer {pointer}, "
                                 f"memory version {memory_version}); the round's result was discarded")
            await chat_rows.write_memory(conn, chat_id, commit.memory)
            await chat_rows.append_history(conn, chat_id, commit.entry)
            for name, text in commit.docs.items():
                await chat_rows.put_doc(conn, chat_id, name, text)
            await chat_rows.move_pointer(conn, chat_id, commit.pointer)
            version, _, _, memory_version, _ = await self._bump(conn, chat_id)
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

    def follow(self, key: ChatKey, chat_id: int, version: int) -> None:
        """This process's write that left the session alone made the row `version`: the loaded session is
        still the chat's if it was at the version just before (no one else wrote in between)."""
        cached = self._cache.get(key)
        if cached is not None and cached[0] == chat_id and cached[1] == version - 1:
            self._cache[key] = (chat_id, version, cached[2])

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


