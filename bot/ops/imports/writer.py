"""Imported messages into chat sessions, once each, surviving a kill at any point.

Each imported session line carries `"import": "<source id>"`. A chat's import record,
`imports.sqlite` in its folder, holds the ids imported and how far into session.jsonl it has
read. A batch is appended (fsynced) before the record is committed; a kill between the two leaves
lines the record does not know yet, so the next import first reads the session past the recorded
offset and adds the ids it finds there. Importing the same source twice therefore adds nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import Counter
from pathlib import Path

from memory.paths import ChatFiles
from memory.session import Message, SessionStore

BATCH = 500
RECORD = "imports.sqlite"


class _Chat:
    def __init__(self, store: SessionStore, channel: str, chat_id: str) -> None:
        self.session = store.get(channel, chat_id)
        self.session.unconsolidated.clear()  # only appended to here: nothing of it is held in memory
        self.files: ChatFiles = self.session.files
        self.files.ensure()
        self.db = sqlite3.connect(self.files.dir / RECORD)
        os.chmod(self.files.dir / RECORD, 0o600)
        self.db.executescript("CREATE TABLE IF NOT EXISTS ids (id TEXT PRIMARY KEY);"
                              "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER)")
        self.pending: list[tuple[str, Message]] = []
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

    def _commit(self, offset: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('offset', ?)", (offset,))
        self.db.commit()

    def known(self, source_id: str) -> bool:
        return (self.db.execute("SELECT 1 FROM ids WHERE id=?", (source_id,)).fetchone() is not None
                or any(sid == source_id for sid, _ in self.pending))

    def flush(self, store: SessionStore) -> None:
        if not self.pending:
            return
        from memory import session as sessions

        lines = []
        if self.session.created is None:
            self.session.created = time.time()
            lines.append(sessions._dump({"record": "meta", "schema": sessions.SCHEMA, "channel": self.session.channel,
                                         "chat_id": self.session.chat_id, "created": self.session.created}))
        lines += [sessions._dump({**m.counted().to_record(), "import": sid}) for sid, m in self.pending]
        sessions._append_lines(self.session, lines)
        self.session.total += len(self.pending)
        self.db.executemany("INSERT OR IGNORE INTO ids VALUES (?)", [(sid,) for sid, _ in self.pending])
        self._commit(self.files.session.stat().st_size)
        self.pending.clear()
        self.session.unconsolidated.clear()


class Writer:
    def __init__(self, home: Path) -> None:
        self.store = SessionStore(home, cache_size=4)
        self.chats: dict[tuple[str, str], _Chat] = {}
        self.added: Counter[tuple[str, str]] = Counter()
        self.skipped = 0

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        for chat in self.chats.values():
            if exc[0] is None:
                chat.flush(self.store)
            chat.db.close()

    def add(self, key: tuple[str, str], msg) -> None:
        chat = self.chats.get(key)
        if chat is None:
            chat = self.chats[key] = _Chat(self.store, *key)
        if chat.known(msg.source_id):
            self.skipped += 1
            return
        chat.pending.append((msg.source_id, Message(role=msg.role, content=msg.text, ts=msg.ts,
                                                    sender_id=msg.sender_id if msg.role == "user" else None,
                                                    sender_name=msg.sender_name if msg.role == "user" else None)))
        self.added[key] += 1
        if len(chat.pending) >= BATCH:
            chat.flush(self.store)
