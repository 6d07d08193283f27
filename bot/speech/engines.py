"""The speech engines: text in, audio bytes out (any format; encode.py makes it a voice message).

    ProviderSpeech   TUSK_TTS_MODEL through litellm's speech API: OpenAI's speech models, or any server with
                     OpenAI's /v1/audio/speech (a local Kokoro, openedai-speech, LocalAI) at TUSK_TTS_API_BASE
    CommandSpeech    TUSK_TTS_COMMAND, a local engine (espeak-ng, piper): the text on its standard input, the
                     audio in the file `{out}` names (or on its standard output when there is no `{out}`)

A command is split like a shell would split it (shlex) but run without one: the text never becomes an
argument, so nothing in a reply can reach a shell. In each argument `{out}` becomes a fresh file in a
private temporary folder, `{lang}` the reply's language (ISO 639-1: `de`), `{voice}` TUSK_TTS_VOICE. It
runs in its own process group, in that temporary folder, with a minimal environment (`PASSED`: the path,
home, locale and library paths; never Tusk's keys and tokens), and is killed, group and all, when it
overruns the time limit or the turn gives up on it. Every failure is a `SpeechError` saying what went
wrong (never the key, never the text).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import shutil
import signal
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.errors import ConfigError, LLMError, SpeechError

logger = logging.getLogger(__name__)

MAX_AUDIO_BYTES = 50 * 1024 * 1024  # an engine answering more than this is refused (it is far past any reply)
STDERR_SHOWN = 300  # characters of a failed command's error output kept for the log and `tusk doctor`
PASSED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH", "XDG_DATA_HOME",
          "XDG_DATA_DIRS", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "ESPEAK_DATA_PATH", "VIRTUAL_ENV")


def engine_env() -> dict[str, str]:
    """What a local engine inherits of Tusk's environment: what programs need to run, none of the secrets."""
    return {k: v for k, v in os.environ.items() if k in PASSED or k.startswith("LC_")}


class Engine(Protocol):
    @property
    def name(self) -> str:
        """What the usage ledger records as the model: the litellm model, or `command:<program>`."""
        ...

    async def synthesize(self, text: str, language: str) -> bytes:
        """Audio bytes for `text` (spoken in `language` where the engine can be told); SpeechError on failure."""
        ...


@dataclass(frozen=True, slots=True)
class ProviderSpeech:
    """litellm's `aspeech`: model, input, voice (required by OpenAI's API), api_base, api_key."""

    model: str
    voice: str = "alloy"
    api_base: str | None = None
    api_key: str | None = None
    timeout: float = 30.0

    @property
    def name(self) -> str:
        return self.model

    async def synthesize(self, text: str, language: str) -> bytes:
        from bot.llm.loader import litellm
        from bot.llm.translate import translate

        extra = {key: value for key, value in (("api_base", self.api_base), ("api_key", self.api_key)) if value}
        try:
            response = await litellm().aspeech(model=self.model, input=text, voice=self.voice,
                                               timeout=self.timeout, max_retries=0, **extra)
            data = response.content
        except Exception as exc:  # litellm raises many kinds; read through translate() for a plain cause
            cause = translate(exc)
            raise SpeechError(f"{self.model} did not speak: {_said(cause)}") from exc
        if not isinstance(data, bytes | bytearray) or not data:
            raise SpeechError(f"{self.model} answered with no audio")
        if len(data) > MAX_AUDIO_BYTES:
            raise SpeechError(f"{self.model} answered with {len(data):,} bytes of audio, over the "
                              f"{MAX_AUDIO_BYTES:,} taken")
        return bytes(data)


def _said(error: LLMError) -> str:
    return str(error) or type(error).__name__


@dataclass(frozen=True, slots=True)
class CommandSpeech:
    """A local program: text on stdin, audio in `{out}` (or on stdout)."""

    argv: tuple[str, ...]
    voice: str = ""
    timeout: float = 30.0

    @property
    def name(self) -> str:
        return f"command:{Path(self.argv[0]).name}"

    @classmethod
    def parse(cls, command: str, voice: str = "", timeout: float = 30.0) -> CommandSpeech:
        """TUSK_TTS_COMMAND read; ConfigError naming the problem (not splittable, program not found)."""
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:
            raise ConfigError(f"TUSK_TTS_COMMAND cannot be read ({exc}): write it as a command line, e.g. "
                              "espeak-ng -v {lang} -w {out} --stdin") from exc
        if not argv:
            raise ConfigError("TUSK_TTS_COMMAND is empty: set it to e.g. espeak-ng -v {lang} -w {out} --stdin")
        if shutil.which(argv[0]) is None:
            raise ConfigError(f"TUSK_TTS_COMMAND: {argv[0]!r} is not an executable on PATH: install it (Debian: "
                              f"apt install espeak-ng) or give its full path")
        if "{voice}" in command and not voice:
            raise ConfigError("TUSK_TTS_COMMAND uses {voice} but TUSK_TTS_VOICE is not set: set it to a voice the "
                              "engine knows")
        return cls(argv, voice, timeout)

    def arguments(self, out: Path, language: str) -> list[str]:
        return [a.replace("{out}", str(out)).replace("{lang}", language).replace("{voice}", self.voice)
                for a in self.argv]

    async def synthesize(self, text: str, language: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="tusk-speech-") as folder:
            out = Path(folder) / "speech.wav"
            argv = self.arguments(out, language)
            writes_file = any("{out}" in a for a in self.argv)
            stdout = await self._run(argv, text, folder)
            if not writes_file:
                data = stdout
            else:
                try:
                    data = out.read_bytes() if out.stat().st_size <= MAX_AUDIO_BYTES else b""
                except FileNotFoundError:
                    raise SpeechError(f"{self.name} wrote no audio to {{out}}") from None
        if not data:
            raise SpeechError(f"{self.name} produced no audio (or over {MAX_AUDIO_BYTES:,} bytes)")
        return data

    async def _run(self, argv: Sequence[str], text: str, cwd: str) -> bytes:
        """Run the program (no shell, its own process group) with `text` on stdin; its stdout. Killed with its
        group when it overruns `timeout` or the caller stops waiting."""
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                        stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.PIPE, start_new_session=True,
                                                        cwd=cwd, env=engine_env())
        except OSError as exc:
            raise SpeechError(f"{self.name} could not be started: {exc.strerror or exc}") from exc
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate(text.encode())
        except TimeoutError:
            raise SpeechError(f"{self.name} did not finish within {self.timeout:g}s; it was stopped") from None
        finally:
            if proc.returncode is None:  # overran, or the turn stopped waiting: the whole group goes
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    await asyncio.shield(proc.wait())
        if proc.returncode != 0:
            shown = err.decode(errors="replace").strip()[-STDERR_SHOWN:]
            raise SpeechError(f"{self.name} failed (exit {proc.returncode}){': ' + shown if shown else ''}")
        if len(out) > MAX_AUDIO_BYTES:
            raise SpeechError(f"{self.name} wrote {len(out):,} bytes of audio, over the {MAX_AUDIO_BYTES:,} taken")
        return out
