"""Imported messages into chat sessions, once each, surviving a kill at any point.

Each imported session line carries `"import": "<source id>"`. A chat's import record,
`imports.sqlite` in its folder, holds the ids imported and how far into session.jsonl it has
read. A batch is appended (fsynced) before the record is committed; a kill between the two leaves
lines the record does not know yet, so the next import first reads the session past the recorded
offset and adds the ids it finds there. Importing the same source twice therefore adds nothing.

The written messages stay in the session's unconsolidated part, in memory, until consolidation folds
them (bot/ops/imports/fold.py runs after each batch), so what is held stays bounded.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from pathlib import Path

from memory.paths import ChatFiles
from memory.session import Message, Session, SessionStore

BATCH = 500
RECORD = "imports.sqlite"


def message(msg) -> Message:
    """An imported message as its chat's session keeps it."""
    user = msg.role == "user"
    return Message(role=msg.role, content=msg.text, ts=msg.ts, sender_id=msg.sender_id if user else None,
                   sender_name=msg.sender_name if user else None)


class _Chat:
    def __init__(self, store: SessionStore, channel: str, chat_id: str) -> None:
        self.store = store
        self.session = store.get(channel, chat_id)
        self.files: ChatFiles = self.session.on_disk
        self.files.ensure()
        self.db = sqlite3.connect(self.files.dir / RECORD)
        os.chmod(self.files.dir / RECORD, 0o600)
        self.db.executescript("CREATE TABLE IF NOT EXISTS ids (id TEXT PRIMARY KEY);"
                              "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER)")
        self.pending: list[tuple[str, Message]] = []
        self.pending_ids: set[str] = set()
        self.pending_settled = False  # the pending batch is already in the chat's (taken) memory
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

    def folded(self) -> None:
        """Every imported message is in memory now (bot/ops/imports/fold.py folded the chat to the end)."""
        self._commit(self._offset(), folded=True)

    def known(self, source_id: str) -> bool:
        return source_id in self.pending_ids or \
            self.db.execute("SELECT 1 FROM ids WHERE id=?", (source_id,)).fetchone() is not None

    def flush(self) -> None:
        """Write the pending batch; a settled one onto a chat with nothing unconsolidated moves its pointer too."""
        if not self.pending:
            return
        settle = self.pending_settled and self.session.last_consolidated == self.session.total
        self.store.append(self.session, [m for _, m in self.pending],
                          marks=[{"import": sid} for sid, _ in self.pending])
        self.db.executemany("INSERT OR IGNORE INTO ids VALUES (?)", [(sid,) for sid, _ in self.pending])
        if settle:
            self.store.set_pointer(self.session, self.session.total)
        self._commit(self.files.session.stat().st_size)
        self.pending.clear()
        self.pending_ids.clear()


class Seen:
    """Which source ids the chats already hold (the check before anything is written). Opened read-write but never
    created: a run killed mid-write leaves a hot WAL that only a writable connection may recover."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.dbs: dict[tuple[str, str], sqlite3.Connection | None] = {}

    def __enter__(self) -> Seen:
        return self

    def __exit__(self, *exc: object) -> None:
        for db in self.dbs.values():
            if db is not None:
                db.close()

    def _db(self, key: tuple[str, str]) -> sqlite3.Connection | None:
        if key not in self.dbs:
            path = ChatFiles.locate(self.home, *key).dir / RECORD
            self.dbs[key] = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True) if path.exists() else None
        return self.dbs[key]

    def __call__(self, key: tuple[str, str], source_id: str) -> bool:
        db = self._db(key)
        return db is not None and db.execute("SELECT 1 FROM ids WHERE id=?", (source_id,)).fetchone() is not None

    def folded(self, key: tuple[str, str]) -> bool:
        """The chat's last import was folded to the end: a run that adds nothing has nothing to do."""
        db = self._db(key)
        row = db and db.execute("SELECT v FROM meta WHERE k='folded'").fetchone()
        return bool(row and row[0])


class Writer:
    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.chats: dict[tuple[str, str], _Chat] = {}
        self.added: Counter[tuple[str, str]] = Counter()
        self.skipped = 0

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        for chat in self.chats.values():
            if exc[0] is None:
                chat.flush()
            chat.db.close()

    def flush_all(self) -> None:
        for chat in self.chats.values():
            chat.flush()

    def close(self, key: tuple[str, str], folded: bool = False) -> None:
        """A chat whose messages are all written: its batch flushed, its record (`folded`: noted as in
        memory to the end) closed."""
        chat = self.chats.pop(key, None)
        if chat is not None:
            chat.flush()
            if folded:
                chat.folded()
            chat.db.close()

    def flush(self, key: tuple[str, str]) -> None:
        self.chats[key].flush()

    def session(self, key: tuple[str, str]) -> Session:
        return self.chats[key].session

    def add(self, key: tuple[str, str], msg, settle: bool = False) -> bool:
        """Queue `msg` for `key`'s chat unless it is there already; True when a batch was just written.
        `settle`: the chat took the source's memory, so a message marked `settled` is consolidated already."""
        chat = self.chats.get(key)
        if chat is None:
            chat = self.chats[key] = _Chat(self.store, *key)
        if chat.known(msg.source_id):
            self.skipped += 1
            return False
        settled = settle and msg.settled
        if chat.pending and chat.pending_settled != settled:
            chat.flush()
        chat.pending_settled = settled
        chat.pending_ids.add(msg.source_id)
        chat.pending.append((msg.source_id, message(msg)))
        self.added[key] += 1
        if len(chat.pending) < BATCH:
            return False
        chat.flush()
        return True
