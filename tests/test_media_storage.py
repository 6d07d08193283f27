"""Where media lives: /forget me takes a member's files, `tusk export` carries them, the console shows them."""

import tarfile

from bot.events import ChatKey, InboundMessage
from bot.ops import admin
from memory.media import chunks_of
from tests import kept
from tests.media_files import image_bytes
from tests.outbox import started

ENV = {"TUSK_VISION": "true"}


async def send_file(app, key, sender, name, data, mime, **kw):
    att = await app.media.keep(key, chunks_of(data), name=name, mime=mime)
    msg = InboundMessage(key, "", sender, sender_name=sender.title(), attachments=(att,), **kw)
    await app.bus.publish(msg)
    return kept.media_path(app.media, key, att)


async def test_forget_me_removes_only_that_members_files(make_settings, fake_llm):
    """In a group, /forget me confirm deletes the files the member sent (found from their messages) and says
    so; another member's files stay."""
    async with started(make_settings, **ENV) as (app, box):
        key = ChatKey("http", "team")
        ann = await send_file(app, key, "ann", "ann.png", image_bytes(), "image/png", is_group=True)
        bob = await send_file(app, key, "bob", "bob.txt", b"bob's notes", "text/plain", is_group=True)
        forget = InboundMessage(key, "/forget me", "ann", sender_name="Ann", is_group=True)
        await app.bus.publish(forget)
        listing = [m.text for m in box.sent if m.reply_to == forget.id][0]
        assert "1 file they sent" in listing and ann.exists()
        confirm = InboundMessage(key, "/forget me confirm", "ann", sender_name="Ann", is_group=True)
        await app.bus.publish(confirm)
        report = [m.text for m in box.sent if m.reply_to == confirm.id][0]
    assert "- removed 1 file they sent" in report
    assert not ann.exists() and bob.exists()


async def test_export_includes_media(make_settings, fake_llm, tmp_path):
    """`tusk export` puts the chat's media files in the archive beside its session."""
    async with started(make_settings, **ENV) as (app, box):
        key = ChatKey("http", "exp")
        path = await send_file(app, key, "ann", "a.png", image_bytes(), "image/png")
        home = app.settings.home
    from store import open_files

    target, names = await admin.export_chat(open_files(home), key, tmp_path / "out.tar.gz")
    assert f"exp/media/{path.name}" in names and "exp/session.jsonl" in names
    with tarfile.open(target) as tar:
        assert tar.extractfile(f"exp/media/{path.name}").read() == path.read_bytes()


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
