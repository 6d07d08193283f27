"""Slack file shares: fetched from url_private_download with the bot token into the chat's media/, then published."""

import logging

import pytest

from bot.events import ChatKey
from bot.ops import doctor
from channels.slack import SlackChannel, SlackSettings
from channels.slack.media import token_may_go_to
from memory.chat_settings import ChatSettings
from memory.media import MB, MediaStore
from store.files.chats import FileChats
from tests import kept
from tests.fakes.fake_slack import FakeSlack
from tests.published import MediaChannels, on_disk

BOT = "U0TUSK"


@pytest.fixture
async def slack():
    async with FakeSlack(bot_user_id=BOT) as fake:
        fake.add_user("U0ANN", "ann")
        yield fake


@pytest.fixture
async def open_channel(slack, tmp_path):
    """Start a Slack channel (Socket Mode) on the fake with a media store of the given cap; stopped after."""
    channels = MediaChannels(tmp_path, lambda published, store: SlackChannel(
        SlackSettings(slack.bot_token, app_token=slack.app_token, api_url=slack.api_url), published,
        [("help", "what I can do")], media=store), ready=slack.wait_connected)
    yield channels.start
    await channels.close()


def share(slack, text, *files, **extra):
    return slack.dm(text, subtype="file_share", files=list(files), upload=True, **extra)


async def test_voice_clip_photo_and_document_are_kept_with_the_text(open_channel, slack):
    """A recorded clip, a photo and two documents reach one published message per share, bytes under media/."""
    channel, store, published = await open_channel()
    clip = slack.add_file("audio_message.webm", b"webm clip", "audio/webm", subtype="slack_audio", duration_ms=4200)
    await slack.send_event(share(slack, "", clip))
    await slack.send_event(share(slack, "what is this?", slack.add_file("cat.png", b"\x89PNG cat", "image/png")))
    await slack.send_event(share(slack, "read both", slack.add_file("a.csv", b"x,y", "text/csv"),
                                 slack.add_file("b.pdf", b"%PDF b", "application/pdf")))
    await slack.wait_for(lambda: len(published) == 3)
    voice, photo, docs = published
    assert voice.text == "" and [(a.kind, a.duration) for a in voice.attachments] == [("voice", 4.2)]
    assert on_disk(store, voice) == [b"webm clip"]
    assert photo.text == "what is this?" and photo.attachments[0].kind == "image"
    assert on_disk(store, photo) == [b"\x89PNG cat"]
    assert docs.text == "read both" and on_disk(store, docs) == [b"x,y", b"%PDF b"]
    assert all(h["Authorization"] == f"Bearer {slack.bot_token}" for _, h in slack.downloads)
    assert kept.media_folder(store, ChatKey("slack", "D0ANN")).is_dir() and slack.posted == []


async def test_declared_oversize_is_refused_before_downloading(open_channel, slack):
    """A file declared over the cap gets a reply naming the limit and is never fetched; its text still goes."""
    channel, store, published = await open_channel(cap_mb=1)
    await slack.send_event(share(slack, "see attached", slack.add_file("big.zip", b"zip", size=3 * MB)))
    await slack.wait_for(lambda: published and slack.posted)
    assert slack.posted[0]["text"] == "I could not take big.zip: That file is 3.0 MB; I take files up to 1 MB."
    assert published[0].text == "see attached" and published[0].attachments == () and slack.downloads == []


async def test_actual_oversize_is_refused_while_downloading(open_channel, slack):
    """A file bigger than Slack declared is cut off at the cap: a reply, nothing kept, nothing published."""
    channel, store, published = await open_channel(cap_mb=1)
    await slack.send_event(share(slack, "", slack.add_file("liar.bin", b"x" * (2 * MB), size=10)))
    await slack.wait_for(lambda: slack.posted)
    assert "over 1 MB" in slack.posted[0]["text"]
    await slack.send_event(slack.dm("and this?"))  # published after the cut-off download: one chat, in order
    await slack.wait_for(lambda: published)
    assert [m.text for m in published] == ["and this?"]
    assert list(kept.media_folder(store, ChatKey("slack", "D0ANN")).iterdir()) == []


async def test_the_same_file_shared_twice_is_downloaded_once(open_channel, slack):
    """A file id seen before (shared again) is not fetched a second time."""
    channel, store, published = await open_channel()
    file = slack.add_file("notes.txt", b"same", "text/plain")
    await slack.send_event(share(slack, "one", file))
    await slack.send_event(share(slack, "two", file))
    await slack.wait_for(lambda: len(published) == 2)
    assert published[0].attachments == published[1].attachments and len(slack.downloads) == 1


async def test_without_the_files_read_scope_the_reply_names_it(open_channel, slack, caplog):
    """Without files:read Slack sends its sign-in page: the reply names the scope, the start-up log warns, the
    caption is still a message and nothing is kept."""
    slack.scopes.discard("files:read")
    caplog.set_level(logging.WARNING, "channels.slack")
    channel, store, published = await open_channel()
    assert "lacks the files:read scope" in caplog.text
    await slack.send_event(share(slack, "look", slack.add_file("cat.png", b"PNG", "image/png")))
    await slack.wait_for(lambda: published and slack.posted)
    assert "files:read" in slack.posted[0]["text"] and "reinstall" in slack.posted[0]["text"]
    assert published[0].text == "look" and published[0].attachments == ()
    assert slack.downloads == [] and list(kept.media_folder(store, ChatKey("slack", "D0ANN")).iterdir()) == []
    assert slack.bot_token not in caplog.text


async def test_the_token_goes_only_to_slacks_hosts(open_channel, slack):
    """A file URL on another host is not fetched with the bot token: a reply, nothing kept."""
    channel, store, published = await open_channel()
    file = slack.add_file("cat.png", b"PNG", "image/png")
    file["url_private_download"] = file["url_private_download"].replace("127.0.0.1", "localhost")
    await slack.send_event(share(slack, "", file))
    await slack.wait_for(lambda: slack.posted)
    assert "could not download it from Slack" in slack.posted[0]["text"] and slack.downloads == []
    assert token_may_go_to("https://files.slack.com/files-pri/T1-F1/download/a.png", "https://slack.com/api/")
    assert not token_may_go_to("https://files.slack.com.evil.io/a.png", "https://slack.com/api/")


async def test_channel_files_are_taken_only_when_addressed(open_channel, slack):
    """In a channel a file in a thread is fetched only with a mention, or when the thread listens."""
    channel, store, published = await open_channel()
    thread = slack.next_ts()
    chatter = slack.add_file("chatter.png", b"chatter", "image/png")
    await slack.send_event(slack.dm("", channel="C0GENERAL", channel_type="channel", subtype="file_share",
                                    files=[chatter], thread_ts=thread))
    await slack.send_event(slack.mention("and this?", thread_ts=thread,
                                         files=[slack.add_file("for-bot.png", b"for the bot", "image/png")]))
    await slack.wait_for(lambda: len(published) == 2)
    assert not published[0].addressed and published[0].attachments == ()
    assert published[1].text == "and this?" and on_disk(store, published[1]) == [b"for the bot"]
    await kept.put_settings(store.chats, ChatKey("slack", f"C0GENERAL-{thread}"), ChatSettings(listen=True))
    await slack.send_event(slack.dm("", channel="C0GENERAL", channel_type="channel", subtype="file_share",
                                    files=[slack.add_file("kept.png", b"kept", "image/png")], thread_ts=thread))
    await slack.wait_for(lambda: len(published) == 3)
    assert not published[2].addressed and on_disk(store, published[2]) == [b"kept"]
    assert len(slack.downloads) == 2 and all(p.get("thread_ts") == thread for p in slack.posted)


async def test_doctor_checks_the_files_read_scope(make_settings, slack):
    """`tusk doctor` reads the token's scopes from auth.test: without files:read the Slack check warns with the fix."""
    settings = make_settings(SLACK_BOT_TOKEN=slack.bot_token, SLACK_APP_TOKEN=slack.app_token,
                             SLACK_API_URL=slack.api_url, SLACK_ALLOW_FROM="U0ANN")
    with_scope = {c.name: c for c in await doctor.run_checks(settings)}["Slack"]
    slack.scopes.discard("files:read")
    without = {c.name: c for c in await doctor.run_checks(settings)}["Slack"]
    assert with_scope.verdict == "ok" and without.verdict == "warn"
    assert "files:read" in without.detail and "Bot Token Scopes" in without.fix


def test_file_objects_map_to_remotes(tmp_path):
    """Slack file objects become files to fetch: clips are voice notes with their duration, sizes as declared."""
    from channels.media_in import MediaIntake
    from channels.slack.media import files_of

    intake = MediaIntake(MediaStore(FileChats(tmp_path)), "Slack")
    event = {"files": [{"id": "F1", "name": "clip.webm", "mimetype": "audio/webm", "subtype": "slack_audio",
                        "duration_ms": 61500, "size": 900},
                       {"id": "F2", "title": "untitled", "size": "12"}, {"name": "no id"}]}
    clip, other = files_of(event, intake, "xoxb-t", "https://slack.com/api/")
    assert (clip.source_id, clip.kind, clip.duration, clip.size) == ("F1", "voice", 61.5, 900)
    assert (other.name, other.mime, other.kind, other.size) == ("untitled", "application/octet-stream", None, None)
