"""Where Tusk keeps what it knows: the store seam and its two backends.

    store/files/      today's files under $TUSK_HOME (the default: one process, nothing to install)
    store/postgres/   one PostgreSQL database (TUSK_DATABASE_URL): several processes on several machines

`memory/` holds the pure logic (what a session, a consolidation round, a fact is); this package holds
where it is kept. Nothing here imports `bot/` or `channels/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from store.base import ChatSearch, ChatStore


@dataclass(frozen=True, slots=True)
class Store:
    """One backend's parts, as bot/app.py hands them out."""

    chats: ChatStore  # what each chat keeps
    search: ChatSearch  # search_history over it


def open_files(home: Path) -> Store:
    """The files backend over `home` ($TUSK_HOME)."""
    from store.files.chats import FileChats
    from store.files.search import FileSearch

    return Store(FileChats(home), FileSearch(home))
