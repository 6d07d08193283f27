"""Voice replies on Slack: a voice clip answered with an audio upload (files_upload_v2's three steps, strictly),
the text as its comment."""

import pytest

from tests.fakes.fake_llm import Reply
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.voice_check import ogg_opus
from tests.voice_tusk import voice_tusks

BOT = "U0TUSK"
ANSWER = "The train leaves at *nine*, from platform two."


@pytest.fixture
async def slack():
    async with FakeSlack(bot_user_id=BOT) as fake:
        fake.add_user("U0ANN", "ann")
        yield fake


@pytest.fixture
async def start_tusk(make_settings, slack):
    """Tusk on the fake Slack (Socket Mode), clips transcribed, speech from the fake server."""
    async with voice_tusks(make_settings, slack.wait_connected, SLACK_BOT_TOKEN=slack.bot_token,
                           SLACK_APP_TOKEN=slack.app_token, SLACK_API_URL=slack.api_url) as start:
        yield start


async def send_clip(slack, n=1):
    clip = slack.add_file(f"audio_message_{n}.webm", b"webm clip %d" % n, "audio/webm", subtype="slack_audio",
                          duration_ms=4200)
    await slack.send_event(slack.dm("", subtype="file_share", files=[clip], upload=True))


async def test_a_voice_clip_is_answered_with_an_audio_upload_commented_with_the_text(start_tusk, slack, fake_llm):
    """A DM clip gets an OGG/Opus upload in the DM (Slack's three upload steps) with the reply as its comment,
    and no separate text message."""
    app = await start_tusk()
    fake_llm.script(Reply(text=ANSWER))
    await send_clip(slack)
    await slack.wait_for(lambda: slack.uploads, timeout=20)
    (upload,) = slack.uploads
    assert upload["filename"] == "reply.ogg" and upload["channel_id"].startswith("D")
    assert ogg_opus(upload["data"]).duration == pytest.approx(len(app.tts.requests[0]["input"]) / 15, abs=0.2)
    assert upload["initial_comment"] == "The train leaves at _nine_, from platform two."
    await slack.send_event(slack.dm("/status"))  # a sentinel after the voice turn
    await slack.wait_for(lambda: slack.posted)
    assert slack.posted[0]["text"].startswith("Model:") and len(slack.posted) == 1


async def test_without_files_write_the_reply_is_text_once(start_tusk, slack, fake_llm, caplog):
    """An app installed without files:write: the upload is refused, the reply goes as text once, the log names
    the scope."""
    await start_tusk()
    slack.scopes.discard("files:write")
    fake_llm.script(Reply(text=ANSWER))
    await send_clip(slack, 2)
    await slack.wait_for(lambda: slack.posted, timeout=20)
    await slack.send_event(slack.dm("/status"))
    await slack.wait_for(lambda: len(slack.posted) == 2)
    assert slack.posted[0]["text"] == "The train leaves at _nine_, from platform two." and slack.uploads == []
    assert "files:write" in caplog.text
