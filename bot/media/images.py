"""Photos for the model: decoded with Pillow, scaled within a pixel and byte cap, as a data URI.

Providers take images of a few megabytes and bill by pixels (Anthropic scales anything past
~1.15 megapixels down anyway; OpenAI tiles at 768 px), so a photo is sent at most `MAX_SIDE`
pixels on its longer side and `MAX_BYTES` encoded: JPEG (quality 85), or PNG when it has
transparency and still fits. A JPEG is decoded at a reduced scale from the start (`draft`),
so a 10 MB photo never sits in memory at full size. Anything past `MAX_PIXELS` is refused
before decoding (a decompression bomb), as is a file Pillow cannot read.
"""

from __future__ import annotations

import base64
import io
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError

from bot.errors import MediaRefused

MAX_SIDE = 1568  # pixels on the longer side (Anthropic's own recommendation; OpenAI fits 2048 then 768)
MAX_BYTES = 1_500_000  # encoded bytes of one image sent to the model
MAX_PIXELS = 60_000_000  # source pixels: past this a file is refused before it is decoded
UNREADABLE = ("I could not open that image: the file is damaged or not an image format I know "
              "(PNG, JPEG, GIF, WebP, BMP, TIFF).")


@dataclass(frozen=True, slots=True)
class Picture:
    data_uri: str  # data:image/jpeg;base64,...
    width: int  # as sent
    height: int
    source_width: int  # as received
    source_height: int

    def part(self) -> dict[str, object]:
        """The OpenAI-style content part litellm maps to every provider's image form."""
        return {"type": "image_url", "image_url": {"url": self.data_uri}}


def _encode(image: Image.Image) -> tuple[bytes, str]:
    if image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info):
        buf = io.BytesIO()
        image.convert("RGBA").save(buf, "PNG", optimize=True)
        if buf.tell() <= MAX_BYTES:
            return buf.getvalue(), "image/png"
        flat = Image.new("RGB", image.size, "white")
        flat.paste(image.convert("RGBA"), mask=image.convert("RGBA").getchannel("A"))
        image = flat
    buf = io.BytesIO()
    image.convert("RGB").save(buf, "JPEG", quality=85, optimize=True)
    return buf.getvalue(), "image/jpeg"


def prepare(path: Path) -> Picture:
    """The image at `path`, scaled for the model; raises MediaRefused if it cannot be read."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as source:
                width, height = source.size
                if width * height > MAX_PIXELS:
                    raise MediaRefused(f"That image is {width}×{height} pixels; I take images up to "
                                       f"{MAX_PIXELS // 1_000_000} megapixels.")
                ratio = min(1.0, MAX_SIDE / max(width, height))
                source.draft("RGB", (round(width * ratio), round(height * ratio)))  # JPEG: decode smaller
                source.thumbnail((MAX_SIDE, MAX_SIDE))  # in place: one decoded copy at most
                image = ImageOps.exif_transpose(source)  # phones store portrait photos sideways plus a tag
                data, mime = _encode(image)
                while len(data) > MAX_BYTES and max(image.size) > 64:
                    image = image.resize((max(1, image.width * 3 // 4), max(1, image.height * 3 // 4)))
                    data, mime = _encode(image)
    except MediaRefused:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError,
            Image.DecompressionBombWarning) as exc:
        raise MediaRefused(UNREADABLE) from exc
    uri = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return Picture(uri, image.width, image.height, width, height)
