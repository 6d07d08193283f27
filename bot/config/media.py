"""The settings of files and voice: what a chat keeps and how it is read (bot/media/), replies read out (bot/speech/).
Concerns of `bot.config.Settings`; their endpoints and keys default to the model's (TUSK_API_BASE, TUSK_API_KEY)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, SecretStr

from bot.config.fields import OrUnset, env
from bot.media import MediaSettings
from bot.media.voice import TranscribeSettings
from bot.speech.config import SpeechSettings
from memory.documents import DocumentLimits
from memory.media import MB, MediaLimits


class MediaConfig(BaseModel):
    """Voice notes, photos and documents: the files kept (memory/media.py), transcribed, seen, indexed."""
    if TYPE_CHECKING:  # other concerns' settings, read here (Settings has them all)
        api_base: str | None  # TUSK_API_BASE (LlmConfig)
        api_key: SecretStr | None  # TUSK_API_KEY (LlmConfig)
        llm_timeout: float  # TUSK_LLM_TIMEOUT (LlmConfig)

    media_max_mb: float = env("TUSK_MEDIA_MAX_MB", 20.0, gt=0, le=2048)  # one file (memory/media.py)
    media_chat_mb: float = env("TUSK_MEDIA_CHAT_MB", 200.0, gt=0)  # all files one chat keeps
    media_chat_files: int = env("TUSK_MEDIA_CHAT_FILES", 200, ge=1)
    transcribe_model: OrUnset[str] = env("TUSK_TRANSCRIBE_MODEL", None)  # voice notes (bot/media/voice.py)
    transcribe_api_base: OrUnset[str] = env("TUSK_TRANSCRIBE_API_BASE", None)  # default: TUSK_API_BASE
    transcribe_api_key: OrUnset[SecretStr] = env("TUSK_TRANSCRIBE_API_KEY", None)  # default: TUSK_API_KEY
    show_transcript: Literal["groups", "always", "never"] = env("TUSK_SHOW_TRANSCRIPT", "groups")
    vision: OrUnset[bool] = env("TUSK_VISION", None)  # unset: litellm's capability data for TUSK_MODEL
    vision_model: OrUnset[str] = env("TUSK_VISION_MODEL", None)  # describes photos when TUSK_MODEL cannot see
    document_max_chars: int = env("TUSK_DOCUMENT_MAX_CHARS", 60_000, ge=1000, le=2_000_000)
    # the text of documents and web pages kept for search_history (memory/documents.py): per document (0: none)
    document_index_max_chars: int = env("TUSK_DOCUMENT_INDEX_MAX_CHARS", 200_000, ge=0, le=10_000_000)
    document_index_chat_max_chars: int = env("TUSK_DOCUMENT_INDEX_CHAT_MAX_CHARS", 2_000_000, ge=0,
                                             le=1_000_000_000)  # all of one chat's kept documents

    def media_limits(self) -> MediaLimits:
        return MediaLimits(int(self.media_max_mb * MB), int(self.media_chat_mb * MB), self.media_chat_files)

    def document_limits(self) -> DocumentLimits:
        return DocumentLimits(self.document_index_max_chars, self.document_index_chat_max_chars)

    def media_settings(self) -> MediaSettings:
        key = self.transcribe_api_key or self.api_key
        return MediaSettings(
            TranscribeSettings(self.transcribe_model, self.transcribe_api_base or self.api_base,
                               key.get_secret_value() if key else None, self.llm_timeout),
            self.show_transcript, self.vision, self.vision_model, self.document_max_chars, self.document_limits())


class SpeechConfig(BaseModel):
    """Voice replies (bot/speech/): when a reply is read out, by which engine and voice."""
    if TYPE_CHECKING:  # other concerns' settings, read here (Settings has them all)
        api_base: str | None  # TUSK_API_BASE (LlmConfig)
        api_key: SecretStr | None  # TUSK_API_KEY (LlmConfig)

    voice_replies: Literal["auto", "on", "off"] = env("TUSK_VOICE_REPLIES", "auto")  # the chats' default (/voice)
    voice_text: Literal["caption", "message"] = env("TUSK_VOICE_TEXT", "caption")  # the text on the voice, or after
    tts_model: OrUnset[str] = env("TUSK_TTS_MODEL", None)  # litellm speech model: openai/tts-1, openai/kokoro
    tts_api_base: OrUnset[str] = env("TUSK_TTS_API_BASE", None)  # default: TUSK_API_BASE
    tts_api_key: OrUnset[SecretStr] = env("TUSK_TTS_API_KEY", None)  # default: TUSK_API_KEY
    tts_voice: str = env("TUSK_TTS_VOICE", "", max_length=200)  # the provider's voice (alloy), {voice} in a command
    tts_command: OrUnset[str] = env("TUSK_TTS_COMMAND", None)  # a local engine: espeak-ng -v {lang} -w {out} --stdin
    tts_timeout: float = env("TUSK_TTS_TIMEOUT", 30.0, gt=0, le=600)  # seconds a reply waits for its voice
    tts_max_chars: int = env("TUSK_TTS_MAX_CHARS", 1500, ge=50, le=4096)  # read out up to a sentence end
    tts_price: OrUnset[float] = env("TUSK_TTS_PRICE", None, ge=0)  # USD per million characters

    def speech_settings(self) -> SpeechSettings:
        key = self.tts_api_key or self.api_key
        return SpeechSettings(model=self.tts_model, api_base=self.tts_api_base or self.api_base,
                              api_key=key.get_secret_value() if key else None, voice=self.tts_voice.strip(),
                              command=self.tts_command, timeout=self.tts_timeout, max_chars=self.tts_max_chars,
                              price_per_mchar=self.tts_price, replies=self.voice_replies, text_as=self.voice_text)
