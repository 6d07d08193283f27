"""The speech settings, as bot/config.py hands them over, and the engine they name.

    TUSK_TTS_MODEL (+ _API_BASE, _API_KEY, _VOICE)   litellm's speech API      -> engines.ProviderSpeech
    TUSK_TTS_COMMAND (+ _VOICE)                      a local program           -> engines.CommandSpeech
    neither                                          no speech: replies stay text, /voice says how to set it up

`engine()` fails at start (ConfigError) when both are set, when the command's program is missing, or when
the voice extra (PyAV, the language model) is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.errors import ConfigError
from bot.speech.engines import CommandSpeech, Engine, ProviderSpeech

Mode = Literal["auto", "on", "off"]
TextAs = Literal["caption", "message"]
DEFAULT_VOICE = "alloy"  # OpenAI's API requires a voice; every OpenAI-compatible server takes a name


@dataclass(frozen=True, slots=True)
class SpeechSettings:
    model: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    voice: str = ""
    command: str | None = None
    timeout: float = 30.0  # seconds a reply waits for its speech; then the text goes alone
    max_chars: int = 1500  # characters read out at most (to a sentence end); the rest is in the text only
    price_per_mchar: float | None = None  # the owner's price, USD per million characters (TUSK_TTS_PRICE)
    replies: Mode = "auto"  # TUSK_VOICE_REPLIES: the chats' default (/voice changes one chat's)
    text_as: TextAs = "caption"  # TUSK_VOICE_TEXT: the reply's text on the voice message, or a message after it

    @property
    def configured(self) -> bool:
        return bool(self.model or self.command)

    def engine(self) -> Engine | None:
        """The engine the settings name, or None without one; ConfigError for settings that cannot work."""
        if self.model and self.command:
            raise ConfigError("TUSK_TTS_MODEL and TUSK_TTS_COMMAND are both set: keep the one that should speak")
        if not self.configured:
            return None
        _check_installed()
        if self.command:
            return CommandSpeech.parse(self.command, self.voice, self.timeout)
        assert self.model is not None
        return ProviderSpeech(self.model, self.voice or DEFAULT_VOICE, self.api_base, self.api_key, self.timeout)


def _check_installed() -> None:
    variable = "TUSK_TTS_MODEL or TUSK_TTS_COMMAND"
    try:
        import av  # noqa: F401
        import numpy  # noqa: F401
        import py3langid  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"{variable} is set but the voice support is not installed ({exc.name} is missing): "
                          "in Tusk's venv, from its clone: pip install '.[voice]'") from exc
