"""Voice replies on Discord: a voice message (IS_VOICE_MESSAGE, one OGG/Opus attachment with its duration and
waveform, checked as Discord checks them), then the text."""

import base64

import pytest

from tests import kept
from tests.fakes.discord_payloads import IS_VOICE_MESSAGE, MANAGE_MESSAGES, snowflake
from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import Reply
from tests.media_files import audio_bytes
from tests.voice_tusk import voice_tusks

ANSWER = "It will rain after lunch, so take an umbrella with you."


@pytest.fixture
async def dc():
    async with FakeDiscord(token="fake-discord-token-123") as fake:
        fake.guild = guild = fake.add_guild()
        fake.channel = guild.add_channel()
        fake.mods = guild.add_role("mods", MANAGE_MESSAGES)
        fake.alice = fake.add_user("alice")
        fake.dm = snowflake()
        yield fake


@pytest.fixture
async def start_tusk(make_settings, dc):
    """Tusk on the fake Discord, voice notes transcribed, speech from the fake server (extra env as keywords)."""
    async with voice_tusks(make_settings, DISCORD_BOT_TOKEN=dc.token, DISCORD_API_BASE=dc.api_base,
                           DISCORD_GATEWAY_URL=dc.gateway_url) as start:
        yield start


def voice_note(dc):
    return dc.attachment("voice-message.ogg", audio_bytes(7), content_type="audio/ogg", voice=True)


async def test_a_voice_note_is_answered_with_a_voice_message_then_the_text(start_tusk, dc, fake_llm):
    """A DM voice note gets a voice message Discord accepts (flag, one Opus attachment, duration and waveform
    matching the audio, no content), then the reply's text as a message after it."""
    app = await start_tusk()
    fake_llm.script(Reply(text=ANSWER))
    await dc.message(dc.dm, dc.alice, "", attachments=(voice_note(dc),))
    await dc.wait_for(lambda: dc.voices and dc.sent, timeout=20)
    voice, text = dc.voices[0], dc.sent[0]
    assert voice["flags"] & IS_VOICE_MESSAGE and not voice.get("content")
    (entry,) = voice["attachments"]
    assert entry["duration_secs"] == pytest.approx(voice["ogg"].duration, abs=0.01)
    assert voice["ogg"].duration == pytest.approx(len(app.tts.requests[0]["input"]) / 15, abs=0.2)
    waveform = base64.b64decode(entry["waveform"])
    assert 1 <= len(waveform) <= 256 and max(waveform) == 255 and min(waveform) < 255
    assert text["content"] == ANSWER and voice["at"] < text["at"] and len(dc.sent) == 1


async def test_a_guild_mention_gets_a_voice_reply_quoting_it_when_voice_is_on(start_tusk, dc, fake_llm):
    """/voice on in a guild channel: a typed mention is answered with a voice message that replies to it."""
    await start_tusk()
    await dc.message(dc.channel, dc.alice, f"{dc.mention} /voice on", guild=dc.guild, roles=(dc.mods,))
    await dc.wait_for(lambda: dc.sent)
    fake_llm.script(Reply(text=ANSWER))
    asked = await dc.message(dc.channel, dc.alice, f"{dc.mention} weather?", guild=dc.guild)
    await dc.wait_for(lambda: dc.voices and len(dc.sent) == 2, timeout=20)
    assert str(dc.voices[0]["message_reference"]["message_id"]) == asked["id"]
    assert dc.sent[1]["content"] == ANSWER


async def test_a_channel_that_refuses_voice_still_gets_the_text_once(start_tusk, dc, fake_llm):
    """Discord's 50173 (no voice messages here): the reply goes as text, once."""
    await start_tusk()
    dc.no_voice.add(dc.dm)
    fake_llm.script(Reply(text=ANSWER))
    await dc.message(dc.dm, dc.alice, "", attachments=(voice_note(dc),))
    await dc.wait_for(lambda: dc.sent, timeout=20)
    await dc.message(dc.dm, dc.alice, "/status")  # a sentinel after the voice turn
    await dc.wait_for(lambda: len(dc.sent) == 2)
    assert dc.sent[0]["content"] == ANSWER and dc.voices == []


async def test_only_moderators_change_a_server_channels_voice(start_tusk, dc):
    """/voice on in a server channel from a member without Manage Messages is refused; the setting stays."""
    app = await start_tusk()
    await dc.message(dc.channel, dc.alice, f"{dc.mention} /voice on", guild=dc.guild)
    await dc.wait_for(lambda: dc.sent)
    assert dc.sent[0]["content"] == "In a group, only its administrators can change how I answer."
    assert app.voice.mode((await kept.chat(app, "discord", dc.channel)).prefs) == "auto"
