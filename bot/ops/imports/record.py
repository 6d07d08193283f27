"""Which messages of a source a chat holds already, in the store Tusk keeps: an import run twice, or again
after a kill, adds each message once.

    records = Records.of(store)              # store/: the files backend or the database
    await records.known(key, ids)            # those of `ids` the chat holds (reads only; creates nothing)
    await records.folded(key)                # the chat's import was folded into memory to the end
    record = await records.open(key)         # for writing one chat:
    await record.known(ids)                  #   those of `ids` it holds
    await record.wrote(ids)                  #   `ids` were just appended to its session
    await record.folded()                    #   its messages are all in memory now
    record.close()

Files: `imports.sqlite` in the chat's folder holds the ids imported and how far into session.jsonl it has
read. A batch is appended (fsynced) before the record is committed; a kill between the two leaves lines the
record does not know yet, so `open` first reads the session past the recorded offset and adds the ids it
finds there. PostgreSQL: each imported message's row carries its id (`session_lines.source`, indexed),
written in the same transaction as the message, so there is nothing to catch up; a chat's import is folded
when none of its imported messages is past the chat's pointer.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory.paths import ChatFiles

FILE = "imports.sqlite"
Key = tuple[str, str]


class Records:
    """The import records of one store."""

    @staticmethod
    def of(store: Any) -> Records:
        return PgRecords(store.db) if store.kind == "postgres" else FileRecords(store.home)

    async def known(self, key: Key, ids: Sequence[str]) -> set[str]:
        raise NotImplementedError

    async def folded(self, key: Key) -> bool:
        raise NotImplementedError

    async def open(self, key: Key) -> Record:
        raise NotImplementedError

    def close(self) -> None:
        """Nothing of its own to close unless said."""


class Record:
    """One chat's record, while its messages are written."""

    async def known(self, ids: Sequence[str]) -> set[str]:
        raise NotImplementedError

    async def wrote(self, ids: Sequence[str]) -> None:
        """Nothing to do where the ids went in with the messages."""

    async def folded(self) -> None:
        """Nothing to do where it is read from the chat itself."""

    def close(self) -> None:
        """Nothing of its own to close unless said."""


def _known(db: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ids), 500):  # SQLite's bound on one statement's variables is 32,766 and up
        part = ids[start:start + 500]
        found.update(r[0] for r in db.execute(f"SELECT id FROM ids WHERE id IN ({','.join('?' * len(part))})", part))
    return found


class FileRecords(Records):
    """`imports.sqlite` of each chat folder under a home. Opened read-write but never created by `known` and
    `folded`: a run killed mid-write leaves a hot WAL that only a writable connection may recover."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self._dbs: dict[Key, sqlite3.Connection | None] = {}

    def _db(self, key: Key) -> sqlite3.Connection | None:
        if key not in self._dbs:
            path = ChatFiles.locate(self.home, *key).dir / FILE
            self._dbs[key] = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True) if path.exists() else None
        return self._dbs[key]

    async def known(self, key: Key, ids: Sequence[str]) -> set[str]:
        db = self._db(key)
        return _known(db, ids) if db is not None else set()

    async def folded(self, key: Key) -> bool:
        db = self._db(key)
        row = db.execute("SELECT v FROM meta WHERE k='folded'").fetchone() if db is not None else None
        return bool(row and row[0])

    async def open(self, key: Key) -> Record:
        return FileRecord(ChatFiles.locate(self.home, *key))

    def close(self) -> None:
        for db in self._dbs.values():
            if db is not None:
                db.close()
        self._dbs.clear()


class FileRecord(Record):
    def __init__(self, files: ChatFiles) -> None:
        self.files = files
        files.ensure()
        self.db = sqlite3.connect(files.dir / FILE)
        os.chmod(files.dir / FILE, 0o600)
        self.db.executescript("CREATE TABLE IF NOT EXISTS ids (id TEXT PRIMARY KEY);"
                              "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER)")
        self._catch_up()

    def _offset(self) -> int:
        row = self.db.execute("SELECT v FROM meta WHERE k='offset'").fetchone()
        return row[0] if row else 0

    def _catch_up(self) -> None:
        """Ids of lines a killed import appended after its last commit."""
        path = self.files.session
        if not path.exists():
            return
        with open(path, "rb") as fh:
            fh.seek(self._offset())
            for line in fh:
                if b'"import"' in line:
                    try:
                        self.db.execute("INSERT OR IGNORE INTO ids VALUES (?)", (json.loads(line)["import"],))
                    except (ValueError, KeyError, TypeError):
                        continue
            end = fh.tell()
        self._commit(end)

    def _commit(self, offset: int, folded: bool = False) -> None:
        self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [("offset", offset), ("folded", folded)])
        self.db.commit()

    async def known(self, ids: Sequence[str]) -> set[str]:
        return _known(self.db, ids)

    async def wrote(self, ids: Sequence[str]) -> None:
        self.db.executemany("INSERT OR IGNORE INTO ids VALUES (?)", [(i,) for i in ids])
        self._commit(self.files.session.stat().st_size)

    async def folded(self) -> None:
        self._commit(self._offset(), folded=True)

    def close(self) -> None:
        self.db.close()


class PgRecords(Records):
    """The database's: the ids on the chat's session rows."""

    def __init__(self, db: Any) -> None:
        self.db = db

    async def known(self, key: Key, ids: Sequence[str]) -> set[str]:
        async with self.db.connection() as conn:
            rows = await (await conn.execute(
                "SELECT l.source FROM session_lines l JOIN chats c ON c.id = l.chat"
                " WHERE c.channel = %s AND c.chat_id = %s AND l.source = ANY(%s)", (*key, list(ids)))).fetchall()
        return {r[0] for r in rows}

    async def folded(self, key: Key) -> bool:
        async with self.db.connection() as conn:
            row = await (await conn.execute(
                "SELECT NOT EXISTS (SELECT 1 FROM session_lines l WHERE l.chat = c.id AND l.source IS NOT NULL"
                " AND l.seq >= c.pointer) FROM chats c WHERE c.channel = %s AND c.chat_id = %s", key)).fetchone()
        return bool(row and row[0])

    async def open(self, key: Key) -> Record:
        return PgRecord(self, key)


class PgRecord(Record):
    def __init__(self, records: PgRecords, key: Key) -> None:
        self.records, self.key = records, key

    async def known(self, ids: Sequence[str]) -> set[str]:
        return await self.records.known(self.key, ids)
