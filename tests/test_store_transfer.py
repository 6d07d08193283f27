"""A chat folder into PostgreSQL and back out (store/postgres/transfer.py): the same bytes, and the database's
chat reads as the files backend's."""

import os
from pathlib import Path

import pytest

from memory.keys import ChatKey
from memory.session import Message
from store.base import Entry, RoundCommit
from store.files.chats import FileChats
from store.postgres import migrations
from store.postgres.chats import PgChats
from store.postgres.pool import Database
from store.postgres.transfer import read_folder, write_folder

KEY = ChatKey("telegram", "-100123")
CACHES = {"search.sqlite", "imports.sqlite", "input-history"}


@pytest.fixture
async def db(pg_url):
    database = Database(pg_url)
    await database.open()
    await migrations.require_current(database)
    yield database
    await database.close()


async def pieces(data: bytes):
    yield data[:100_000]
    yield data[100_000:]


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in CACHES}


async def a_lived_in_chat(home: Path) -> Path:
    """A chat folder with everything a chat keeps, some of it as only a crash or a hand edit leaves it."""
    chats = FileChats(home)
    chat = await chats.open(KEY)
    await chats.append(chat, [Message("user", "hi \x00 there", ts=1.0, sender_id="7", sender_name="Ana"),
                              Message("assistant", "hello", ts=2.0)], marks=[{"import": "tg:1"}, None])
    await chats.append(chat, [Message("user", "tea? ünïcödé 🍵", ts=3.0), Message("assistant", "green", ts=4.0)])
    handle = chats.handle(KEY)
    await handle.write_memory("- Ana\n")
    await handle.write_memory("- Ana, likes tea\n")
    chat = await chats.open(KEY)
    await chats.commit_round(chat, RoundCommit(start=0, pointer=2, memory_version=chat.memory.version,
                                               memory="- Ana, likes green tea\n", entry=Entry(2.0, "They met."),
                                               docs={"provenance.json": '{"facts": []}'}))
    await handle.put_doc("PERSONA.md", "Speak like a pirate.\n")
    await handle.put_doc("settings.json", '{"listen": true}\n')
    await handle.keep_media("photo.jpg", pieces(os.urandom(300_000)), 10_000_000)
    await handle.keep_document("d1", '{"title": "Menu", "text": "soup"}')
    folder = home / "chats" / "telegram" / os.listdir(home / "chats" / "telegram")[0]
    with open(folder / "session.jsonl", "ab") as fh:
        fh.write(b'{"role": "user", "content": "torn')  # a kill mid-line: skipped on load, kept in the file
    history = folder / "HISTORY.md"
    history.write_bytes(b"# Our history\n\n" + history.read_bytes() + b"## 2024-01-02 10:00 UTC\n\nA hand-added entry.")
    return folder


async def test_a_chat_folder_goes_in_and_comes_out_byte_for_byte(db, tmp_path):
    """Every file of the folder (caches aside) comes back identical, a torn line and a preamble included."""
    folder = await a_lived_in_chat(tmp_path / "home")
    await read_folder(db, KEY, folder)
    out = tmp_path / "out"
    assert await write_folder(db, KEY, out)
    want = tree(folder)
    assert {"session.jsonl", "MEMORY.md", "HISTORY.md", "PERSONA.md", "settings.json", "provenance.json",
            "media/photo.jpg", "documents/d1.json"} <= set(want)
    assert sum(name.startswith("versions/") for name in want) == 2
    assert tree(out) == want
    assert not await write_folder(db, ChatKey("telegram", "other"), tmp_path / "none")


async def test_the_restored_chat_reads_as_the_files_backend_reads_it(db, tmp_path):
    """Loaded from the database, the chat has the same session, memory, history, versions and documents;
    it takes new turns and its import marks are found again."""
    folder = await a_lived_in_chat(tmp_path / "home")
    await read_folder(db, KEY, folder)
    files, pg = FileChats(tmp_path / "home"), PgChats(db)
    a, b = await files.open(KEY), await pg.open(KEY)
    assert (b.session.last_consolidated, b.session.total) == (a.session.last_consolidated, a.session.total) == (2, 4)
    assert b.session.unconsolidated == a.session.unconsolidated and b.memory.text == a.memory.text
    assert (b.persona, b.prefs.listen) == (a.persona, a.prefs.listen) == ("Speak like a pirate.", True)
    fh, ph = files.handle(KEY), pg.handle(KEY)
    assert [e.text for e in await ph.history()] == [e.text for e in await fh.history()] == ["They met.",
                                                                                            "A hand-added entry."]
    assert [v.name for v in await ph.versions()] == [v.name for v in await fh.versions()]
    assert await ph.messages() == await fh.messages()
    assert await ph.documents() == await fh.documents()
    await pg.append(b, [Message("user", "more", ts=5.0)])
    assert [m.content for m in (await PgChats(db).open(KEY)).session.unconsolidated] == ["tea? ünïcödé 🍵", "green",
                                                                                       "more"]
    async with db.connection() as conn:
        sources = await (await conn.execute("SELECT source FROM session_lines WHERE source IS NOT NULL")).fetchall()
    assert sources == [("tg:1",)]
