"""Voice replies on the HTTP API and the OpenAI-compatible endpoint: a link to the audio in the answer, served
behind the token; speech failures leave the text on time; every synthesis in the ledger and under the limits."""

import asyncio

import aiohttp
import openai
import pytest

from tests.conftest import running
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_speech import FakeSpeech
from tests.fakes.voice_check import ogg_opus
from tests.media_files import audio_bytes
from tests import kept

ANSWER = "Your meeting with Sam is at ten tomorrow, in the small room."


@pytest.fixture
async def tts():
    async with FakeSpeech() as fake:
        yield fake


@pytest.fixture
def voice_settings(make_settings, tts):
    def make(**env):
        return make_settings(**{"TUSK_TTS_MODEL": "openai/tts-1", "TUSK_TTS_API_BASE": tts.base_url,
                                "TUSK_TRANSCRIBE_MODEL": "openai/whisper-1", **env})
    return make


async def post(app, chat, **fields):
    """A turn through the native API: JSON, or multipart when a `voice` note is given; the whole answer."""
    url = f"{app.url}/v1/chats/{chat}/messages"
    if "voice" in fields:
        form = aiohttp.FormData()
        form.add_field("text", fields.get("text", ""))
        form.add_field("voice", fields["voice"], filename="note.ogg", content_type="audio/ogg")
        request = app.client.post(url, data=form)
    else:
        request = app.client.post(url, json=fields)
    async with request as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def test_a_voice_note_gets_a_link_to_its_spoken_reply_behind_the_token(voice_settings, fake_llm, tts):
    """A voice note (a `voice` part) is answered with the text and a link to an OGG/Opus file of the spoken reply;
    the file needs the token, and another chat's path does not reach it."""
    async with running(voice_settings()) as app:
        fake_llm.script(Reply(text=ANSWER))
        answer = await post(app, "alice", voice=audio_bytes(2))
        assert answer["replies"] == [ANSWER]
        (voice,) = answer["voice"]
        assert voice["url"].startswith("/v1/chats/alice/voice/") and voice["mime_type"] == "audio/ogg"
        async with app.client.get(app.url + voice["url"]) as resp:
            assert resp.status == 200 and resp.content_type == "audio/ogg"
            data = await resp.read()
        info = ogg_opus(data)
        assert info.duration == pytest.approx(voice["duration_secs"], abs=0.01) and voice["bytes"] == len(data)
        assert info.duration == pytest.approx(len(tts.requests[0]["input"]) / 15, abs=0.2)
        async with aiohttp.ClientSession() as stranger:
            async with stranger.get(app.url + voice["url"]) as resp:
                assert resp.status == 401
        async with app.client.get(app.url + voice["url"].replace("/alice/", "/bob/")) as resp:
            assert resp.status == 404


async def test_typed_messages_stay_text_unless_voice_is_on(voice_settings, fake_llm, tts):
    """Under auto a typed message gets no voice; /voice on reads the next one out; /voice off stops it again."""
    async with running(voice_settings()) as app:
        fake_llm.script(Reply(text="One."), Reply(text="Two, read out."), Reply(text="Three."))
        assert "voice" not in await post(app, "bob", text="first")
        assert await app.say("bob", "/voice on") == [
            "Voice replies: on: every reply is read out as a voice message, with its text beside it."]
        spoken = await post(app, "bob", text="second")
        assert spoken["replies"] == ["Two, read out."] and len(spoken["voice"]) == 1
        await app.say("bob", "/voice off")
        assert "voice" not in await post(app, "bob", text="third")
        assert [r["input"] for r in tts.requests] == ["Two, read out."]


async def test_the_openai_endpoint_links_the_spoken_reply(voice_settings, fake_llm, tts):
    """With /voice on in its chat, the OpenAI-compatible answer carries `tusk_voice` on its message (also
    streamed, before the stop); an API key of that chat's prefix fetches the file, another chat's key cannot."""
    from bot.access.api_keys import ApiKeys

    async with running(voice_settings()) as app:
        _, secret = ApiKeys(app.settings.home).create("fam-")
        _, other = ApiKeys(app.settings.home).create("work-")
        async with openai.AsyncOpenAI(base_url=f"{app.url}/v1", api_key=secret, max_retries=0) as client:
            chat = {"X-Tusk-Chat": "fam-anna"}
            await client.chat.completions.create(model="openai/fake-model", extra_headers=chat,
                                                 messages=[{"role": "user", "content": "/voice on"}])
            fake_llm.script(Reply(text=ANSWER), Reply(text="Streamed and spoken."))
            done = await client.chat.completions.create(model="openai/fake-model", extra_headers=chat,
                                                        messages=[{"role": "user", "content": "when?"}])
            link = done.choices[0].message.model_extra["tusk_voice"]
            assert done.choices[0].message.content == ANSWER and link["mime_type"] == "audio/ogg"
            stream = await client.chat.completions.create(model="openai/fake-model", extra_headers=chat, stream=True,
                                                          messages=[{"role": "user", "content": "again?"}])
            deltas = [c.choices[0].delta async for c in stream if c.choices]
        streamed = [d.model_extra["tusk_voice"] for d in deltas if (d.model_extra or {}).get("tusk_voice")]
        assert len(streamed) == 1 and "".join(d.content or "" for d in deltas) == "Streamed and spoken."
        async with aiohttp.ClientSession() as keyed:
            async with keyed.get(app.url + link["url"], headers={"Authorization": f"Bearer {secret}"}) as resp:
                assert resp.status == 200 and ogg_opus(await resp.read()).duration > 1
            async with keyed.get(app.url + link["url"], headers={"Authorization": f"Bearer {other}"}) as resp:
                assert resp.status == 401


@pytest.mark.parametrize("failure", ["down", "refusing", "slow"])
async def test_speech_failing_leaves_the_text_once_and_on_time(voice_settings, fake_llm, tts, failure, caplog):
    """Speech down, refusing (a 400) or slower than TUSK_TTS_TIMEOUT: the turn answers with its text alone,
    saved once, without waiting for the engine, and the chat's next turn goes on."""
    env = {"TUSK_TTS_TIMEOUT": "1"}
    if failure == "down":
        env["TUSK_TTS_API_BASE"] = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    elif failure == "refusing":
        tts.status = 400
    else:
        tts.delay = 60.0
    async with running(voice_settings(**env)) as app:
        fake_llm.script(Reply(text=ANSWER), Reply(text="Next."))
        async with asyncio.timeout(20):  # far below the slow engine's 60 s
            answer = await post(app, "carol", voice=audio_bytes(3))
        assert answer == {"replies": [ANSWER], "formats": ["markdown"]}
        assert (await post(app, "carol", text="and?"))["replies"] == ["Next."]
        saved = [m.content for m in kept.on_disk(app, "http", "carol").unconsolidated if m.role == "assistant"]
        assert saved == [ANSWER, "Next."]
        assert "the reply goes as text only" in caplog.text
        assert app.ledger.report("purpose")[0].key != "speech" and tts.requests == []


async def test_every_synthesis_is_in_the_ledger_and_in_usage(voice_settings, fake_llm, tts):
    """A spoken reply is one ledger row (purpose speech, its characters, litellm's per-character price) and
    /usage shows it."""
    async with running(voice_settings()) as app:
        fake_llm.script(Reply(text=ANSWER))
        await post(app, "dana", voice=audio_bytes(4))
        (row,) = [r for r in app.ledger.report("purpose", channel="http", chat="dana") if r.key == "speech"]
        characters = len(tts.requests[0]["input"])
        assert (row.calls, row.characters) == (1, characters)
        assert row.cost_usd == pytest.approx(characters * 15 / 1_000_000)
        (usage,) = await app.say("dana", "/usage")
        assert f"  speech: 1 call, {characters // 4:,} in / 0 out tokens, {characters:,} characters read out" in usage


async def test_a_spend_limit_keeps_replies_in_text_and_says_so_once(voice_settings, fake_llm, tts):
    """Over the chat's daily limit, voice notes are answered in text; the chat is told once, not every turn."""
    async with running(voice_settings(TUSK_CHAT_LIMIT_DAILY_USD="0.0001")) as app:
        fake_llm.script(Reply(text=ANSWER), Reply(text="Still text."))
        first = await post(app, "erin", voice=audio_bytes(5))
        second = await post(app, "erin", voice=audio_bytes(6))
        assert first["replies"][0] == ANSWER and "voice" not in first
        assert first["replies"][1].startswith("(Replies are not read out for now. ")
        assert "this chat's daily spending limit ($0.0001)" in first["replies"][1]
        assert first["formats"] == ["markdown", "plain"]
        assert second == {"replies": ["Still text."], "formats": ["markdown"]} and tts.requests == []


@pytest.mark.parametrize("price, cost", [(None, None), ("2", 2 / 1_000_000)])
async def test_a_speech_model_litellm_does_not_price(voice_settings, fake_llm, tts, price, cost):
    """A local server's model litellm has no price for: recorded as unknown (never $0), its characters counted as
    tokens for the token limits; with TUSK_TTS_PRICE, at that price per million characters (source configured)."""
    env = {"TUSK_TTS_MODEL": "openai/kokoro", "TUSK_TTS_VOICE": "af_bella"}
    if price is not None:
        env["TUSK_TTS_PRICE"] = price
    async with running(voice_settings(**env)) as app:
        fake_llm.script(Reply(text=ANSWER))
        await post(app, "fay", voice=audio_bytes(7))
        assert tts.requests[0]["voice"] == "af_bella" and tts.requests[0]["model"] == "kokoro"
        characters = len(tts.requests[0]["input"])
        (row,) = [r for r in app.ledger.report("model") if r.key == "openai/kokoro"]
        assert (row.characters, row.input_tokens) == (characters, characters // 4)
        if cost is None:
            assert row.cost_usd is None and row.unknown_calls == 1
        else:
            assert row.cost_usd == pytest.approx(characters * cost)
