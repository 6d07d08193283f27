"""Telegram voice notes, photos and files: downloaded through getFile into the chat's media/, then published."""


import pytest

from bot.app import TuskApp
from bot.events import ChatKey
from channels.telegram import TelegramChannel, TelegramSettings
from memory.chat_settings import ChatSettings
from memory.media import MB
from tests import kept
from tests.fakes.fake_telegram import FakeTelegram
from tests.published import MediaChannels, on_disk

MENU = [("help", "what I can do"), ("listen", "keep the group's chatter")]


@pytest.fixture
async def tg():
    async with FakeTelegram(token="123:ABC", username="tusk_bot") as fake:
        yield fake


@pytest.fixture
async def open_channel(tg, tmp_path):
    """Start a Telegram channel on the fake with a media store of the given per-file cap; stopped after."""
    channels = MediaChannels(tmp_path, lambda published, store: TelegramChannel(
        TelegramSettings(tg.token, api_base=tg.base_url, poll_timeout=1), published, MENU, media=store))
    yield channels.start
    await channels.close()


def getfiles(tg):
    return [p for m, p in tg.calls if m == "getFile"]


async def test_voice_photo_and_document_are_kept_with_their_caption(open_channel, tg):
    """A voice note, a photo and a document each reach one published message with the bytes under media/."""
    channel, store, published = await open_channel()
    tg.push_message(42, None, voice=b"OggS voice bytes")
    tg.push_message(42, None, photo=b"\xff\xd8 a big photo " * 100, caption="what is this?")
    tg.push_message(42, None, document=b"%PDF-1.4 report", file_name="report.pdf", mime_type="application/pdf",
                    caption="summarise it")
    await tg.wait_for(lambda: len(published) == 3)
    voice, photo, doc = published
    assert (voice.text, [(a.kind, a.name, a.duration) for a in voice.attachments]) == ("", [("voice", "voice.ogg", 3.0)])
    assert on_disk(store, voice) == [b"OggS voice bytes"]
    assert photo.text == "what is this?" and photo.attachments[0].kind == "image"
    assert on_disk(store, photo) == [b"\xff\xd8 a big photo " * 100]  # the largest size, not the thumbnail
    assert doc.text == "summarise it" and (doc.attachments[0].name, doc.attachments[0].mime) == ("report.pdf",
                                                                                                  "application/pdf")
    folder = kept.media_folder(store, ChatKey("telegram", "42"))
    assert all(kept.media_path(store, m.key, m.attachments[0]).parent == folder for m in published)
    assert tg.sent == []  # nothing to complain about


async def test_audio_and_video_notes_are_taken(open_channel, tg):
    """An audio file keeps its name and duration; a round video note is taken as a voice note."""
    channel, store, published = await open_channel()
    tg.push_message(42, None, audio=b"ID3 music")
    tg.push_message(42, None, video_note=b"mp4 note")
    await tg.wait_for(lambda: len(published) == 2)
    audio, note = (m.attachments[0] for m in published)
    assert (audio.kind, audio.name, audio.mime, audio.duration) == ("audio", "song.mp3", "audio/mpeg", 95.0)
    assert (note.kind, note.mime, note.duration) == ("voice", "video/mp4", 7.0)


async def test_declared_oversize_is_refused_before_downloading(open_channel, tg):
    """A file declared over the cap gets a reply naming the limit, is never fetched, and its caption still goes."""
    channel, store, published = await open_channel(cap_mb=1)
    tg.push_message(42, None, document=b"small really", file_size=5 * MB, caption="see attached")
    await tg.wait_for(lambda: published and tg.sent)
    assert published[0].text == "see attached" and published[0].attachments == ()
    assert tg.sent[0]["plain"] == "I could not take notes.txt: That file is 5.0 MB; I take files up to 1 MB."
    assert getfiles(tg) == [] and tg.downloads == [] and await store.files(published[0].key) == []


async def test_actual_oversize_is_refused_while_downloading(open_channel, tg):
    """A file larger than it declared is cut off at the cap: a reply, no partial file, nothing published."""
    channel, store, published = await open_channel(cap_mb=1)
    tg.push_message(42, None, document=b"x" * (2 * MB), file_size=1000)
    await tg.wait_for(lambda: tg.sent)
    assert "over 1 MB" in tg.sent[0]["plain"] and tg.downloads
    tg.push_message(42, "and this?")  # published after the cut-off download: one chat, in order
    await tg.wait_for(lambda: published)
    assert [m.text for m in published] == ["and this?"]
    assert list(kept.media_folder(store, ChatKey("telegram", "42")).iterdir()) == []


async def test_telegrams_20_mb_download_limit_is_explained(open_channel, tg):
    """Over Telegram's 20 MB bot limit (even under Tusk's own cap) the reply says so; getFile is not called."""
    channel, store, published = await open_channel(cap_mb=100)
    tg.push_message(42, None, document=b"huge", file_size=25 * MB)
    await tg.wait_for(lambda: tg.sent)
    assert "Telegram lets bots download files of up to 20 MB, and that one is 25.0 MB" in tg.sent[0]["plain"]
    assert getfiles(tg) == [] and published == []


async def test_the_same_file_twice_is_downloaded_once(open_channel, tg):
    """A file sent again (same file_unique_id, as a forward) is not fetched a second time."""
    channel, store, published = await open_channel()
    tg.push_message(42, None, document=b"the same bytes", unique_id="AgADsame", caption="one")
    tg.push_message(42, None, document=b"the same bytes", unique_id="AgADsame", caption="two")
    await tg.wait_for(lambda: len(published) == 2)
    assert published[0].attachments[0].path == published[1].attachments[0].path
    assert len(tg.downloads) == 1 and len(getfiles(tg)) == 1


async def test_photo_takes_the_largest_size_within_the_cap(open_channel, tg):
    """When the full-size photo is over the cap, the largest smaller size is taken instead."""
    channel, store, published = await open_channel(cap_mb=1)
    big = b"p" * (2 * MB)
    tg.push_message(42, None, photo=big)
    await tg.wait_for(lambda: published)
    assert on_disk(store, published[0]) == [big[: len(big) // 8]] and tg.sent == []


async def test_captionless_photo_in_a_group_is_taken_only_when_addressed(open_channel, tg):
    """In a group a captionless photo is not downloaded unless it replies to the bot, or the group listens."""
    channel, store, published = await open_channel()
    tg.push_message(-100, None, photo=b"chatter photo", chat_type="supergroup")
    tg.push_message(-100, None, photo=b"photo for the bot", chat_type="supergroup", reply_to_bot=True)
    tg.push_message(-100, None, photo=b"mention", chat_type="supergroup", caption="@tusk_bot what is it?")
    await tg.wait_for(lambda: len(published) == 3)
    chatter, reply, mention = published
    assert not chatter.addressed and chatter.attachments == ()
    assert reply.addressed and on_disk(store, reply) == [b"photo for the bot"]
    assert mention.addressed and mention.text == "what is it?" and on_disk(store, mention) == [b"mention"]
    assert len(tg.downloads) == 2
    await kept.put_settings(store.chats, ChatKey("telegram", "-100"), ChatSettings(listen=True))
    tg.push_message(-100, None, photo=b"kept while listening", chat_type="supergroup")
    await tg.wait_for(lambda: len(published) == 4)
    assert not published[3].addressed and on_disk(store, published[3]) == [b"kept while listening"]
    assert tg.sent == []  # chatter is never answered


async def test_a_chats_text_waits_for_its_earlier_download(open_channel, tg):
    """A text sent right after a photo is published after it: a chat's order survives the download."""
    channel, store, published = await open_channel()
    tg.push_message(42, None, photo=b"q" * 300_000, caption="first")
    tg.push_message(42, "second")
    tg.push_message(43, "another chat")
    await tg.wait_for(lambda: len(published) == 3)
    assert [m.text for m in published if m.key.chat_id == "42"] == ["first", "second"]


async def test_download_failure_gets_a_reply_and_the_caption_still_goes(open_channel, tg):
    """When getFile fails the user hears the file could not be downloaded; the caption is still a message."""
    channel, store, published = await open_channel()
    tg.fail_next("getFile", status=500, description="Internal Server Error")
    tg.push_message(42, None, voice=b"OggS", caption="did you hear?")
    await tg.wait_for(lambda: published and tg.sent)
    assert "could not download it from Telegram" in tg.sent[0]["plain"]
    assert published[0].text == "did you hear?" and published[0].attachments == ()


async def test_an_album_is_one_message_with_every_file(open_channel, tg):
    """The photos of one album (media_group_id) are published together, with the album's caption."""
    channel, store, published = await open_channel()
    tg.push_message(42, None, photo=b"first", caption="compare these", media_group_id="A1")
    tg.push_message(42, None, photo=b"second", media_group_id="A1")
    tg.push_message(42, None, document=b"third", media_group_id="A1")
    tg.push_message(42, "after the album")
    await tg.wait_for(lambda: len(published) == 2)
    album, after = published
    assert album.text == "compare these" and on_disk(store, album) == [b"first", b"second", b"third"]
    assert after.text == "after the album"


async def test_a_mention_in_an_albums_caption_takes_the_whole_album(open_channel, tg):
    """In a group, an album whose caption mentions the bot is taken whole; an album nobody addressed is not."""
    channel, store, published = await open_channel()
    tg.push_message(-100, None, photo=b"one", chat_type="supergroup", caption="@tusk_bot which?", media_group_id="B")
    tg.push_message(-100, None, photo=b"two", chat_type="supergroup", media_group_id="B")
    tg.push_message(-100, None, photo=b"x", chat_type="supergroup", caption="holiday", media_group_id="C")
    tg.push_message(-100, None, photo=b"y", chat_type="supergroup", media_group_id="C")
    await tg.wait_for(lambda: len(published) == 2)
    addressed, chatter = published
    assert addressed.addressed and addressed.text == "which?" and on_disk(store, addressed) == [b"one", b"two"]
    assert not chatter.addressed and chatter.text == "holiday" and chatter.attachments == ()
    assert len(tg.downloads) == 2


async def test_tusk_keeps_the_file_and_answers_its_caption(make_settings, tg, fake_llm, tmp_path):
    """Through the whole app: a file is kept under the chat's media/, its caption reaches the model, and
    TUSK_MEDIA_MAX_MB is the cap a larger file is refused with."""
    app = TuskApp(make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url, TUSK_MEDIA_MAX_MB="1"))
    app.add_platforms()
    async with app:
        tg.push_message(42, None, document=b"hello file", caption="what does it say?")
        await tg.wait_for(lambda: tg.sent)
        tg.push_message(42, None, document=b"z" * (2 * MB), file_name="big.txt")
        await tg.wait_for(lambda: len(tg.sent) == 2)
    (file,) = (tmp_path / "data/chats/telegram/42/media").iterdir()
    assert file.name.endswith("-notes.txt") and file.read_bytes() == b"hello file"
    assert "what does it say?" in str(fake_llm.requests[0]["messages"][-1]["content"])
    assert tg.sent[1]["plain"] == "I could not take big.txt: That file is 2.0 MB; I take files up to 1 MB."


async def test_a_file_that_cannot_be_saved_is_said_and_the_caption_goes(open_channel, tg):
    """When the chat's media/ cannot be written (here a file stands in its place), the user is told and
    the caption is still published."""
    channel, store, published = await open_channel()
    folder = kept.media_folder(store, ChatKey("telegram", "42"))
    folder.parent.mkdir(parents=True)
    folder.write_text("not a folder")
    tg.push_message(42, None, document=b"bytes", caption="keep this")
    await tg.wait_for(lambda: published and tg.sent)
    assert tg.sent[0]["plain"] == "I could not take notes.txt: I could not save it on my side; please send it again later."
    assert published[0].text == "keep this" and published[0].attachments == ()


def test_the_photo_size_is_the_largest_that_fits():
    """Of a photo's sizes the largest within the cap is taken; if none fits, the smallest (to be refused)."""
    from types import SimpleNamespace as Size

    from channels.telegram.media import _photo

    sizes = (Size(width=90, height=60, file_size=2_000), Size(width=320, height=213, file_size=20_000),
             Size(width=1280, height=853, file_size=300_000))
    assert _photo(sizes, 1_000_000) is sizes[2] and _photo(sizes, 50_000) is sizes[1]
    assert _photo(sizes, 100) is sizes[0]
