"""What is read out of a reply, in which language, by which engine, and how it is encoded (bot/speech/)."""

import math
import os
import shutil
import sys
import textwrap

import pytest

from bot.errors import ConfigError, SpeechError
from bot.events import ChatKey
from bot.speech.config import SpeechSettings
from bot.speech.encode import encode
from bot.speech.engines import CommandSpeech
from bot.speech.language import ChatLanguages, detect
from bot.speech.spoken import spoken
from tests.fakes.fake_speech import audio_file
from tests.fakes.loopback import wait_until
from tests.fakes.voice_check import ogg_opus

ESPEAK = shutil.which("espeak-ng")
needs_espeak = pytest.mark.skipif(ESPEAK is None and os.environ.get("CI") != "true",
                                  reason="Debian's espeak-ng is not installed (.ci/run installs it)")


def test_markdown_is_read_as_words_and_code_tables_links_are_named():
    """Emphasis, headings and list marks go; code blocks, tables, long URLs and images are named; a link's
    words are read; emoji are left out."""
    reply = textwrap.dedent("""\
        # Today's plan 🎉

        Here is **the plan**, see [the docs](https://example.com/a/very/long/path/to/the/page.html):

        - buy `milk`
        - read https://example.org/an/article/that/is/long/enough/to/be/named

        | day | task |
        |-----|------|
        | Mon | gym  |

        ```python
        print("hi")
        ```
        ![a cat on a mat](cat.png) Done!""")
    assert spoken(reply, 1000).text == ("Today's plan. Here is the plan, see the docs: buy milk. read (a link). "
                                        "(a table) (code) a cat on a mat Done!")


def test_the_names_are_in_the_replys_language():
    """A German reply names its code "(Code)"; a language Tusk has no words for falls back to English."""
    assert spoken("Hier ist der Code:\n\n```\nx = 1\n```", 500, "de").text == "Hier ist der Code: (Code)"
    assert spoken("```\nx\n```", 500, "sw").text == "(code)"


def test_a_long_reply_is_spoken_to_a_sentence_end():
    """Past max_chars the words stop at the last sentence end that fits (or the last word, if none does), and
    say that the rest is in the text, within max_chars, in the reply's language."""
    reply = "First sentence here. Second one is longer than that! Third? " + "word " * 50
    cut = spoken(reply, 85)
    assert cut.cut and cut.text == "First sentence here. Second one is longer than that! Third? The rest is in the text."
    assert spoken("word " * 40, 57).text == "word word word word word word… The rest is in the text."
    assert spoken("Ein Satz. " * 40, 60, "de").text.endswith("Ein Satz. Der Rest steht im Text.")
    assert not spoken("Short.", 60).cut


def test_the_language_of_a_reply_and_of_a_chat():
    """A reply's language is detected; a reply too short to tell keeps the chat's last language."""
    assert detect("Das Wetter ist heute schön, und morgen regnet es wieder.") == "de"
    assert detect("ok") is None
    chats, key = ChatLanguages(), ChatKey("telegram", "42")
    assert chats.of(key, detect("Bonjour, je voudrais réserver une table pour ce soir.")) == "fr"
    assert chats.of(key, detect("Oui.")) == "fr" and chats.of(ChatKey("telegram", "43"), detect("Oui.")) == "en"


@pytest.mark.parametrize("fmt", ["mp3", "wav", "flac", "opus", "aac"])
def test_any_engine_format_becomes_ogg_opus_at_a_voice_bitrate(fmt):
    """MP3, WAV, FLAC, OGG/Opus or AAC from an engine: OGG with one mono Opus stream, as long as the input,
    about 4 KB a second, with a waveform of one point per 100 ms."""
    audio = encode(audio_file(6.0, fmt))
    info = ogg_opus(audio.data)
    assert info.channels == 1 and info.duration == pytest.approx(6.0, abs=0.1)
    assert audio.duration == pytest.approx(info.duration, abs=1e-6)
    assert 2_000 < len(audio.data) / audio.duration < 6_000
    assert len(audio.waveform) == math.ceil(audio.duration / 0.1) and max(audio.waveform) == 255


def test_silence_and_garbage_are_refused():
    """Audio that holds nothing to hear, or bytes that are no audio, raise SpeechError (the text goes alone)."""
    import numpy as np
    import wave
    import io

    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes(np.zeros(16000, dtype="<i2").tobytes())
    with pytest.raises(SpeechError, match="no sound"):
        encode(buf.getvalue())
    with pytest.raises(SpeechError, match="could not be read"):
        encode(b"this is not audio at all" * 100)


def engine_script(tmp_path, body: str) -> str:
    """A small local 'engine' (a Python script), its command line for TUSK_TTS_COMMAND."""
    script = tmp_path / "engine.py"
    script.write_text(textwrap.dedent(body))
    return f"{sys.executable} {script}"


async def test_a_command_gets_the_text_on_stdin_and_its_placeholders(tmp_path, monkeypatch):
    """The text reaches the engine on stdin (never as an argument, never through a shell); {out}, {lang} and
    {voice} are filled in; the audio is read from {out}; none of Tusk's secrets are in its environment."""
    monkeypatch.setenv("TUSK_API_KEY", "sk-never-for-engines")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:never-for-engines")
    seen = tmp_path / "seen.txt"
    command = engine_script(tmp_path, f"""
        import os, sys, wave
        text = sys.stdin.read()
        open({str(seen)!r}, "w").write(repr((sys.argv[1:], text, sorted(os.environ))))
        with wave.open(sys.argv[3], "wb") as w:
            w.setnchannels(1); w.setsampwidth(2); w.setframerate(8000); w.writeframes(b"\\x00\\x40" * 8000)
        """) + " {lang} {voice} {out}"
    engine = CommandSpeech.parse(command, voice="anna", timeout=10)
    data = await engine.synthesize("Hallo; rm -rf / $(whoami) `id`", "de")
    args, text, env = eval(seen.read_text())
    assert "TUSK_API_KEY" not in env and "TELEGRAM_BOT_TOKEN" not in env and "PATH" in env
    assert args[:2] == ["de", "anna"] and args[2].endswith("speech.wav") and text == "Hallo; rm -rf / $(whoami) `id`"
    assert data.startswith(b"RIFF") and not os.path.exists(args[2])  # its temporary folder is gone


async def test_a_command_that_overruns_is_killed_with_its_children(tmp_path):
    """Past the time limit the engine and what it started are killed, and SpeechError says so."""
    pids = tmp_path / "pids"
    command = engine_script(tmp_path, f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(60)
        """)
    engine = CommandSpeech.parse(command, timeout=1.5)
    with pytest.raises(SpeechError, match="did not finish within 1.5s; it was stopped"):
        await engine.synthesize("hello", "en")
    for pid in map(int, pids.read_text().split()):
        await wait_until(lambda: gone(pid), 5.0)  # SIGKILL is sent to the group; its delivery takes a moment


def gone(pid: int) -> bool:
    """No such process, or only its zombie left for its parent to reap."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


async def test_a_failing_command_is_a_speech_error_with_its_message(tmp_path):
    """An engine that exits non-zero: SpeechError with its exit code and the end of its error output."""
    command = engine_script(tmp_path, """
        import sys
        sys.stderr.write("unknown voice xx\\n"); sys.exit(3)
        """)
    with pytest.raises(SpeechError, match=r"failed \(exit 3\): unknown voice xx"):
        await CommandSpeech.parse(command).synthesize("hello", "en")


def test_bad_speech_settings_stop_tusk_with_the_fix():
    """Both engines, a missing program, or {voice} without TUSK_TTS_VOICE: a ConfigError naming the fix."""
    with pytest.raises(ConfigError, match="both set"):
        SpeechSettings(model="openai/tts-1", command="espeak-ng --stdin").engine()
    with pytest.raises(ConfigError, match="not an executable on PATH"):
        SpeechSettings(command="no-such-speech-engine -w {out}").engine()
    with pytest.raises(ConfigError, match="TUSK_TTS_VOICE is not set"):
        SpeechSettings(command=f"{sys.executable} -v {{voice}}").engine()


def test_speech_without_the_voice_extra_says_what_to_install(monkeypatch):
    """Speech set up in an install without PyAV: Tusk stops at start naming the extra to install."""
    monkeypatch.setitem(sys.modules, "av", None)  # as if the package were absent: importing it fails
    with pytest.raises(ConfigError, match=r"the voice support is not installed \(av is missing\).*'\.\[voice\]'"):
        SpeechSettings(command=f"{sys.executable} -c pass").engine()


@needs_espeak
@pytest.mark.parametrize("command", ["espeak-ng -v {lang} -w {out} --stdin", "espeak-ng -v {lang} --stdout --stdin"])
async def test_espeak_ng_speaks_through_the_command_path(command):
    """Debian's espeak-ng as TUSK_TTS_COMMAND, writing to {out} or to its standard output: German text with
    -v {lang} becomes a WAV that encodes to a voice message."""
    engine = CommandSpeech.parse(command, timeout=30)
    audio = encode(await engine.synthesize("Guten Morgen. Heute scheint die Sonne.", "de"))
    assert ogg_opus(audio.data).duration > 1.5
