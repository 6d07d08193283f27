"""Where media lives (on either store): /forget me takes a member's files, `tusk export` carries them, the console
shows them."""

import tarfile

import pytest

from bot.events import ChatKey, InboundMessage
from bot.ops import admin
from memory.media import chunks_of
from tests.media_files import image_bytes
from tests.outbox import started

ENV = {"TUSK_VISION": "true"}


async def keep_and_send(app, key, sender, name, data, mime, **kw):
    """A file kept in the chat's store and sent in a message by `sender`: its Attachment."""
    att = await app.media.keep(key, chunks_of(data), name=name, mime=mime)
    msg = InboundMessage(key, "", sender, sender_name=sender.title(), attachments=(att,), **kw)
    await app.bus.publish(msg)
    return att


@pytest.mark.both_stores
async def test_forget_me_removes_only_that_members_files(make_settings, fake_llm):
    """In a group, /forget me confirm deletes the files the member sent (found from their messages) and says
    so; another member's files stay (in the store the settings name)."""
    async with started(make_settings, **ENV) as (app, box):
        key = ChatKey("http", "team")
        ann = await keep_and_send(app, key, "ann", "ann.png", image_bytes(), "image/png", is_group=True)
        bob = await keep_and_send(app, key, "bob", "bob.txt", b"bob's notes", "text/plain", is_group=True)
        forget = InboundMessage(key, "/forget me", "ann", sender_name="Ann", is_group=True)
        await app.bus.publish(forget)
        listing = [m.text for m in box.sent if m.reply_to == forget.id][0]
        assert "1 file they sent" in listing and {f.path for f in await app.media.files(key)} == {ann.path, bob.path}
        confirm = InboundMessage(key, "/forget me confirm", "ann", sender_name="Ann", is_group=True)
        await app.bus.publish(confirm)
        report = [m.text for m in box.sent if m.reply_to == confirm.id][0]
        assert "- removed 1 file they sent" in report
        assert [f.path for f in await app.media.files(key)] == [bob.path]


@pytest.mark.both_stores
async def test_export_includes_media(make_settings, fake_llm, tmp_path):
    """`tusk export` puts the chat's media files in the archive beside its session (read from the store the
    settings name)."""
    data = image_bytes()
    async with started(make_settings, **ENV) as (app, box):
        key = ChatKey("http", "exp")
        att = await keep_and_send(app, key, "ann", "a.png", data, "image/png")
        settings = app.settings
    from store import opened

    async with opened(settings.home, settings.store_url()) as store:
        target, names = await admin.export_chat(store, key, tmp_path / "out.tar.gz")
    assert f"exp/{att.path}" in names and "exp/session.jsonl" in names
    with tarfile.open(target) as tar:
        assert tar.extractfile(f"exp/{att.path}").read() == data


@pytest.mark.both_stores
async def test_console_shows_the_chats_media(make_settings, fake_llm):
    """The console's chat row has the media count and size."""
    from tests.conftest import running

    async with running(make_settings(**ENV)) as app:
        key = ChatKey("http", "cons")
        att = await app.media.keep(key, chunks_of(b"x" * 3000), name="n.txt", mime="text/plain")
        await app.say("cons", "hello")
        async with app.client.get(f"{app.url}/api/chats/http/cons") as resp:
            row = await resp.json()
    assert row["media"] == {"files": 1, "bytes": att.size}
