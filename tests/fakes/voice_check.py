"""A voice message checked as the platforms check one: an OGG container holding an Opus stream (RFC 3533, RFC 7845).

    info = ogg_opus(data)       # ValueError saying what is wrong, else OggOpus(duration, channels, ...)

Read byte by byte, independently of the encoder under test: every page's capture pattern, version and
CRC-32; one logical stream; its first packet the `OpusHead` identification header (version 1, channels,
pre-skip, 48 kHz granules), its second `OpusTags`; the stream ended on its last page; the duration
from the last granule position less the pre-skip, as players compute it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else r << 1
        table.append(r & 0xFFFFFFFF)
    return table


_TABLE = _crc_table()


def ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) ^ _TABLE[((crc >> 24) ^ byte) & 0xFF]) & 0xFFFFFFFF
    return crc


@dataclass(frozen=True)
class OggOpus:
    duration: float  # seconds, from the last granule position less the pre-skip
    channels: int
    pre_skip: int
    input_rate: int
    pages: int


def ogg_opus(data: bytes) -> OggOpus:
    """The voice message's stream, checked; ValueError naming the first thing a platform would refuse."""
    if not data.startswith(b"OggS"):
        raise ValueError("not an OGG file (no OggS capture pattern at the start)")
    packets: list[bytes] = []
    partial = b""
    at = pages = 0
    serial = granule = None
    ended = False
    while at < len(data):
        if ended:
            raise ValueError("data after the page that ended the stream")
        if data[at:at + 4] != b"OggS":
            raise ValueError(f"page {pages}: no OggS capture pattern at byte {at}")
        if len(data) < at + 27:
            raise ValueError(f"page {pages}: truncated header")
        version, flags, position, page_serial, _, crc, count = struct.unpack_from("<BBqIIIB", data, at + 4)
        if version != 0:
            raise ValueError(f"page {pages}: OGG version {version}, not 0")
        lacing = data[at + 27:at + 27 + count]
        size = 27 + count + sum(lacing)
        page = data[at:at + size]
        if len(page) < size:
            raise ValueError(f"page {pages}: truncated body")
        if ogg_crc(page[:22] + b"\0\0\0\0" + page[26:]) != crc:
            raise ValueError(f"page {pages}: CRC mismatch")
        if serial is None:
            if not flags & 0x02:
                raise ValueError("the first page is not marked beginning-of-stream")
            serial = page_serial
        elif page_serial != serial:
            raise ValueError("more than one logical stream (a voice message holds one)")
        body, offset = page[27 + count:], 0
        for seg in lacing:
            partial += body[offset:offset + seg]
            offset += seg
            if seg < 255:
                packets.append(partial)
                partial = b""
        if position != -1:
            granule = position
        ended = bool(flags & 0x04)
        at += size
        pages += 1
    if not ended:
        raise ValueError("the stream has no end-of-stream page (cut short?)")
    if len(packets) < 3:
        raise ValueError("no audio packets after the Opus headers")
    head, tags = packets[0], packets[1]
    if not head.startswith(b"OpusHead") or len(head) < 19:
        raise ValueError("the first packet is not an OpusHead header: not an Opus stream")
    version, channels, pre_skip, rate = struct.unpack_from("<BBHI", head, 8)
    if version & 0xF0 or not channels:
        raise ValueError(f"OpusHead version {version} with {channels} channels is not playable")
    if not tags.startswith(b"OpusTags"):
        raise ValueError("the second packet is not OpusTags")
    if granule is None or granule < pre_skip:
        raise ValueError("no granule position: the duration cannot be known")
    return OggOpus((granule - pre_skip) / 48_000, channels, pre_skip, rate, pages)
