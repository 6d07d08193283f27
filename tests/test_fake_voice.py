"""The fakes refuse voice messages and uploads the way the real services do (through their real clients)."""

import base64
import json

import aiohttp
import openai
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from telegram import Bot
from telegram.error import BadRequest

from bot.speech.encode import encode
from tests.fakes.discord_payloads import IS_VOICE_MESSAGE
from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.fake_speech import FakeSpeech, audio_file
from tests.fakes.fake_telegram import FakeTelegram
from tests.fakes.voice_check import ogg_opus


@pytest.fixture(scope="module")
def voice():
    """A real three-second voice message (OGG/Opus)."""
    return encode(audio_file(3.0, "mp3"))


def test_the_ogg_check_reads_pages_crcs_and_the_opus_head(voice):
    """A voice message passes; a flipped byte (CRC), a cut end, or an OGG of another codec do not."""
    assert ogg_opus(voice.data).duration == pytest.approx(voice.duration, abs=1e-6)
    broken = bytearray(voice.data)
    broken[300] ^= 0xFF
    for bad, why in ((bytes(broken), "CRC mismatch"), (voice.data[:-50], "truncated"),
                     (audio_file(1.0, "mp3"), "not an OGG file")):
        with pytest.raises(ValueError, match=why):
            ogg_opus(bad)


async def test_telegram_refuses_what_is_not_an_opus_voice_or_does_not_match(voice):
    """sendVoice: an MP3 is refused (Tusk sends OGG/Opus), a duration off by more than a second is refused, and
    a caption over 1,024 characters is refused."""
    async with FakeTelegram() as tg, Bot(tg.token, base_url=tg.base_url + "/bot") as bot:
        with pytest.raises(BadRequest, match="(?i)wrong file type"):
            await bot.send_voice(42, audio_file(2.0, "mp3"), filename="a.mp3")
        with pytest.raises(BadRequest, match="(?i)duration 9 does not match"):
            await bot.send_voice(42, voice.data, duration=9, filename="v.ogg")
        with pytest.raises(BadRequest, match="(?i)caption is too long"):
            await bot.send_voice(42, voice.data, duration=3, caption="x" * 1025, filename="v.ogg")
        sent = await bot.send_voice(42, voice.data, duration=3, caption="hi", filename="v.ogg")
        assert sent.voice.duration == 3 and sent.caption == "hi" and len(tg.voices) == 1


async def post_voice(dc, channel, payload, data):
    form = aiohttp.FormData()
    form.add_field("payload_json", json.dumps(payload), content_type="application/json")
    form.add_field("files[0]", data, filename="voice-message.ogg")
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{dc.api_base}/channels/{channel}/messages", data=form,
                                headers={"Authorization": f"Bot {dc.token}"}) as resp:
            return resp.status, await resp.json()


async def test_discord_refuses_voice_messages_that_break_its_rules(voice):
    """A voice message with content (50159), without its waveform (50161), with a wrong duration (50161), or in
    a channel that forbids them (50173) is refused; a proper one is taken with its metadata."""
    entry = {"id": 0, "filename": "voice-message.ogg", "duration_secs": voice.duration,
             "waveform": base64.b64encode(voice.waveform).decode()}
    proper = {"flags": IS_VOICE_MESSAGE, "attachments": [entry]}
    async with FakeDiscord() as dc:
        assert (await post_voice(dc, "1", {**proper, "content": "hi"}, voice.data))[1]["code"] == 50159
        no_waveform = {**proper, "attachments": [{k: v for k, v in entry.items() if k != "waveform"}]}
        assert (await post_voice(dc, "1", no_waveform, voice.data))[1]["code"] == 50161
        wrong = {**proper, "attachments": [{**entry, "duration_secs": voice.duration + 5}]}
        assert (await post_voice(dc, "1", wrong, voice.data))[1]["code"] == 50161
        dc.no_voice.add("2")
        assert (await post_voice(dc, "2", proper, voice.data))[1]["code"] == 50173
        status, message = await post_voice(dc, "1", proper, voice.data)
        assert status == 200 and message["flags"] == IS_VOICE_MESSAGE
        assert message["attachments"][0]["duration_secs"] == entry["duration_secs"] and len(dc.voices) == 1


async def test_slack_completes_only_uploads_that_arrived_whole(voice):
    """files.completeUploadExternal fails for a file never uploaded or uploaded short; files_upload_v2 works."""
    async with FakeSlack() as slack:
        client = AsyncWebClient(slack.bot_token, base_url=slack.api_url)
        ticket = await client.files_getUploadURLExternal(filename="v.ogg", length=len(voice.data))
        with pytest.raises(SlackApiError, match="file_not_found"):
            await client.files_completeUploadExternal(files=[{"id": ticket["file_id"]}], channel_id="D1")
        async with aiohttp.ClientSession() as session:
            async with session.post(ticket["upload_url"], data=voice.data[:100]) as resp:
                assert resp.status == 200
        with pytest.raises(SlackApiError, match="file_upload_size_mismatch"):
            await client.files_completeUploadExternal(files=[{"id": ticket["file_id"]}], channel_id="D1")
        done = await client.files_upload_v2(channel="D1", file=voice.data, filename="reply.ogg", title="t",
                                            initial_comment="hello")
        assert done["file"]["mimetype"] == "audio/ogg" and slack.uploads[0]["initial_comment"] == "hello"
        slack.scopes.discard("files:write")
        with pytest.raises(SlackApiError, match="missing_scope"):
            await client.files_upload_v2(channel="D1", file=voice.data, filename="reply.ogg")


async def test_the_speech_server_checks_key_and_fields_as_openai_does():
    """A wrong key is 401; a request without a voice is 400 naming it; a proper one gets MP3 audio."""
    async with FakeSpeech(api_key="sk-right") as tts:
        async with openai.AsyncOpenAI(base_url=tts.base_url, api_key="sk-wrong", max_retries=0) as client:
            with pytest.raises(openai.AuthenticationError):
                await client.audio.speech.create(model="tts-1", voice="alloy", input="hi")
        async with openai.AsyncOpenAI(base_url=tts.base_url, api_key="sk-right", max_retries=0) as client:
            with pytest.raises(openai.BadRequestError, match="voice"):
                await client.audio.speech.create(model="tts-1", voice="", input="hi")
            audio = await client.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.")
            assert encode(audio.content).duration == pytest.approx(len("Hello there.") / 15, abs=0.1)
