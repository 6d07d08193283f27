"""Real files for the media tests, made on the spot: images (Pillow), PDFs with text (pypdf), audio bytes."""

from __future__ import annotations

import io

from PIL import Image
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject


def image_bytes(width: int = 640, height: int = 480, fmt: str = "PNG", color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buf, fmt)
    return buf.getvalue()


def noisy_jpeg(width: int, height: int, quality: int = 95) -> bytes:
    """A photo-like JPEG (noise does not compress), for size caps and the benchmark."""
    import os

    buf = io.BytesIO()
    Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(pages: list[str], password: str | None = None) -> bytes:
    """A PDF whose pages hold these texts (Helvetica, one line each: what pypdf extracts back)."""
    writer = PdfWriter()
    font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                             NameObject("/BaseFont"): NameObject("/Helvetica")})
    font_ref = writer._add_object(font)
    for text in pages:
        page = writer.add_blank_page(612, 792)
        lines = text.split("\n")
        ops = "".join(f"BT /F1 11 Tf 40 {760 - 14 * i} Td ({_escape(line)}) Tj ET\n" for i, line in enumerate(lines))
        stream = DecodedStreamObject()
        stream.set_data(ops.encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font_ref})})
    if password is not None:
        writer.encrypt(password, algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def audio_bytes(seed: int = 1, size: int = 4000) -> bytes:
    """Bytes standing for a voice note (the fake LLM transcribes any bytes: `heard <sha8>`)."""
    return bytes((seed * 31 + i * 7) % 256 for i in range(size))
