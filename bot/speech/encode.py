"""Whatever an engine returned (MP3, WAV, FLAC, OGG, ...) as a voice message: OGG/Opus, mono, 48 kHz.

    encode(audio) -> SpokenAudio(data, duration, waveform)

PyAV (FFmpeg, carried in its wheels) probes and decodes the input, resamples it to mono 48 kHz in
20 ms frames, and encodes Opus at a voice bitrate (`BITRATE`, about 4 KB a second) into an OGG
container: what Telegram's sendVoice and Discord's voice messages take, and what browsers play.
`duration` is what players show: the stream's last granule position less the encoder's pre-skip;
`waveform` is up to 256 loudness bytes (0-255), one per 100 ms at most, as Discord draws a voice message.
Audio nobody could hear (none, or silence only) raises `SpeechError`, as does input FFmpeg cannot read.
CPU-bound: run it in a thread.
"""

from __future__ import annotations

import io
import math
import struct

from bot.errors import SpeechError
from bot.events import SpokenAudio

RATE = 48_000  # Opus works at 48 kHz; players expect it
FRAME = 960  # 20 ms at 48 kHz, the frame size libopus takes
BITRATE = 32_000  # bits a second: clear speech, small files
MAX_WAVEFORM = 256  # Discord's limit
WAVEFORM_STEP = 0.1  # seconds per waveform point at most (Discord's clients sample every 100 ms)
MAX_SECONDS = 20 * 60.0  # longer input is refused: no reply is read out for that long


def encode(audio: bytes) -> SpokenAudio:
    """`audio` (any format FFmpeg reads) as OGG/Opus mono 48 kHz with its duration and waveform."""
    import av  # imported here: the voice extra (pip install '.[voice]'), checked at start (bot/speech/config.py)
    import numpy as np

    out = io.BytesIO()
    peaks: list[float] = []
    samples = 0
    try:
        with av.open(io.BytesIO(audio), mode="r") as src:
            if not src.streams.audio:
                raise SpeechError("the speech engine's answer holds no audio")
            with av.open(out, mode="w", format="ogg") as dst:
                stream = dst.add_stream("libopus", rate=RATE, layout="mono")
                stream.bit_rate = BITRATE
                stream.options = {"application": "voip"}
                resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE, frame_size=FRAME)
                for frame in src.decode(src.streams.audio[0]):
                    for chunk in resampler.resample(frame):
                        samples += _encode_frame(dst, stream, chunk, peaks, np)
                    if samples > MAX_SECONDS * RATE:
                        raise SpeechError(f"the speech engine's audio is over {MAX_SECONDS / 60:.0f} minutes long")
                for chunk in resampler.resample(None):
                    samples += _encode_frame(dst, stream, chunk, peaks, np)
                for packet in stream.encode(None):
                    dst.mux(packet)
    except av.FFmpegError as exc:
        raise SpeechError(f"the speech engine's audio could not be read: {exc}") from exc
    if not samples or max(peaks, default=0.0) <= 1e-4:
        raise SpeechError("the speech engine sent no sound (empty or silent audio)")
    data = out.getvalue()
    duration = played(data)
    return SpokenAudio(data, duration, waveform(peaks, duration))


def played(ogg: bytes) -> float:
    """Seconds an OGG/Opus stream plays: its last page's granule position less the OpusHead's pre-skip."""
    last, head = ogg.rfind(b"OggS"), ogg.find(b"OpusHead")
    granule = struct.unpack_from("<q", ogg, last + 6)[0]
    pre_skip = struct.unpack_from("<H", ogg, head + 10)[0]
    return max(0.0, (granule - pre_skip) / RATE)


def _encode_frame(dst, stream, frame, peaks: list[float], np) -> int:
    """Encode one 20 ms frame; note its peak loudness. Returns its samples."""
    data = frame.to_ndarray()
    peaks.append(float(np.abs(data).max()) if data.size else 0.0)
    for packet in stream.encode(frame):
        dst.mux(packet)
    return frame.samples


def waveform(peaks: list[float], duration: float) -> bytes:
    """Up to 256 bytes of loudness (0-255) evenly over the audio, from the 20 ms frames' peaks, scaled to the
    loudest point."""
    points = max(1, min(MAX_WAVEFORM, math.ceil(duration / WAVEFORM_STEP), len(peaks)))
    loudest = max(peaks) or 1.0
    step = len(peaks) / points
    out = bytearray()
    for i in range(points):
        window = peaks[int(i * step):max(int((i + 1) * step), int(i * step) + 1)]
        out.append(min(255, round(255 * max(window) / loudest)))
    return bytes(out)
