"""memory/media.py: downloads kept per chat, caps, no second download, journaled attachments."""

from __future__ import annotations

import os
import stat

import pytest

from bot import running
from bot.errors import MediaRefused
from bot.events import ChatKey, InboundMessage
from bot.inbox import Inbox
from store.files.chats import FileChats
from memory.media import MediaLimits, MediaStore, chunks_of, kind_of, safe_name
from tests import kept

KEY = ChatKey("telegram", "42")


@pytest.fixture
async def chats(store_backend, tmp_path, request):
    """The chats of a store (tests marked both_stores run on each): a files home, or a fresh database."""
    from store import opened

    url = request.getfixturevalue("pg_url") if store_backend == "postgres" else None
    async with opened(tmp_path / "home", url) as store:
        yield store.chats


async def test_kept_file_is_private_and_described(tmp_path):
    """A download lands under the chat's media/ folder, 0600, with its size and kind."""
    store = MediaStore(FileChats(tmp_path))
    att = await store.keep(KEY, chunks_of(b"x" * 100_000), name="../../etc/passwd", mime="application/pdf")
    path = kept.media_path(store, KEY, att)
    assert path.parent == tmp_path / "chats" / "telegram" / "42" / "media"
    assert path.read_bytes() == b"x" * 100_000 and att.size == 100_000 and att.kind == "document"
    assert "/" not in att.path.removeprefix("media/") and stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.both_stores
async def test_over_the_cap_is_refused_and_leaves_nothing(chats, store_backend):
    """A download past the per-file cap is refused with the limit named; no partial file stays (nor row)."""
    store = MediaStore(chats, MediaLimits(file_bytes=1000))
    with pytest.raises(MediaRefused, match="over 1 KB, the most I take"):
        await store.keep(KEY, chunks_of(b"y" * 5000, size=100), name="big.bin", mime="application/octet-stream")
    with pytest.raises(MediaRefused):
        await store.keep(KEY, chunks_of(b""), name="big.bin", mime="text/plain", size=5000)
    assert await store.files(KEY) == [] and await store.usage(KEY) == (0, 0)
    if store_backend == "files":
        assert os.listdir(kept.media_folder(store, KEY)) == []
    else:  # neither a row nor a chunk of the refused file
        async with chats.db.connection() as conn:
            counts = await (await conn.execute("SELECT (SELECT count(*) FROM media), "
                                               "(SELECT count(*) FROM media_chunks)")).fetchone()
        assert counts == (0, 0)


@pytest.mark.both_stores
async def test_same_source_is_not_downloaded_twice(chats):
    """A file id seen before returns the kept copy without reading the download."""
    store = MediaStore(chats)
    first = await store.keep(KEY, chunks_of(b"abc"), name="a.txt", mime="text/plain", source_id="F1")

    async def never():
        raise AssertionError("downloaded twice")
        yield b""

    again = await store.keep(KEY, never(), name="a.txt", mime="text/plain", source_id="F1")
    assert again.path == first.path and await store.usage(KEY) == (1, 3)


async def test_caps_remove_the_oldest(tmp_path):
    """Past the chat's file count the oldest file goes; the newest is always kept."""
    store = MediaStore(FileChats(tmp_path), MediaLimits(chat_files=2, chat_bytes=10_000))
    atts = []
    for n in range(3):
        att = await store.keep(KEY, chunks_of(b"z" * 10), name=f"{n}.txt", mime="text/plain", source_id=str(n))
        os.utime(kept.media_path(store, KEY, att), (1000 + n, 1000 + n))
        atts.append(att)
    paths = [f.path for f in await store.files(KEY)]
    assert len(paths) == 2 and atts[0].path not in paths


def test_kinds_and_names():
    """MIME types and extensions map to kinds; names become one safe path part."""
    assert kind_of("image/png") == "image" and kind_of("audio/ogg") == "audio"
    assert kind_of("application/octet-stream", "note.oga") == "audio" and kind_of("text/csv") == "document"
    assert safe_name("..") == "file" and safe_name("a/b/../c d.pdf") == "c_d.pdf"


async def test_attachments_survive_the_journal(tmp_path):
    """A journaled message keeps its attachments across a restart."""
    store = MediaStore(FileChats(tmp_path))
    att = await store.keep(KEY, chunks_of(b"voice"), name="voice.ogg", mime="audio/ogg", kind="voice", duration=4.0)
    inbox = Inbox(tmp_path / "inbox.jsonl")
    inbox.record(InboundMessage(KEY, "", "7", attachments=(att,)))
    held = running.claim(tmp_path, "tusk run")
    try:
        (pending,) = Inbox(tmp_path / "inbox.jsonl").take_pending(held)
    finally:
        held.release()
    assert pending.attachments == (att,)


def test_a_cap_is_said_as_the_owner_set_it():
    """A refusal names the cap in whole megabytes where it is some, else as it is: never `0 MB`."""
    from memory.media import MB, limit_text

    assert (limit_text(20 * MB), limit_text(512 * 1024), limit_text(3 * MB // 2)) == ("20 MB", "512 KB", "1.5 MB")
