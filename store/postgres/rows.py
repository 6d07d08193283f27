"""The writes a chat's rows share (store/postgres/chats.py and chat.py), each inside the caller's transaction
on the chat's locked row.

The rows keep what the files backend's files hold, byte for byte where Tusk wrote them: session.jsonl's lines
(memory/session.py builds them for both), HISTORY.md's blocks, the versions' file names. So a chat read out
of the database (`tusk backup`) is the folder the files backend would have. PostgreSQL's text cannot hold NUL
(U+0000): one in a MEMORY.md, document or restored line is kept as U+FFFD (a session's JSON lines escape it,
so a message keeps it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from memory.files import ENTRY_HEADING, entry_span, version_name
from memory.session import Message, message_lines, meta_line, pointer_line
from store.base import DOCS, Entry
from store.postgres.indexing import index_entries, index_messages

KEEP_VERSIONS = 10


def clean(text: str) -> str:
    """`text` as a text column can hold it (NUL as U+FFFD)."""
    return text.replace("\x00", "\ufffd")


def block_entry(block: str) -> Entry | None:
    """A HISTORY.md block as its entry (None: text before the first heading)."""
    if not ENTRY_HEADING.match(block):
        return None
    heading, _, body = block.strip().partition("\n")
    at, until = entry_span(heading)
    return Entry(at, body.strip(), until if until != at else None)


async def add_lines(conn: psycopg.AsyncConnection, chat_id: int, rows: Sequence[tuple[int | None, str | None, str]],
                    ) -> None:
    """Append session lines, (message number or None, import mark or None, line) each, after the chat's last."""
    row = await (await conn.execute("SELECT lines FROM chats WHERE id = %s", (chat_id,))).fetchone()
    assert row is not None  # the caller holds the chat's row
    start = row[0]
    async with conn.cursor() as cur:
        await cur.executemany("INSERT INTO session_lines (chat, n, seq, source, line) VALUES (%s, %s, %s, %s, %s)",
                              [(chat_id, start + i, seq, source, clean(line))
                               for i, (seq, source, line) in enumerate(rows)])
    await conn.execute("UPDATE chats SET lines = lines + %s WHERE id = %s", (len(rows), chat_id))


async def add_messages(conn: psycopg.AsyncConnection, chat_id: int, key: tuple[str, str], messages: Sequence[Message],
                       marks: Sequence[Mapping[str, Any] | None] | None = None) -> tuple[int, float]:
    """Append counted messages (and the meta line first, for a chat's first lines); their index rows too.
    Returns (the first one's number, the session's created time)."""
    row = await (await conn.execute("SELECT total, lines, created FROM chats WHERE id = %s", (chat_id,))).fetchone()
    assert row is not None  # the caller holds the chat's row
    total, lines, created = row
    rows: list[tuple[int | None, str | None, str]] = []
    if lines == 0:
        created = time.time()
        await conn.execute("UPDATE chats SET created = %s WHERE id = %s", (created, chat_id))
        rows.append((None, None, meta_line(*key, created)))
    marks = marks or [None] * len(messages)
    rows += [(total + i, source(mark), line)
             for i, (mark, line) in enumerate(zip(marks, message_lines(messages, marks)))]
    await add_lines(conn, chat_id, rows)
    await conn.execute("UPDATE chats SET total = total + %s WHERE id = %s", (len(messages), chat_id))
    await index_messages(conn, chat_id, total, messages)
    return total, created


def source(mark: Mapping[str, Any] | None) -> str | None:
    return str(mark["import"]) if mark and mark.get("import") is not None else None


async def move_pointer(conn: psycopg.AsyncConnection, chat_id: int, n: int) -> None:
    """The pointer line, and the row's pointer."""
    await add_lines(conn, chat_id, [(None, None, pointer_line(n))])
    await conn.execute("UPDATE chats SET pointer = %s WHERE id = %s", (n, chat_id))


async def write_memory(conn: psycopg.AsyncConnection, chat_id: int, text: str) -> bool:
    """Replace MEMORY.md, keeping the old text as a version (the last KEEP_VERSIONS); False if unchanged."""
    text = clean(text)
    old = await (await conn.execute("SELECT memory FROM chats WHERE id = %s", (chat_id,))).fetchone()
    if old is None or old[0] == text:
        return False
    if old[0]:
        saved = time.time()
        await conn.execute("INSERT INTO memory_versions (chat, name, saved, text) VALUES (%s, %s, %s, %s)",
                           (chat_id, version_name(saved), saved, old[0]))
        await conn.execute("DELETE FROM memory_versions WHERE chat = %s AND n NOT IN"
                           " (SELECT n FROM memory_versions WHERE chat = %s ORDER BY n DESC LIMIT %s)",
                           (chat_id, chat_id, KEEP_VERSIONS))
    await conn.execute("UPDATE chats SET memory = %s, memory_version = memory_version + 1 WHERE id = %s",
                       (text, chat_id))
    return True


async def append_history(conn: psycopg.AsyncConnection, chat_id: int, entry: Entry) -> None:
    """A HISTORY.md entry after the last (and its index rows)."""
    await conn.execute("INSERT INTO history (chat, n, at, until, text, block)"
                       " SELECT %s, coalesce(max(n), 0) + 1, %s, %s, %s, %s FROM history WHERE chat = %s",
                       (chat_id, entry.at, entry.until, clean(entry.text.strip()), clean(f"{entry.heading}\n\n"),
                        chat_id))
    await index_entries(conn, chat_id)


async def put_history_blocks(conn: psycopg.AsyncConnection, chat_id: int, blocks: Sequence[str]) -> None:
    """HISTORY.md replaced by these blocks (memory/files.py's history_blocks: a first one without a heading is
    kept as row 0). The caller reindexes."""
    await conn.execute("DELETE FROM history WHERE chat = %s", (chat_id,))
    n = 0
    for block in blocks:
        entry = block_entry(block)
        if entry is not None:
            n += 1
        await conn.execute("INSERT INTO history (chat, n, at, until, text, block) VALUES (%s, %s, %s, %s, %s, %s)",
                           (chat_id, n, entry.at if entry else 0.0, entry.until if entry else None,
                            clean(entry.text) if entry else "", clean(block)))


async def put_doc(conn: psycopg.AsyncConnection, chat_id: int, name: str, text: str | None) -> None:
    if name not in DOCS:
        raise ValueError(f"{name!r} is not a chat document ({', '.join(DOCS)})")
    if text is None:
        await conn.execute("DELETE FROM chat_docs WHERE chat = %s AND name = %s", (chat_id, name))
    else:
        await conn.execute("INSERT INTO chat_docs (chat, name, body) VALUES (%s, %s, %s)"
                           " ON CONFLICT (chat, name) DO UPDATE SET body = EXCLUDED.body", (chat_id, name, clean(text)))
