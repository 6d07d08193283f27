"""Discord attachments and voice messages: streamed from the attachment URL into the chat's media/, then published."""


import pytest

from bot.events import ChatKey
from channels.discord_bot import DiscordChannel, DiscordSettings
from memory.chat_settings import ChatSettings
from memory.media import MB
from tests import kept
from tests.fakes.fake_discord import FakeDiscord, snowflake
from tests.published import MediaChannels, on_disk


@pytest.fixture
async def dc():
    async with FakeDiscord(token="fake-discord-token-123") as fake:
        fake.guild = fake.add_guild()
        fake.channel = fake.guild.add_channel()
        fake.alice = fake.add_user("alice")
        fake.dm = snowflake()
        yield fake


@pytest.fixture
async def open_channel(dc, tmp_path):
    """Start a Discord channel on the fake with a media store of the given per-file cap; stopped after."""
    channels = MediaChannels(tmp_path, lambda published, store: DiscordChannel(
        DiscordSettings(dc.token, api_base=dc.api_base, gateway_url=dc.gateway_url), published,
        [("help", "what I can do")], media=store))
    yield channels.start
    await channels.close()


async def test_voice_photo_and_document_are_kept_with_the_text(open_channel, dc):
    """A voice message, a photo and a document reach one published message each, bytes under media/."""
    channel, store, published = await open_channel()
    await dc.message(dc.dm, dc.alice, "", attachments=(dc.attachment("voice-message.ogg", b"OggS hi", voice=True),))
    await dc.message(dc.dm, dc.alice, "what is this?",
                     attachments=(dc.attachment("cat.png", b"\x89PNG cat", content_type="image/png"),))
    await dc.message(dc.dm, dc.alice, "read both", attachments=(
        dc.attachment("a.txt", b"first", content_type="text/plain; charset=utf-8"),
        dc.attachment("b.pdf", b"%PDF second", content_type="application/pdf")))
    await dc.wait_for(lambda: len(published) == 3)
    voice, photo, docs = published
    assert voice.text == "" and [(a.kind, a.duration) for a in voice.attachments] == [("voice", 4.2)]
    assert on_disk(store, voice) == [b"OggS hi"]
    assert photo.text == "what is this?" and photo.attachments[0].kind == "image"
    assert on_disk(store, photo) == [b"\x89PNG cat"]
    assert docs.text == "read both" and on_disk(store, docs) == [b"first", b"%PDF second"]
    assert [a.mime for a in docs.attachments] == ["text/plain", "application/pdf"]
    assert all("Authorization" not in headers for _, headers in dc.downloads)  # the bot token stays with the API
    assert kept.media_folder(store, ChatKey("discord", dc.dm)).is_dir() and dc.sent == []


async def test_declared_oversize_is_refused_before_downloading(open_channel, dc):
    """An attachment declared over the cap gets a reply naming the limit, is never fetched; the text still goes."""
    channel, store, published = await open_channel(cap_mb=1)
    await dc.message(dc.dm, dc.alice, "see attached", attachments=(dc.attachment("big.zip", b"zip", size=8 * MB),))
    await dc.wait_for(lambda: published and dc.sent)
    assert dc.sent[0]["content"] == "I could not take big.zip: That file is 8.0 MB; I take files up to 1 MB."
    assert published[0].text == "see attached" and published[0].attachments == () and dc.downloads == []


async def test_actual_oversize_is_refused_while_downloading(open_channel, dc):
    """An attachment bigger than declared is cut off at the cap: a reply, nothing kept, nothing published."""
    channel, store, published = await open_channel(cap_mb=1)
    await dc.message(dc.dm, dc.alice, "", attachments=(dc.attachment("liar.bin", b"x" * (2 * MB), size=10),))
    await dc.wait_for(lambda: dc.sent)
    assert "over 1 MB" in dc.sent[0]["content"]
    await dc.message(dc.dm, dc.alice, "and this?")  # published after the cut-off download: one chat, in order
    await dc.wait_for(lambda: published)
    assert [m.text for m in published] == ["and this?"]
    assert list(kept.media_folder(store, ChatKey("discord", dc.dm)).iterdir()) == []


async def test_the_same_attachment_twice_is_downloaded_once(open_channel, dc):
    """The same attachment id seen again is not fetched a second time."""
    channel, store, published = await open_channel()
    att = dc.attachment("notes.txt", b"same")
    await dc.message(dc.dm, dc.alice, "one", attachments=(att,))
    await dc.message(dc.dm, dc.alice, "two", attachments=(att,))
    await dc.wait_for(lambda: len(published) == 2)
    assert published[0].attachments == published[1].attachments and len(dc.downloads) == 1


async def test_captionless_photo_in_a_guild_is_taken_only_when_addressed(open_channel, dc):
    """In a guild channel an attachment is downloaded only with a mention (or a reply), or when it listens."""
    channel, store, published = await open_channel()
    await dc.message(dc.channel, dc.alice, "", guild=dc.guild, attachments=(dc.attachment("chatter.png"),))
    await dc.message(dc.channel, dc.alice, f"{dc.mention} and this?", guild=dc.guild,
                     attachments=(dc.attachment("for-bot.png", b"for the bot"),))
    await dc.wait_for(lambda: len(published) == 2)
    assert not published[0].addressed and published[0].attachments == ()
    assert published[1].text == "and this?" and on_disk(store, published[1]) == [b"for the bot"]
    assert [name for name, _ in dc.downloads] == ["for-bot.png"]
    await kept.put_settings(store.chats, ChatKey("discord", dc.channel), ChatSettings(listen=True))
    await dc.message(dc.channel, dc.alice, "", guild=dc.guild, attachments=(dc.attachment("kept.png", b"kept"),))
    await dc.wait_for(lambda: len(published) == 3)
    assert not published[2].addressed and on_disk(store, published[2]) == [b"kept"] and dc.sent == []


async def test_a_channels_text_waits_for_its_earlier_download(open_channel, dc):
    """A text sent right after an attachment is published after it."""
    channel, store, published = await open_channel()
    await dc.message(dc.dm, dc.alice, "first", attachments=(dc.attachment("big.bin", b"b" * 500_000),))
    await dc.message(dc.dm, dc.alice, "second")
    await dc.wait_for(lambda: len(published) == 2)
    assert [m.text for m in published] == ["first", "second"]


async def test_a_dead_link_gets_a_reply(open_channel, dc):
    """An attachment the CDN no longer serves is answered with a clear sentence; the text still goes."""
    channel, store, published = await open_channel()
    att = dc.attachment("gone.png")
    del dc.files[att["id"]]
    await dc.message(dc.dm, dc.alice, "look", attachments=(att,))
    await dc.wait_for(lambda: published and dc.sent)
    assert "could not download it from Discord" in dc.sent[0]["content"] and published[0].text == "look"
