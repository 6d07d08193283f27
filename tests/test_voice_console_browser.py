"""The console plays a reply read out, in a real headless Chromium: an audio player beside the text."""

import re

import pytest

from tests.browser import playwright_expect
from tests.conftest import running
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_speech import FakeSpeech, audio_file
from tests.test_console_browser import browser, sign_in  # noqa: F401  (the browser fixture, the sign-in)

expect = playwright_expect()


@pytest.fixture
async def speaking_tusk(make_settings):
    async with FakeSpeech() as tts, running(make_settings(
            TUSK_TTS_MODEL="openai/tts-1", TUSK_TTS_API_BASE=tts.base_url,
            TUSK_TRANSCRIBE_MODEL="openai/whisper-1")) as app:
        yield app


def open_chat(page, tusk, chat):
    sign_in(page, tusk)
    page.goto(f"{tusk.url}/#/chat/{chat}")
    expect(page.locator(".chat-head h2")).to_have_text(chat)


def loaded_duration(page) -> float:
    """The spoken reply's length as the browser decoded it (waits until it has read the file's metadata)."""
    page.wait_for_function("() => document.querySelector('.msg.voice audio')?.readyState >= 1")
    return page.eval_on_selector(".msg.voice audio", "a => a.duration")


async def test_a_voice_note_from_the_console_is_answered_with_a_player(speaking_tusk, browser, fake_llm, tmp_path):
    """An audio file attached in the console goes as a voice note; the answer shows an audio player the browser
    can decode (its duration the spoken reply's), before the reply's text."""
    note = tmp_path / "note.ogg"
    note.write_bytes(audio_file(2.0, "opus"))
    fake_llm.script(Reply(text="Noted: **bread** and milk."))

    def scenario(page):
        open_chat(page, speaking_tusk, "kitchen")
        page.get_by_label("File to send").set_input_files(str(note))
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".msg.bot").last.locator("strong")).to_have_text("bread")
        expect(page.locator(".msg.voice audio")).to_have_attribute("src", re.compile("^blob:"))
        order = page.eval_on_selector_all(".msg.bot", "els => els.map(e => e.classList.contains('voice'))")
        return loaded_duration(page), order

    duration, order = await browser.run(scenario)
    assert order == [True, False]
    assert duration == pytest.approx(len("Noted: bread and milk.") / 15, abs=0.25)


async def test_voice_on_reads_typed_messages_out_in_the_console(speaking_tusk, browser, fake_llm):
    """After /voice on, a typed (streamed) message's answer comes with a player too."""
    fake_llm.script(Reply(text="It is a quarter past three in the afternoon."))

    def scenario(page):
        open_chat(page, speaking_tusk, "clock")
        page.get_by_label("Message").fill("/voice on")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".msg.bot").last).to_contain_text("Voice replies: on")
        page.get_by_label("Message").fill("what time is it?")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".msg.bot").last).to_contain_text("quarter past three")
        return loaded_duration(page)

    assert await browser.run(scenario) == pytest.approx(44 / 15, abs=0.25)
