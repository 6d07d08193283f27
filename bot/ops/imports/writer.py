"""Imported messages into chat sessions, once each, surviving a kill at any point, in the store Tusk keeps
(the ChatStore seam: session.jsonl, or the database's rows).

Each imported message carries its id in the source (`"import": "<source id>"` on its session line; the
database's row keeps it beside). Messages are queued per chat and written in batches of BATCH; before a batch
is appended, the ids the chat holds already (bot/ops/imports/record.py: a resumed or repeated import) are
left out, so importing the same source twice adds nothing.

The written messages stay in the session's unconsolidated part until consolidation folds them
(bot/ops/imports/fold.py runs after each batch), so what is held stays bounded.
"""

from __future__ import annotations

from collections import Counter

from bot.ops.imports.record import Record, Records
from memory.keys import ChatKey
from memory.session import Message
from store.base import ChatStore

BATCH = 500


def message(msg) -> Message:
    """An imported message as its chat's session keeps it."""
    user = msg.role == "user"
    return Message(role=msg.role, content=msg.text, ts=msg.ts, sender_id=msg.sender_id if user else None,
                   sender_name=msg.sender_name if user else None)


class _Chat:
    def __init__(self, chats: ChatStore, key: ChatKey, record: Record) -> None:
        self.chats, self.key, self.record = chats, key, record
        self.pending: list[tuple[str, Message]] = []
        self.pending_ids: set[str] = set()
        self.pending_settled = False  # the pending batch is already in the chat's (taken) memory

    async def flush(self) -> tuple[int, int]:
        """Write the pending batch, less what the chat holds already; a settled one onto a chat with nothing
        unconsolidated moves its pointer too. (written, skipped)."""
        if not self.pending:
            return 0, 0
        known = await self.record.known([sid for sid, _ in self.pending])
        fresh = [(sid, m) for sid, m in self.pending if sid not in known]
        skipped = len(self.pending) - len(fresh)
        self.pending.clear()
        self.pending_ids.clear()
        if not fresh:
            return 0, skipped
        chat = await self.chats.open(self.key)
        settle = self.pending_settled and chat.session.last_consolidated == chat.session.total
        await self.chats.append(chat, [m for _, m in fresh], marks=[{"import": sid} for sid, _ in fresh])
        if settle:
            await self.chats.set_pointer(chat, chat.session.total)
        await self.record.wrote([sid for sid, _ in fresh])
        return len(fresh), skipped


class Writer:
    """The messages of one import run, queued per chat and written in batches."""

    def __init__(self, chats: ChatStore, records: Records) -> None:
        self.store, self.records = chats, records
        self.chats: dict[tuple[str, str], _Chat] = {}
        self.added: Counter[tuple[str, str]] = Counter()
        self.skipped = 0

    async def _flush(self, key: tuple[str, str]) -> bool:
        written, skipped = await self.chats[key].flush()
        self.added[key] += written
        self.skipped += skipped
        return written > 0

    async def finish(self) -> None:
        """Every chat's last batch written and its record closed (the run went to its end)."""
        for key in list(self.chats):
            await self.close(key)

    def abandon(self) -> None:
        """The records closed, the batches not written (the run failed or was stopped)."""
        for chat in self.chats.values():
            chat.record.close()
        self.chats.clear()

    async def close(self, key: tuple[str, str], folded: bool = False) -> None:
        """A chat whose messages are all written: its batch flushed, its record (`folded`: noted as in
        memory to the end) closed."""
        chat = self.chats.get(key)
        if chat is None:
            return
        await self._flush(key)
        if folded:
            await chat.record.folded()
        chat.record.close()
        del self.chats[key]

    async def flush(self, key: tuple[str, str]) -> None:
        await self._flush(key)

    async def add(self, key: tuple[str, str], msg, settle: bool = False) -> bool:
        """Queue `msg` for `key`'s chat (a message given twice by the source is queued once); True when a batch
        was just written. `settle`: the chat took the source's memory, so a message marked `settled` is
        consolidated already."""
        chat = self.chats.get(key)
        if chat is None:
            chat = self.chats[key] = _Chat(self.store, ChatKey(*key), await self.records.open(key))
        if msg.source_id in chat.pending_ids:
            self.skipped += 1
            return False
        settled = settle and msg.settled
        flushed = False
        if chat.pending and chat.pending_settled != settled:
            flushed = await self._flush(key)
        chat.pending_settled = settled
        chat.pending_ids.add(msg.source_id)
        chat.pending.append((msg.source_id, message(msg)))
        if len(chat.pending) < BATCH:
            return flushed
        return await self._flush(key) or flushed
