"""A real OpenAI-compatible speech server on 127.0.0.1 (`POST /v1/audio/speech`), for tests through real litellm.

    async with FakeSpeech() as tts:          # TUSK_TTS_MODEL=openai/tts-1, TUSK_TTS_API_BASE=tts.base_url
        tts.requests     # each accepted JSON body, plus "at" (time.monotonic() when it came)
        tts.status = 500 # later requests get OpenAI's error body with this status
        tts.delay = 5.0  # later requests answer after this many seconds (a slow engine)
        tts.seconds_per_char  # how long the audio is: 1/15 s a character, as speech runs

Requests are checked as OpenAI's API checks them: `Authorization: Bearer <key>` (401 otherwise),
JSON with a `model`, an `input` of 1-4096 characters and a `voice` (400 naming the field otherwise),
`response_format` one of mp3 (the default), opus, aac, flac, wav, pcm. The audio is real, made with
PyAV: a tone that swells and fades per "syllable", as long as the text would take to say, in the
format asked for (pcm: raw 24 kHz 16-bit mono, as OpenAI sends it).
"""

from __future__ import annotations

import asyncio
import io
import math
import time
from typing import Any

from aiohttp import web

from tests.fakes.loopback import serve

FORMATS = {"mp3": ("mp3", "libmp3lame", "audio/mpeg"), "opus": ("ogg", "libopus", "audio/ogg"),
           "aac": ("adts", "aac", "audio/aac"), "flac": ("flac", "flac", "audio/flac"),
           "wav": ("wav", "pcm_s16le", "audio/wav")}
RATE = 24_000
MAX_INPUT = 4096


def tone(seconds: float, rate: int = RATE) -> Any:
    """Mono float samples: a 220 Hz tone swelling and fading four times a second (speech-like loudness)."""
    import numpy as np

    t = np.arange(int(seconds * rate)) / rate
    envelope = 0.2 + 0.8 * np.abs(np.sin(math.pi * 4 * t))
    return (0.5 * envelope * np.sin(2 * math.pi * 220 * t)).astype(np.float32)


def audio_file(seconds: float, fmt: str = "mp3", rate: int = RATE) -> bytes:
    """`seconds` of tone in `fmt` (mp3, opus, aac, flac, wav, or pcm: raw s16le)."""
    import av
    import numpy as np

    samples = tone(seconds, rate)
    if fmt == "pcm":
        return (samples * 32767).astype("<i2").tobytes()
    container, codec, _ = FORMATS[fmt]
    out = io.BytesIO()
    with av.open(out, mode="w", format=container) as dst:
        stream = dst.add_stream(codec, rate=48_000 if codec == "libopus" else rate, layout="mono")
        resampler = av.AudioResampler(format=stream.codec_context.format.name, layout="mono", rate=stream.rate,
                                      frame_size=stream.codec_context.frame_size or None)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = rate
        for chunk in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(chunk):
                dst.mux(packet)
        for packet in stream.encode(None):
            dst.mux(packet)
    return out.getvalue()


class FakeSpeech:
    def __init__(self, api_key: str = "sk-test-secret-key", voices: tuple[str, ...] = ()) -> None:
        self.api_key = api_key
        self.voices = voices  # empty: any voice name (an OpenAI-compatible server's own voices)
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.delay = 0.0
        self.seconds_per_char = 1 / 15
        self.base_url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> FakeSpeech:
        app = web.Application()
        app.router.add_post("/v1/audio/speech", self._speech)
        self._runner, url = await serve(app)
        self.base_url = f"{url}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    @staticmethod
    def _error(status: int, message: str, param: str | None = None, kind: str = "invalid_request_error") -> web.Response:
        return web.json_response({"error": {"message": message, "type": kind, "param": param, "code": None}},
                                 status=status)

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._error(401, "Incorrect API key provided.", kind="invalid_api_key")
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, "We could not parse the JSON body of your request.")
        problem = self._problem(body)
        if problem is not None:
            return self._error(400, *problem)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.status != 200:
            return self._error(self.status, f"fake speech error {self.status}", kind="server_error")
        self.requests.append({**body, "at": time.monotonic()})
        fmt = body.get("response_format") or "mp3"
        seconds = max(0.5, len(body["input"]) * self.seconds_per_char / float(body.get("speed") or 1.0))
        data = await asyncio.to_thread(audio_file, seconds, fmt)
        mime = "audio/pcm" if fmt == "pcm" else FORMATS[fmt][2]
        return web.Response(body=data, content_type=mime)

    def _problem(self, body: Any) -> tuple[str, str] | None:
        if not isinstance(body, dict):
            return "The request body must be a JSON object.", "body"
        if not isinstance(body.get("model"), str) or not body["model"]:
            return "you must provide a model parameter", "model"
        text = body.get("input")
        if not isinstance(text, str) or not text:
            return "Missing required parameter: 'input'.", "input"
        if len(text) > MAX_INPUT:
            return f"'input' is too long: {len(text)} characters, at most {MAX_INPUT}.", "input"
        voice = body.get("voice")
        if not isinstance(voice, str) or not voice or (self.voices and voice not in self.voices):
            return f"Invalid value for 'voice': {voice!r}.", "voice"
        if (body.get("response_format") or "mp3") not in (*FORMATS, "pcm"):
            return f"Invalid value for 'response_format': {body['response_format']!r}.", "response_format"
        return None
