"""What a chat keeps, the same through either backend of the store seam (store/base.py): files under a
home, and a real PostgreSQL database."""

import pytest

from memory.keys import ChatKey
from memory.session import Message
from store.base import Entry, RoundCommit
from store.errors import StaleWrite

KEY = ChatKey("telegram", "42")


@pytest.fixture(params=["files", "postgres"])
async def open_store(request, tmp_path):
    """A function making a ChatStore over one storage: each call is a new process's view (its own caches)."""
    if request.param == "files":
        from store.files.chats import FileChats

        yield lambda: FileChats(tmp_path / "home")
        return
    from store.postgres import migrations
    from store.postgres.chats import PgChats
    from store.postgres.pool import Database

    db = Database(request.getfixturevalue("pg_url"))
    await db.open()
    await migrations.require_current(db)
    yield lambda: PgChats(db)
    await db.close()


async def test_a_chat_is_appended_reloaded_and_consolidated_with_compare_and_set(open_store):
    """Messages are stored in order; a round commits pointer, memory and history whole; a stale round writes nothing."""
    chats = open_store()
    chat = await chats.open(KEY)
    assert not chat.exists and chat.session.total == 0
    await chats.append(chat, [Message("user", "hi", ts=1.0), Message("assistant", "hello", ts=2.0)])
    await chats.append(chat, [Message("user", "tea?", ts=3.0), Message("assistant", "green", ts=4.0)])
    fresh = await open_store().open(KEY)  # another process
    assert [m.content for m in fresh.session.unconsolidated] == ["hi", "hello", "tea?", "green"]
    commit = RoundCommit(start=0, pointer=2, memory_version=0, memory="- likes green tea\n",
                         entry=Entry(2.0, "They said hello."), docs={"provenance.json": "{}"})
    await chats.commit_round(chat, commit)
    assert [m.content for m in chat.session.unconsolidated] == ["tea?", "green"]
    with pytest.raises(StaleWrite):
        await open_store().commit_round(fresh, commit)  # it read pointer 0: the chat moved on
    again = await open_store().open(KEY)
    assert again.session.last_consolidated == 2 and again.memory.text == "- likes green tea\n"
    assert [e.text for e in await chats.handle(KEY).history()] == ["They said hello."]
    assert await chats.handle(KEY).doc("provenance.json") == "{}"


async def test_media_streams_in_and_out_and_a_file_over_the_cap_leaves_nothing(open_store):
    """A file is kept in chunks and read back byte for byte; one over the cap is refused whole."""
    handle = open_store().handle(KEY)
    payload = bytes(range(256)) * 4000  # ~1 MB: four chunks

    async def pieces(data, size=70_000):
        for i in range(0, len(data), size):
            yield data[i:i + size]

    kept = await handle.keep_media("doc.bin", pieces(payload), 2_000_000)
    assert kept.size == len(payload) and kept.path == "media/doc.bin"
    assert b"".join([chunk async for chunk in handle.read_media("media/doc.bin")]) == payload
    with pytest.raises(ValueError):
        await handle.keep_media("big.bin", pieces(payload), 500_000)
    assert [m.path for m in await handle.media()] == ["media/doc.bin"]
    with pytest.raises(FileNotFoundError):
        [c async for c in handle.read_media("media/big.bin")]


async def test_memory_write_with_a_stale_version_is_refused(open_store):
    """write_memory(expect=...) is compare-and-set; undo brings the previous text back."""
    handle = open_store().handle(KEY)
    first = await handle.write_memory("- a\n")
    second = await handle.write_memory("- b\n", expect=first.version)
    with pytest.raises(StaleWrite):
        await handle.write_memory("- c\n", expect=first.version)
    assert (await handle.memory()).text == "- b\n" and second.version != first.version
    assert await handle.restore_previous()
    assert (await handle.memory()).text == "- a\n"




async def test_documents_are_read_whole_and_deleted_by_none(open_store):
    """settings.json, PERSONA.md and the like are replaced whole; None deletes one; others are refused."""
    handle = open_store().handle(KEY)
    assert await handle.doc("PERSONA.md") is None
    await handle.put_doc("PERSONA.md", "Talk like a pirate.\n")
    await handle.put_doc("settings.json", '{"schema": 1, "timezone": "Europe/Berlin"}')
    chat = await open_store().open(KEY)
    assert chat.persona == "Talk like a pirate." and "Europe/Berlin" in chat.settings
    await handle.put_doc("PERSONA.md", None)
    assert await handle.doc("PERSONA.md") is None
    with pytest.raises(ValueError):
        await handle.put_doc("../escape", "x")


async def test_erasing_a_chat_leaves_nothing_of_it_and_other_chats_whole(open_store):
    """erase() removes the chat's session, memory, history, documents and media; another chat keeps its own."""
    chats = open_store()
    other = ChatKey("telegram", "43")
    for key in (KEY, other):
        chat = await chats.open(key)
        await chats.append(chat, [Message("user", f"hello from {key.chat_id}")])
        handle = chats.handle(key)
        await handle.write_memory(f"- {key.chat_id}\n")
        await handle.append_history(Entry(1_700_000_000.0, "a day"))

        async def data():
            yield b"pdf bytes"

        await handle.keep_media("a.pdf", data(), 1000)
    assert await chats.erase(KEY) and not await chats.erase(KEY)
    gone = await open_store().open(KEY)
    assert gone.session.total == 0 and gone.memory.text == "" and not await chats.handle(KEY).exists()
    kept = await open_store().open(other)
    assert [m.content for m in kept.session.unconsolidated] == ["hello from 43"] and kept.memory.text == "- 43\n"
    assert [k.key for k in await chats.chats()] == [other]


async def test_a_chat_moves_to_a_new_id_whole_once(open_store):
    """move() takes everything to the new id; a second move finds it done; a new id with its own data is kept."""
    chats = open_store()
    old, new = ChatKey("telegram", "-4001"), ChatKey("telegram", "-1004001")
    await chats.append(await chats.open(old), [Message("user", "before the upgrade")])
    assert await chats.move(old, new) == "moved"
    assert await chats.move(old, new) == "done before"
    moved = await open_store().open(new)
    assert [m.content for m in moved.session.unconsolidated] == ["before the upgrade"]
    third = ChatKey("telegram", "-4002")
    await chats.append(await chats.open(third), [Message("user", "mine")])
    assert await chats.move(third, new) == "kept both"


async def test_the_session_is_replaced_whole_with_its_pointer(open_store):
    """replace_session (`/forget me`) keeps exactly the messages given, with the pointer given."""
    chats = open_store()
    chat = await chats.open(KEY)
    await chats.append(chat, [Message("user", t) for t in "abcd"])
    await chats.handle(KEY).replace_session([Message("user", "a"), Message("user", "c")], pointer=1)
    again = await open_store().open(KEY)
    assert again.session.total == 2 and again.session.last_consolidated == 1
    assert [m.content for m in await chats.handle(KEY).messages()] == ["a", "c"]
