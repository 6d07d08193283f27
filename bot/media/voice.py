"""Voice notes and audio files to text, through litellm's transcription API.

`TUSK_TRANSCRIBE_MODEL` names the model (`whisper-1`, `groq/whisper-large-v3`, ...);
`TUSK_TRANSCRIBE_API_BASE` / `TUSK_TRANSCRIBE_API_KEY` default to the chat model's. The file is
handed to litellm as an open file (streamed, never read whole here). A failure of the service
becomes an `LLMError` whose `user_message` asks to send the note again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.errors import LLMError, LLMUnavailable, MediaRefused
from bot.llm.loader import litellm
from bot.llm.translate import translate

logger = logging.getLogger(__name__)

NOT_SET_UP = ("I can't listen to voice messages here yet: the operator can set TUSK_TRANSCRIBE_MODEL "
              "(e.g. whisper-1, or groq/whisper-large-v3) to have them transcribed. Please type it meanwhile.")
FAILED = "I couldn't transcribe that voice message just now (the transcription service failed). Please send it again."


@dataclass(frozen=True, slots=True)
class TranscribeSettings:
    model: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    timeout: float = 120.0


def clock(seconds: float | None) -> str:
    """`0:42`, `12:05`, `1:02:03`; "" when the length is unknown."""
    if seconds is None:
        return ""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Transcriber:
    def __init__(self, settings: TranscribeSettings, meter: Any = None) -> None:
        self.settings = settings
        self.meter = meter  # bot/usage/meter.py: each transcription recorded in the usage ledger

    async def transcribe(self, path: Path, name: str, mime: str) -> str:
        """The transcript of the audio file at `path`; raises MediaRefused without a model, LLMError on failure."""
        s = self.settings
        if not s.model:
            raise MediaRefused(NOT_SET_UP)
        kwargs = {key: value for key, value in (("api_base", s.api_base), ("api_key", s.api_key)) if value}
        started = time.monotonic()
        try:
            with open(path, "rb") as fh:
                response = await asyncio.wait_for(
                    litellm().atranscription(model=s.model, file=(name, fh, mime), timeout=s.timeout, max_retries=0,
                                             **kwargs), s.timeout)
        except TimeoutError as exc:
            error: LLMError = LLMUnavailable(f"{s.model} did not transcribe within {s.timeout:g}s")
            raise self._explained(error) from exc
        except Exception as exc:  # litellm raises many types; all are translated here
            raise self._explained(translate(exc)) from exc
        if self.meter is not None:
            cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
            self.meter.note(s.model, "transcription", cost if isinstance(cost, int | float) else None,
                            (time.monotonic() - started) * 1000)
        text = getattr(response, "text", None)
        if text is None and isinstance(response, dict):
            text = response.get("text")
        return (text or "").strip()

    def _explained(self, error: LLMError) -> LLMError:
        logger.warning("transcription with %s failed: %s", self.settings.model, error)
        error.user_message = FAILED
        return error
