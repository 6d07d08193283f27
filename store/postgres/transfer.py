"""A chat's rows to and from the folder the files backend keeps for it: how `tusk backup` reads a database and
`tusk restore` fills one (bot/ops/stores.py), so the archive is the same whichever store made it.

The folder's files come back byte for byte: session.jsonl line by line (a torn or hand-broken line too, kept
and skipped as the files backend skips it), MEMORY.md, HISTORY.md block by block (text before its first
entry too), versions/ under their names, the small documents (store/base.py DOCS), media/ and documents/.
Caches are neither written nor read: search.sqlite and imports.sqlite are rebuilt from the rest,
input-history belongs to the terminal it was typed at. Text that is not UTF-8, or holds NUL, cannot be a
PostgreSQL text: it is read with U+FFFD in place of what could not be kept.
"""

from __future__ import annotations

import os
from pathlib import Path

import psycopg

from memory import files as memfiles
from memory.keys import ChatKey
from memory.paths import ChatFiles, open_private, private_dir
from memory.session import read_line
from store.base import DOCS
from store.postgres import rows as chat_rows
from store.postgres.chat import CHUNK
from store.postgres.indexing import reindex
from store.postgres.pool import Database


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


def _lines(data: bytes) -> list[bytes]:
    """The file's lines, each with its newline (the last may have none): joined again they are `data`."""
    pieces = data.split(b"\n")
    return [p + b"\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


async def _session(conn: psycopg.AsyncConnection, chat_id: int, path: Path) -> None:
    rows: list[tuple[int | None, str | None, str]] = []
    total = pointer = 0
    created = None
    for raw in _lines(path.read_bytes()) if path.exists() else []:
        line = read_line(raw, total) if raw.strip() else None
        seq = source = None
        if line is not None and line.kind == "message":
            seq, total = total, total + 1
            mark = line.value.get("import")
            source = str(mark) if mark is not None else None
        elif line is not None and line.kind == "pointer":
            pointer = line.value
        elif line is not None and line.kind == "meta":
            created = line.value or created
        rows.append((seq, source, raw.decode("utf-8", "replace")))
    if rows:
        await chat_rows.add_lines(conn, chat_id, rows)
    await conn.execute("UPDATE chats SET total = %s, pointer = %s, created = %s WHERE id = %s",
                       (total, pointer, created or (path.stat().st_mtime if path.exists() else 0.0), chat_id))


async def _media(conn: psycopg.AsyncConnection, chat_id: int, folder: Path) -> None:
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not path.is_file() or path.is_symlink() or path.name.startswith("."):
            continue
        rel = f"media/{path.name}"
        await conn.execute("INSERT INTO media (chat, path, size, created, complete) VALUES (%s, %s, %s, %s, true)",
                           (chat_id, rel, path.stat().st_size, path.stat().st_mtime))
        with os.fdopen(open_private(path, os.O_RDONLY), "rb") as fh:
            n = 0
            while piece := fh.read(CHUNK):
                await conn.execute("INSERT INTO media_chunks (chat, path, n, data) VALUES (%s, %s, %s, %s)",
                                   (chat_id, rel, n, piece))
                n += 1


async def read_folder(db: Database, key: ChatKey, folder: Path) -> None:
    """The chat's rows replaced by what `folder` (a files backend's chat folder) holds, in one transaction."""
    files = ChatFiles(folder)
    async with db.transaction() as conn:
        await conn.execute("DELETE FROM chats WHERE channel = %s AND chat_id = %s", (key.channel, key.chat_id))
        row = await (await conn.execute(
            "INSERT INTO chats (channel, chat_id, created, active) VALUES (%s, %s, 0, %s) RETURNING id",
            (key.channel, key.chat_id, folder.stat().st_mtime))).fetchone()
        assert row is not None  # INSERT ... RETURNING returns the row
        chat_id = row[0]
        await _session(conn, chat_id, files.session)
        if files.memory.exists():
            await conn.execute("UPDATE chats SET memory = %s, memory_version = 1 WHERE id = %s",
                               (chat_rows.clean(_text(files.memory)), chat_id))
        for path in memfiles.versions(files):
            await conn.execute("INSERT INTO memory_versions (chat, name, saved, text) VALUES (%s, %s, %s, %s)",
                               (chat_id, path.name, path.stat().st_mtime, chat_rows.clean(_text(path))))
        if files.history.exists():
            await chat_rows.put_history_blocks(conn, chat_id, memfiles.history_blocks(_text(files.history)))
        for name in DOCS:
            if (folder / name).is_file():
                await chat_rows.put_doc(conn, chat_id, name, _text(folder / name))
        await _media(conn, chat_id, files.media)
        for path in sorted((folder / "documents").glob("*.json")):
            await conn.execute("INSERT INTO chat_documents (chat, id, body) VALUES (%s, %s, %s)",
                               (chat_id, path.stem, chat_rows.clean(_text(path))))
        await reindex(conn, chat_id)


def _write(path: Path, data: bytes) -> None:
    private_dir(path.parent)
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as fh:
        fh.write(data)


async def write_folder(db: Database, key: ChatKey, folder: Path) -> bool:
    """Write the chat as the files backend would keep it into `folder` (made, owner-only); False if no such
    chat. One snapshot: the reads share a repeatable-read transaction."""
    async with db.connection() as conn:
        async with conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = await (await conn.execute("SELECT id, memory FROM chats WHERE channel = %s AND chat_id = %s",
                                            (key.channel, key.chat_id))).fetchone()
            if row is None:
                return False
            chat_id, memory = row
            private_dir(folder)
            await _write_rows(conn, chat_id, folder, "SELECT line FROM session_lines WHERE chat = %s ORDER BY n",
                              "session.jsonl")
            if memory:
                _write(folder / "MEMORY.md", memory.encode())
            await _write_rows(conn, chat_id, folder, "SELECT block FROM history WHERE chat = %s ORDER BY n",
                              "HISTORY.md")
            for name, text in await (await conn.execute(
                    "SELECT name, text FROM memory_versions WHERE chat = %s ORDER BY n", (chat_id,))).fetchall():
                _write(folder / "versions" / name, text.encode())
            for name, body in await (await conn.execute(
                    "SELECT name, body FROM chat_docs WHERE chat = %s", (chat_id,))).fetchall():
                _write(folder / name, body.encode())
            for doc_id, body in await (await conn.execute(
                    "SELECT id, body FROM chat_documents WHERE chat = %s", (chat_id,))).fetchall():
                _write(folder / "documents" / f"{doc_id}.json", body.encode())
            await _write_media(conn, chat_id, folder)
    return True


async def _write_rows(conn: psycopg.AsyncConnection, chat_id: int, folder: Path, query: str, name: str) -> None:
    """A file made of the rows' texts in order (none: no file)."""
    async with conn.cursor() as cur:
        await cur.execute(query, (chat_id,))
        fh = None
        try:
            async for (text,) in cur:
                if fh is None:
                    fh = os.fdopen(open_private(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb")
                fh.write(text.encode())
        finally:
            if fh is not None:
                fh.close()


async def _write_media(conn: psycopg.AsyncConnection, chat_id: int, folder: Path) -> None:
    paths = await (await conn.execute("SELECT path, created FROM media WHERE chat = %s AND complete ORDER BY path",
                                      (chat_id,))).fetchall()
    for rel, created in paths:
        name = rel.removeprefix("media/")
        if not rel.startswith("media/") or not name or "/" in name or name.startswith("."):
            continue  # not a name Tusk gives (keep_media): never written outside the folder
        target = folder / rel
        private_dir(target.parent)
        with os.fdopen(open_private(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as fh:
            async with conn.cursor() as cur:
                await cur.execute("SELECT data FROM media_chunks WHERE chat = %s AND path = %s ORDER BY n",
                                  (chat_id, rel))
                async for (data,) in cur:
                    fh.write(data)
        os.utime(target, (created, created))
