"""`tusk doctor` checks voice replies live: a short phrase spoken by the engine and encoded, or why it was not."""

import sys

import pytest

from bot.ops import doctor
from tests import kept
from tests.fakes.fake_speech import FakeSpeech
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli
from tests.test_speech import needs_espeak


def speech(checks):
    return {c.name: c for c in checks}.get("speech")


@needs_espeak
async def test_doctor_speaks_a_phrase_with_espeak_ng(fake_llm, tmp_path):
    """`tusk doctor` with Debian's espeak-ng as TUSK_TTS_COMMAND: OK, with the audio's length and size."""
    env = env_for(fake_llm, tmp_path, TUSK_TTS_COMMAND="espeak-ng -v {lang} -w {out} --stdin")
    code, out, _ = await tusk_cli("doctor", "--no-model", env=env)
    line = next(line for line in out.splitlines() if "speech" in line)
    assert code == 0 and line.startswith("OK    speech") and "command:espeak-ng spoke a test phrase" in line
    assert "KB as OGG/Opus" in line


@pytest.mark.both_stores
async def test_doctor_checks_the_speech_server_and_says_what_failed(make_settings):
    """A speech server that answers: OK (and the phrase is in the ledger of the store the settings name); one
    that refuses the key: FAIL with the settings to check; --no-model sends it nothing."""
    async with FakeSpeech(api_key="sk-speech") as tts:
        good = make_settings(TUSK_TTS_MODEL="openai/tts-1", TUSK_TTS_API_BASE=tts.base_url,
                             TUSK_TTS_API_KEY="sk-speech")
        good.home.mkdir(parents=True)
        check = speech(await doctor.run_checks(good, model=False))
        assert check.verdict == "skip" and tts.requests == []
        check = speech(await doctor.run_checks(good))
        assert check.verdict == "ok" and "openai/tts-1 spoke a test phrase" in check.detail
        assert [r["input"] for r in tts.requests] == ["Hello, this is Tusk, checking my voice."]
        with kept.ledger(good) as ledger:
            (row,) = [r for r in ledger.report("purpose") if r.key == "speech"]
        assert (row.calls, row.characters) == (1, 39)
        refused = make_settings(TUSK_TTS_MODEL="openai/tts-1", TUSK_TTS_API_BASE=tts.base_url,
                                TUSK_TTS_API_KEY="sk-wrong")
        check = speech(await doctor.run_checks(refused))
        assert check.verdict == "fail" and "TUSK_TTS_API_KEY" in check.fix and "sk-wrong" not in check.detail


async def test_doctor_fails_a_command_that_is_too_slow_or_missing(make_settings, tmp_path):
    """A command slower than TUSK_TTS_TIMEOUT fails naming the limit; a program not on PATH fails naming it."""
    slow = tmp_path / "slow.py"
    slow.write_text("import time; time.sleep(30)\n")
    check = speech(await doctor.run_checks(make_settings(TUSK_TTS_COMMAND=f"{sys.executable} {slow}",
                                                         TUSK_TTS_TIMEOUT="1"), model=False))
    assert check.verdict == "fail" and "1s" in check.detail and "TUSK_TTS_TIMEOUT" in check.fix
    check = speech(await doctor.run_checks(make_settings(TUSK_TTS_COMMAND="no-such-tts -w {out}"), model=False))
    assert check.verdict == "fail" and "'no-such-tts' is not an executable on PATH" in check.detail
