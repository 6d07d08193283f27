"""Voice replies: time from the model's last token to the voice message sent, and the audio's size a second.

A running Tusk on the fake Telegram (tests/fakes/fake_telegram.py) is sent voice notes (transcribed by the
fake model's server); the fake model answers each with a 300-character reply (three sentences, a little
Markdown). Measured from the moment the model's answer is written (its last token: voice turns are not
streamed) to the moment the fake Telegram has taken the sendVoice upload, with each engine:

    espeak-ng     Debian's espeak-ng through TUSK_TTS_COMMAND (a real local engine, on this machine's CPU)
    fake server   the fake OpenAI-compatible speech server (tests/fakes/fake_speech.py: MP3 made with PyAV,
                  its own encoding time included) through litellm's speech API

Each figure is the median of `--runs` turns (after one warm-up turn), [min-max]; the split shows the
engine (synthesis), the OGG/Opus encoding, and the rest (language detection, the upload to Telegram).

    python bench/speech.py [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bot.app import TuskApp  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.speech import encode as encoding  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, Reply  # noqa: E402
from tests.fakes.fake_speech import FakeSpeech  # noqa: E402
from tests.fakes.fake_telegram import FakeTelegram  # noqa: E402
from tests.media_files import audio_bytes  # noqa: E402

REPLY = ("Tomorrow looks **dry** in the morning, with a light wind from the west and about twelve degrees. "
         "Clouds come in after lunch, and there is a good chance of rain by four, so take an umbrella along today. "
         "The weekend should be sunny and warmer, up to eighteen degrees on Sunday afternoon, with a calm wind.")


def settings(home: Path, llm: FakeLLM, tg: FakeTelegram, **env: str):
    for name in list(os.environ):
        if name.startswith(("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_")):
            del os.environ[name]
    return load_settings(TUSK_HOME=str(home), TUSK_MODEL="openai/fake-model", TUSK_API_BASE=llm.base_url,
                         TUSK_API_KEY="sk-bench", TUSK_HTTP_PORT="0", TUSK_LLM_RETRIES="0", TUSK_DM_POLICY="open",
                         TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url,
                         TUSK_TRANSCRIBE_MODEL="openai/whisper-1", **env)


class Timed:
    """Wraps a coroutine or function, keeping how long each call took (seconds)."""

    def __init__(self) -> None:
        self.spans: list[float] = []

    def around(self, fn):
        if asyncio.iscoroutinefunction(fn):
            async def timed(*args, **kw):
                started = time.monotonic()
                try:
                    return await fn(*args, **kw)
                finally:
                    self.spans.append(time.monotonic() - started)
        else:
            def timed(*args, **kw):
                started = time.monotonic()
                try:
                    return fn(*args, **kw)
                finally:
                    self.spans.append(time.monotonic() - started)
        return timed


async def run(engine: str, runs: int) -> dict[str, list[float]]:
    async with FakeLLM() as llm, FakeTelegram() as tg, FakeSpeech(api_key="sk-bench") as tts:
        env = ({"TUSK_TTS_COMMAND": "espeak-ng -v {lang} -w {out} --stdin"} if engine == "espeak-ng" else
               {"TUSK_TTS_MODEL": "openai/tts-1", "TUSK_TTS_API_BASE": tts.base_url})
        answered: list[float] = []

        def responder(body):
            answered.append(time.monotonic())  # the reply is written whole right after: its last token
            return Reply(text=REPLY)

        llm.responder = responder
        with tempfile.TemporaryDirectory() as home:
            app = TuskApp(settings(Path(home), llm, tg, **env))
            app.add_platforms()
            assert app.voice is not None
            synth, enc = Timed(), Timed()
            app.voice.engine = _wrapped(app.voice.engine, synth)
            original = encoding.encode
            with contextlib.ExitStack() as stack:
                stack.callback(setattr, sys.modules["bot.speech.replies"], "encode", original)
                sys.modules["bot.speech.replies"].encode = enc.around(original)
                async with app:
                    await app.ready()
                    out: dict[str, list[float]] = {"total": [], "engine": [], "encode": [], "bytes/s": []}
                    for n in range(runs + 1):
                        tg.push_message(42, None, voice=audio_bytes(n + 1))
                        await tg.wait_for(lambda: len(tg.voices) == n + 1, timeout=120)
                        if n == 0:
                            continue  # warm-up: connections, the first engine start
                        voice = tg.voices[-1]
                        out["total"].append(voice["at"] - answered[-1])
                        out["engine"].append(synth.spans[-1])
                        out["encode"].append(enc.spans[-1])
                        out["bytes/s"].append(len(voice["audio"]) / voice["ogg"].duration)
                    out["chars"] = [len(tts.requests[-1]["input"])] if tts.requests else []
                    out["seconds"] = [tg.voices[-1]["ogg"].duration]
                    return out


def _wrapped(engine, timer: Timed):
    class Wrapped:
        name = engine.name
        synthesize = staticmethod(timer.around(engine.synthesize))

    return Wrapped()


def fmt(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    values = [v * scale for v in values]
    return f"{statistics.median(values):.2f} {unit} [{min(values):.2f}-{max(values):.2f}]"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    engines = ["fake server", *(["espeak-ng"] if shutil.which("espeak-ng") else [])]
    print(f"reply: {len(REPLY)} characters; {args.runs} runs each (median [min-max])")
    print(f"{'engine':<12} {'last token -> voice sent':>26} {'engine':>22} {'OGG/Opus encoding':>22} "
          f"{'audio':>10} {'bytes a second':>16}")
    for engine in engines:
        r = await run(engine, args.runs)
        print(f"{engine:<12} {fmt(r['total']):>26} {fmt(r['engine']):>22} {fmt(r['encode']):>22} "
              f"{r['seconds'][0]:>8.1f} s {statistics.median(r['bytes/s']):>14,.0f}")
    if not shutil.which("espeak-ng"):
        print("espeak-ng is not installed (apt-get install espeak-ng): its row is missing")


if __name__ == "__main__":
    asyncio.run(main())
