"""search_history on the files backend: each chat's SQLite FTS5 index, `search.sqlite` in its folder
(memory/search_index.py follows the chat's files; memory/search.py reads the question and ranks). Searches
block (SQLite), so they run in a thread."""

from __future__ import annotations

import asyncio
from datetime import datetime, tzinfo
from pathlib import Path

from memory.keys import ChatKey
from memory.paths import ChatFiles
from memory.search import Hit, HistorySearch


class FileSearch:
    def __init__(self, home: Path, engine: HistorySearch | None = None) -> None:
        self.home = Path(home)
        self.engine = engine or HistorySearch()

    def _files(self, key: ChatKey) -> ChatFiles:
        return ChatFiles.locate(self.home, key.channel, key.chat_id)

    async def search(self, key: ChatKey, question: str, limit: int, zone: tzinfo,
                     now: datetime | None = None) -> list[Hit]:
        """The `limit` best matches for `question` in the chat, best first (memory/search.py)."""
        return await asyncio.to_thread(self.engine.search, self._files(key), question, limit, zone, now)

    async def drop(self, key: ChatKey) -> None:
        """Delete the chat's index (`/forget me`): the next search builds it again from the files."""
        await asyncio.to_thread(self.engine.drop, self._files(key))

    def holds(self, key: ChatKey) -> bool:
        """Does the chat have an index (it holds copies of the chat's text)?"""
        return self.engine.has(self._files(key))
