"""Tusk on a fake chat platform with voice both ways, for each platform's voice reply tests: voice notes
transcribed (the fake LLM's transcription route), replies spoken by the fake speech server
(tests/fakes/fake_speech.py).

    @pytest.fixture
    async def start_tusk(make_settings, dc):
        async with voice_tusks(make_settings, DISCORD_BOT_TOKEN=dc.token, ...) as start:
            yield start

    app = await start_tusk(TUSK_VOICE_REPLIES="on")   # more env as keywords; the speech server is app.tts
"""

import contextlib

from bot.app import TuskApp
from tests.fakes.fake_speech import FakeSpeech

VOICE_ENV = {"TUSK_TRANSCRIBE_MODEL": "openai/whisper-1", "TUSK_TTS_MODEL": "openai/tts-1"}


@contextlib.asynccontextmanager
async def voice_tusks(make_settings, connected=None, **platform_env):
    """A `start(**env)` that starts a Tusk on the platform `platform_env` points at, with voice both ways, and
    returns it ready (after `connected()`, when given: Slack's Socket Mode); all are stopped at the end."""
    async with contextlib.AsyncExitStack() as stack, FakeSpeech() as tts:
        async def start(**env):
            app = TuskApp(make_settings(**{**platform_env, **VOICE_ENV, "TUSK_TTS_API_BASE": tts.base_url, **env}))
            app.add_platforms()
            app.tts = tts
            await stack.enter_async_context(app)
            await app.ready()
            if connected is not None:
                await connected()
            return app

        yield start
