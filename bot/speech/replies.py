"""A turn's reply read out: which turns are, and how the voice and its text reach the chat.

    wants_voice(msg)   this turn is answered with voice: the chat's /voice (on | off | auto), else
                       TUSK_VOICE_REPLIES; auto answers a voice note with voice and text with text. Commands,
                       chatter and channels that cannot play voice (the terminal) are always text.
    deliver(reply)     after the reply is final and saved: spoken within TUSK_TTS_TIMEOUT (spoken.py, the
                       engine, encode.py; metered in cost.py), then sent as the platform's voice message with
                       the text beside it; any failure -> the text alone, once

The text beside the voice (TUSK_VOICE_TEXT):

    caption   on the voice message itself, where the platform takes a caption and the text fits it
              (Telegram: 1,024 characters; Slack: the upload's comment; the HTTP API: the same answer);
              otherwise, as on Discord (a voice message holds nothing else), as the next message
    message   always as the next message, after the voice

The voice goes first: it is what the person asked for by speaking, and a caption keeps the two together.
The text waits for it at most TUSK_TTS_TIMEOUT (then goes alone), so a slow or broken engine delays a
reply by that much and never loses it; the text is sent once, whichever way it goes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from bot.commands import parse as parse_command
from bot.delivery import Send
from bot.errors import DeliveryError, SpeechError
from bot.events import ChatKey, InboundMessage, OutboundMessage, OutboundVoice, SpokenAudio
from bot.speech import language
from bot.speech.config import Mode, SpeechSettings
from bot.speech.cost import CHARS_PER_SECOND, Price, SpeechMeter
from bot.speech.encode import encode
from bot.speech.engines import CommandSpeech, Engine, ProviderSpeech
from bot.speech.spoken import spoken
from bot.usage import meter as usage
from bot.usage.ledger_sql import SqlLedger
from bot.usage.limits import Limits
from memory.chat_settings import ChatSettings

logger = logging.getLogger(__name__)

PAUSED = "(Replies are not read out for now. {limit} Until then I answer in text only.)"


class VoiceOutlet(Protocol):
    """What a channel offers to send voice (channels/<platform>/voice.py)."""

    def voice_caption(self, text: str) -> bool:
        """Does `text` fit as the voice message's caption on this platform?"""
        ...

    async def send_voice(self, msg: OutboundVoice) -> None:
        """Send the voice message (with `msg.caption` on it, if set); DeliveryError if the platform refused it."""
        ...


Outlets = Callable[[ChatKey], VoiceOutlet | None]  # the chat's channel, if it sends voice (bot/bus.py)


class VoiceReplies:
    def __init__(self, settings: SpeechSettings, engine: Engine, meter: SpeechMeter, home: Path,
                 outlets: Outlets, send: Send) -> None:
        self.settings, self.engine, self.meter, self.home = settings, engine, meter, Path(home)
        self.outlets, self.send = outlets, send
        self.languages = language.ChatLanguages()
        self._told: set[tuple[ChatKey, str, float]] = set()  # (chat, limit, reset) a pause was told for
        self._warm: asyncio.Future[object] | None = None

    def warm(self) -> None:
        """Load the language model in a thread now, not in the first voice reply's time."""
        if self._warm is None:
            self._warm = asyncio.ensure_future(asyncio.to_thread(language.load))

    async def ready(self) -> None:
        self.warm()
        assert self._warm is not None
        await asyncio.shield(self._warm)

    async def aclose(self) -> None:
        """Wait for the language model's loading, if it is under way (a thread cannot be stopped)."""
        if self._warm is not None:
            await asyncio.gather(self._warm, return_exceptions=True)

    def mode(self, prefs: ChatSettings) -> Mode:
        """The chat's /voice setting, else the owner's default."""
        return prefs.voice or self.settings.replies

    def wants_voice(self, msg: InboundMessage, prefs: ChatSettings) -> bool:
        """Is this turn's reply read out? (Decided before the turn: a voice turn is not streamed as text.)"""
        if not msg.addressed or self.outlets(msg.key) is None:
            return False
        if msg.injected is None and not msg.attachments and parse_command(msg.text) is not None:
            return False  # a command's answer is Tusk's own words, shown as written
        mode = self.mode(prefs)
        return mode == "on" or mode == "auto" and any(a.kind == "voice" for a in msg.attachments)

    async def deliver(self, reply: OutboundMessage) -> bool:
        """The final reply as a voice message with its text beside it; the text alone if speech fails. False
        when the platform took neither (a schedule's run records it)."""
        outlet = self.outlets(reply.key)
        audio = None
        if outlet is not None:
            with usage.scope(purpose="speech"):
                try:
                    audio = await self.speak(reply)
                except usage.SpendLimitReached as exc:
                    sent = await self.send(reply) is not False
                    await self._paused(reply, exc)
                    return sent
                except SpeechError as exc:
                    logger.warning("the reply goes as text only: %s", exc)
        if outlet is None or audio is None:
            return await self.send(reply) is not False
        caption = reply.text if self.settings.text_as == "caption" and outlet.voice_caption(reply.text) else None
        try:
            await outlet.send_voice(OutboundVoice(reply.key, audio, caption, reply.reply_to, reply.ref))
        except Exception as exc:  # delivery boundary: the platform refused the voice; the text still goes, once
            logger.warning("the voice message was not sent (%s); the reply goes as text", exc,
                           exc_info=not isinstance(exc, DeliveryError))  # a refusal needs no traceback
            caption = None
        if caption is None:
            return await self.send(reply) is not False
        return True

    async def speak(self, reply: OutboundMessage) -> SpokenAudio | None:
        """The reply read out and encoded within TUSK_TTS_TIMEOUT; None when there are no words to read.
        SpeechError when the engine fails or is too slow; SpendLimitReached when a limit stops it."""
        s = self.settings
        try:
            async with asyncio.timeout(s.timeout):
                await self.ready()
                plain = spoken(reply.text, s.max_chars).text  # its words, without code and links to mislead
                lang = self.languages.of(reply.key, await asyncio.to_thread(language.detect, plain))
                words = spoken(reply.text, s.max_chars, lang)
                if not words.text:
                    return None
                admitted = self.meter.admit(len(words.text))
                try:
                    data = await self.engine.synthesize(words.text, lang)
                except BaseException:
                    self.meter.release(admitted)
                    raise
                try:
                    audio = await asyncio.to_thread(encode, data)
                except BaseException:  # the engine spoke (and may have charged for it): recorded all the same
                    self.meter.record(admitted, len(words.text), len(words.text) / CHARS_PER_SECOND)
                    raise
                self.meter.record(admitted, len(words.text), audio.duration)
                return audio
        except TimeoutError:
            raise SpeechError(f"{self.engine.name} did not speak within TUSK_TTS_TIMEOUT ({s.timeout:g}s)") from None

    async def _paused(self, reply: OutboundMessage, exc: usage.SpendLimitReached) -> None:
        """Tell the chat once per limit and period that replies are text only until the limit resets."""
        refusal = exc.refusal
        mark = (reply.key, refusal.limit, refusal.resets_at.timestamp())
        if mark in self._told:
            return
        if len(self._told) > 10_000:
            self._told.clear()
        self._told.add(mark)
        await self.send(OutboundMessage(reply.key, PAUSED.format(limit=refusal.sentence()), reply_to=reply.reply_to,
                                          verbatim=True, ref=reply.ref))  # Tusk's own words: shown as written


def voice_replies(settings: SpeechSettings, ledger: SqlLedger, limits: Limits | None, home: Path, outlets: Outlets,
                  send: Send) -> VoiceReplies | None:
    """The voice replies the settings ask for, or None without a speech engine (ConfigError for bad settings)."""
    engine = settings.engine()
    if engine is None:
        return None
    if settings.price_per_mchar is not None:
        own: Price | None = Price(per_char=settings.price_per_mchar / 1_000_000, source="configured")
    else:
        own = Price(source="local") if isinstance(engine, CommandSpeech) else None
    meter = SpeechMeter(ledger, limits, engine.name, own, priced_by_table=isinstance(engine, ProviderSpeech))
    return VoiceReplies(settings, engine, meter, home, outlets, send)
