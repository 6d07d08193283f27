"""Voice replies on Telegram: a voice note answered with sendVoice (OGG/Opus, checked as Telegram checks it)."""

import pytest

from bot.app import TuskApp
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_speech import FakeSpeech
from tests.fakes.fake_telegram import FakeTelegram
from tests.media_files import audio_bytes
from tests.test_speech import needs_espeak
from tests import kept

ANSWER = "Sure. It is **sunny** today, with a light breeze from the west."


@pytest.fixture
async def tg():
    async with FakeTelegram(token="123:ABC", username="tusk_bot") as fake:
        yield fake


@pytest.fixture
async def tts():
    async with FakeSpeech() as fake:
        yield fake


@pytest.fixture
async def start_tusk(make_settings, tg):
    """Tusk on the fake Telegram with voice notes transcribed (extra env as keyword arguments); stopped after."""
    apps = []

    async def start(**env):
        app = TuskApp(make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url,
                                    TUSK_TRANSCRIBE_MODEL="openai/whisper-1", **env))
        app.add_platforms()
        await app.__aenter__()
        apps.append(app)
        await app.ready()
        return app

    yield start
    for app in apps:
        await app.__aexit__(None, None, None)


def speech_env(tts, **extra):
    return {"TUSK_TTS_MODEL": "openai/tts-1", "TUSK_TTS_API_BASE": tts.base_url, **extra}


async def test_a_voice_note_is_answered_with_a_voice_message_captioned_with_the_text(start_tusk, tg, tts, fake_llm):
    """A voice note gets sendVoice: an OGG/Opus file whose duration is what was spoken, the reply as its caption,
    and no second text message; the reply is saved once."""
    app = await start_tusk(**speech_env(tts))
    fake_llm.script(Reply(text=ANSWER))
    tg.push_message(42, None, voice=audio_bytes(3))
    await tg.wait_for(lambda: tg.voices, timeout=20)
    voice = tg.voices[0]
    (spoken,) = [r["input"] for r in tts.requests]
    assert spoken == "Sure. It is sunny today, with a light breeze from the west."
    assert voice["ogg"].channels == 1 and voice["ogg"].duration == pytest.approx(len(spoken) / 15, abs=0.2)
    assert voice["duration"] == round(voice["ogg"].duration)
    assert voice["caption"] == "Sure. It is <b>sunny</b> today, with a light breeze from the west."
    assert voice["parse_mode"] == "HTML"
    assert voice["caption_plain"] == "Sure. It is sunny today, with a light breeze from the west."
    tg.push_message(42, "/status")  # a sentinel: everything of the voice turn was sent before its answer
    await tg.wait_for(lambda: tg.sent)
    assert [m["plain"].split("\n")[0] for m in tg.sent] == ["Model: openai/fake-model"]
    saved = [m.content for m in kept.on_disk(app, "telegram", "42").unconsolidated if m.role == "assistant"]
    assert saved == [ANSWER]


async def test_a_typed_message_is_answered_in_text_under_auto(start_tusk, tg, tts, fake_llm):
    """With /voice auto (the default), a typed message gets text only and speech is never asked for."""
    await start_tusk(**speech_env(tts))
    fake_llm.script(Reply(text=ANSWER))
    tg.push_message(42, "what's the weather?")
    await tg.wait_for(lambda: tg.sent)
    assert tg.sent[0]["plain"] == "Sure. It is sunny today, with a light breeze from the west."
    assert tg.voices == [] and tts.requests == []


async def test_a_long_reply_goes_as_voice_then_its_text(start_tusk, tg, tts, fake_llm):
    """A reply over Telegram's 1,024-character caption is sent as the voice first, then the whole text after it;
    speech stops at a sentence end within TUSK_TTS_MAX_CHARS."""
    long = " ".join(f"Sentence number {i} says a little more about the weather." for i in range(40))
    await start_tusk(**speech_env(tts, TUSK_TTS_MAX_CHARS="300"))
    fake_llm.script(Reply(text=long))
    tg.push_message(42, None, voice=audio_bytes(4))
    await tg.wait_for(lambda: tg.voices and tg.sent, timeout=20)
    assert "caption" not in tg.voices[0]
    assert tg.voices[0]["at"] < tg.sent[0]["at"]
    assert "".join(m["plain"] for m in tg.sent).replace("\n", " ").split() == long.split()
    spoken = tts.requests[0]["input"]
    assert len(spoken) <= 300 and spoken.endswith("weather. The rest is in the text.")
    assert long.startswith(spoken.removesuffix(" The rest is in the text."))


async def test_voice_off_keeps_a_chat_in_text(start_tusk, tg, tts, fake_llm):
    """/voice off in a chat: its voice notes are answered in text; /voice on: its typed messages get voice."""
    await start_tusk(**speech_env(tts))
    tg.push_message(42, "/voice off")
    await tg.wait_for(lambda: tg.sent)
    assert tg.sent[0]["plain"] == "Voice replies: off: replies are text only."
    fake_llm.script(Reply(text="First answer."), Reply(text="Second answer, spoken."))
    tg.push_message(42, None, voice=audio_bytes(5))
    await tg.wait_for(lambda: len(tg.sent) == 2, timeout=20)
    assert tg.sent[1]["plain"] == "First answer." and tg.voices == [] and tts.requests == []
    tg.push_message(42, "/voice on")
    tg.push_message(42, "and now?")
    await tg.wait_for(lambda: tg.voices, timeout=20)
    assert tg.voices[0]["caption_plain"] == "Second answer, spoken."


async def test_telegram_refusing_voice_still_gets_the_text_once(start_tusk, tg, tts, fake_llm):
    """A chat that forbids voice messages (Telegram's 400) still gets the reply as text, once."""
    await start_tusk(**speech_env(tts))
    tg.fail_next("sendVoice", 400, "Bad Request: VOICE_MESSAGES_FORBIDDEN")
    fake_llm.script(Reply(text=ANSWER))
    tg.push_message(42, None, voice=audio_bytes(6))
    await tg.wait_for(lambda: tg.sent, timeout=20)
    tg.push_message(42, "/status")
    await tg.wait_for(lambda: len(tg.sent) == 2)
    assert tg.sent[0]["plain"] == "Sure. It is sunny today, with a light breeze from the west."
    assert tg.voices == [] and [m for m, _ in tg.calls].count("sendVoice") == 1


@needs_espeak
async def test_espeak_ng_answers_a_german_voice_note_with_a_free_voice(start_tusk, tg, fake_llm):
    """Debian's espeak-ng as TUSK_TTS_COMMAND: a German reply comes back as a voice message, recorded in the
    ledger as a local engine's call ($0, its characters)."""
    app = await start_tusk(TUSK_TTS_COMMAND="espeak-ng -v {lang} -w {out} --stdin")
    fake_llm.script(Reply(text="Morgen wird es sonnig und warm, mit einem leichten Wind aus Westen."))
    tg.push_message(42, None, voice=audio_bytes(8))
    await tg.wait_for(lambda: tg.voices, timeout=30)
    assert tg.voices[0]["ogg"].duration > 2 and tg.voices[0]["caption_plain"].startswith("Morgen wird es sonnig")
    (row,) = [r for r in app.ledger.report("model") if r.key == "command:espeak-ng"]
    assert (row.calls, row.characters, row.cost_usd) == (1, 67, 0.0)


async def test_text_as_message_sends_the_voice_then_the_text(start_tusk, tg, tts, fake_llm):
    """TUSK_VOICE_TEXT=message: even a short reply goes as a voice without caption, then its text after it."""
    await start_tusk(**speech_env(tts, TUSK_VOICE_TEXT="message"))
    fake_llm.script(Reply(text=ANSWER))
    tg.push_message(42, None, voice=audio_bytes(9))
    await tg.wait_for(lambda: tg.voices and tg.sent, timeout=20)
    assert "caption" not in tg.voices[0] and tg.voices[0]["at"] < tg.sent[0]["at"]
    assert tg.sent[0]["plain"] == "Sure. It is sunny today, with a light breeze from the west."
