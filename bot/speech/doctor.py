"""`tusk doctor`'s check of voice replies: the settings, then a short phrase really spoken and encoded.

    speech   ok    espeak-ng spoke a test phrase in 0.3 s (1.9 s of audio, 8 KB as OGG/Opus)
             fail  the engine's error (not found, refused, too slow for TUSK_TTS_TIMEOUT) and the fix
             skip  a provider model under --no-model (nothing is sent); a local command still runs

No check when neither TUSK_TTS_MODEL nor TUSK_TTS_COMMAND is set. The phrase is recorded (purpose speech), as
every synthesis is, in the configured store's usage ledger (bot/ops/own_calls.py: usage.sqlite where the data
dir exists, or the database's).
"""

from __future__ import annotations

import asyncio
import time

from bot.config import Settings
from bot.errors import ConfigError, SpeechError
from bot.ops.check import Check
from bot.speech.cost import Price, SpeechMeter
from bot.speech.engines import CommandSpeech
from bot.ops import own_calls

PHRASE = "Hello, this is Tusk, checking my voice."
FIX = {"command": "check TUSK_TTS_COMMAND: run it by hand with a phrase on its standard input",
       "model": "check TUSK_TTS_MODEL, TUSK_TTS_API_BASE and TUSK_TTS_API_KEY (or TUSK_API_KEY)"}


async def speech_checks(settings: Settings, model: bool = True) -> list[Check]:
    s = settings.speech_settings()
    if not s.configured:
        return []
    kind = "command" if s.command else "model"
    try:
        engine = s.engine()
    except ConfigError as exc:
        return [Check("speech", "fail", str(exc), FIX[kind])]
    assert engine is not None
    if not model and not isinstance(engine, CommandSpeech):
        return [Check("speech", "skip", f"{engine.name} not checked (--no-model): no request sent")]
    from bot.speech.encode import encode

    started = time.monotonic()
    with own_calls.ledger(settings) as ledger:
        meter = SpeechMeter(ledger, None, engine.name,
                            Price(source="local") if kind == "command" else None,
                            priced_by_table=kind == "model") if ledger is not None else None
        try:
            async with asyncio.timeout(s.timeout):
                admitted = meter.admit(len(PHRASE)) if meter is not None else None
                data = await engine.synthesize(PHRASE, "en")
                audio = await asyncio.to_thread(encode, data)
            if meter is not None and admitted is not None:
                meter.record(admitted, len(PHRASE), audio.duration)
        except TimeoutError:
            return [Check("speech", "fail", f"{engine.name} did not speak a short phrase within TUSK_TTS_TIMEOUT "
                          f"({s.timeout:g}s)", FIX[kind] + ", or raise TUSK_TTS_TIMEOUT")]
        except SpeechError as exc:
            return [Check("speech", "fail", str(exc), FIX[kind])]
    took = time.monotonic() - started
    return [Check("speech", "ok", f"{engine.name} spoke a test phrase in {took:.1f} s ({audio.duration:.1f} s of "
                  f"audio, {max(1, round(len(audio.data) / 1024))} KB as OGG/Opus)")]
