"""What one file costs: peak memory and time to take a 20 MB PDF and a 10 MB photo into a turn,
and the tokens one photo adds to every later prompt.

Each case runs in a child process of its own (peak RSS is per process), from the download
streamed into the chat's media/ folder (MediaStore.keep, 64 KiB chunks) to the text or image
part the turn sends (MediaReader.read). Figures are the child's peak RSS during the case (VmHWM,
reset when it starts) over its RSS then (imports and tokenizer loaded), and the case's wall time.

    20 MB PDF, scanned-like   40 pages, a photo on each and a few lines of text: read whole
    20 MB PDF, text           thousands of text pages: reading stops at TUSK_DOCUMENT_MAX_CHARS
    10 MB photo               a 4000×3000 JPEG: decoded at a reduced scale, sent at <= 1568 px

    python bench/media.py
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bot.events import ChatKey, InboundMessage  # noqa: E402
from bot.media import MediaReader, MediaSettings  # noqa: E402
from store.files.chats import FileChats
from memory.media import MB, MediaLimits, MediaStore  # noqa: E402
from memory.session import Message  # noqa: E402
from memory.tokens import IMAGE_TOKENS  # noqa: E402

KEY = ChatKey("http", "bench")


def status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def reset_peak() -> None:
    """Start the peak (VmHWM) again from the current RSS (Linux: `5` into clear_refs)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def scanned_pdf(target: int) -> bytes:
    """~`target` bytes: 40 pages, each with an incompressible embedded image and a few lines of text."""
    from pypdf import PdfWriter
    from pypdf.generic import (ArrayObject, DecodedStreamObject, DictionaryObject, NameObject, NumberObject,
                               StreamObject)

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                                NameObject("/Subtype"): NameObject("/Type1"),
                                                NameObject("/BaseFont"): NameObject("/Helvetica")}))
    pages, side = 40, 0
    per_page = target // pages
    side = int((per_page / 3) ** 0.5)
    for n in range(pages):
        page = writer.add_blank_page(612, 792)
        image = StreamObject()
        image._data = os.urandom(side * side * 3)
        image.update({NameObject("/Type"): NameObject("/XObject"), NameObject("/Subtype"): NameObject("/Image"),
                      NameObject("/Width"): NumberObject(side), NameObject("/Height"): NumberObject(side),
                      NameObject("/ColorSpace"): NameObject("/DeviceRGB"),
                      NameObject("/BitsPerComponent"): NumberObject(8)})
        ops = DecodedStreamObject()
        ops.set_data(f"q 500 0 0 500 50 200 cm /Im0 Do Q BT /F1 11 Tf 40 760 Td (Page {n + 1}: site survey, "
                     f"photo {n + 1} of {pages}, north wall.) Tj ET\n".encode())
        page[NameObject("/Contents")] = writer._add_object(ops)
        page[NameObject("/Resources")] = DictionaryObject({
            NameObject("/Font"): DictionaryObject({NameObject("/F1"): font}),
            NameObject("/XObject"): DictionaryObject({NameObject("/Im0"): writer._add_object(image)}),
            NameObject("/ProcSet"): ArrayObject([NameObject("/PDF"), NameObject("/Text"), NameObject("/ImageC")])})
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def text_pdf(target: int) -> bytes:
    from tests.media_files import pdf_bytes

    line = "The committee reviewed the budget line by line and agreed to revisit item %d next week."
    page = "\n".join(line % i for i in range(48))
    one = len(pdf_bytes([page]))
    return pdf_bytes([page] * max(1, target // max(1, one - 600)))


def photo(target: int) -> bytes:
    from PIL import Image

    side = (4000, 3000)
    for quality in (95, 90, 85, 75):
        buf = io.BytesIO()
        Image.frombytes("RGB", side, os.urandom(side[0] * side[1] * 3)).save(buf, "JPEG", quality=quality)
        if buf.tell() <= target * 1.15:
            return buf.getvalue()
    return buf.getvalue()


async def _chunks(path: Path):
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 16):
            yield chunk


async def run_case(path: Path, name: str, mime: str) -> dict:
    home = Path(tempfile.mkdtemp(prefix="tusk-bench-media-"))
    store = MediaStore(FileChats(home), MediaLimits(file_bytes=64 * MB))
    reader = MediaReader(MediaSettings(vision=True), store, "openai/gpt-4o-mini")
    reset_peak()
    before = status_kb("VmRSS")
    started = time.perf_counter()
    att = await store.keep(KEY, _chunks(path), name=name, mime=mime)
    try:
        attached = await reader.read(InboundMessage(KEY, "", "u1", attachments=(att,)))
        outcome = f"read: {len(attached.prompt):,} characters" + (", 1 image part" if attached.images else "")
        saved = Message(role="user", content=attached.saved).counted().tokens
    except Exception as exc:  # the refusal is the outcome for the text PDF past the cap
        outcome, saved = f"refused: {str(exc)[:60]}...", 0
    took = time.perf_counter() - started
    peak = status_kb("VmHWM")
    return {"seconds": took, "peak_extra_mb": max(0, peak - before) / 1024, "outcome": outcome, "saved_tokens": saved}


def child(argv: list[str]) -> None:
    path, name, mime = argv
    import PIL.Image  # noqa: F401  (imports and the tokenizer are not the case's cost)
    import pypdf  # noqa: F401

    from memory.tokens import count_text

    count_text("warm up")

    print(json.dumps(asyncio.run(run_case(Path(path), name, mime))))


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="tusk-bench-files-"))
    cases = [("20 MB PDF, photos and a line of text a page", "survey.pdf", "application/pdf", scanned_pdf(20 * MB)),
             ("20 MB PDF, text only", "minutes.pdf", "application/pdf", text_pdf(20 * MB)),
             ("10 MB photo, 4000×3000 JPEG", "IMG_2041.jpg", "image/jpeg", photo(10 * MB))]
    print(f"{'case':46} {'size':>8} {'time':>8} {'peak RSS +':>11}  outcome")
    photo_tokens = 0
    for label, name, mime, data in cases:
        path = work / name
        path.write_bytes(data)
        out = subprocess.run([sys.executable, __file__, "--child", str(path), name, mime], capture_output=True,
                             text=True, check=True)
        fig = json.loads(out.stdout.strip().splitlines()[-1])
        if mime.startswith("image/"):
            photo_tokens = fig["saved_tokens"]
        print(f"{label:46} {len(data) / MB:6.1f}MB {fig['seconds']:7.2f}s {fig['peak_extra_mb']:8.1f} MB  {fig['outcome']}")
    print(f"\nOne photo in later prompts: {photo_tokens} tokens (its placeholder); "
          f"in its own turn: ~{IMAGE_TOKENS} (the fixed image estimate) + the placeholder.")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
    else:
        main()
