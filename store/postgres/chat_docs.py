"""A chat's small documents (store/base.py DOCS) read from synchronous code, through the sync pool: what the
operator's commands need of a chat without an event loop of their own (`tusk usage`, `tusk budget`, the
doctor: the model a chat picked with /model, from its settings.json).

    text = read_doc(sync_db, key, "settings.json")    # None: the chat keeps none (or is not kept)
"""

from __future__ import annotations

from memory.keys import ChatKey
from store.base import DOCS
from store.postgres.pool import SyncDatabase


def read_doc(db: SyncDatabase, key: ChatKey, name: str) -> str | None:
    if name not in DOCS:
        raise ValueError(f"{name!r} is not a chat document ({', '.join(DOCS)})")
    with db.connection() as conn:
        row = conn.execute("SELECT d.body FROM chat_docs d JOIN chats c ON c.id = d.chat"
                           " WHERE c.channel = %s AND c.chat_id = %s AND d.name = %s",
                           (key.channel, key.chat_id, name)).fetchone()
    return row[0] if row else None
