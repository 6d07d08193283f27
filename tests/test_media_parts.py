"""The pieces of media handling on their own: the fake LLM's transcription and image checks through real
litellm, image scaling within its caps, document reading, and the marker clock."""

import base64
import io
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import litellm
import pytest
from PIL import Image

from bot.errors import MediaRefused
from bot.media import documents, images
from bot.media.voice import clock
from memory.tokens import IMAGE_TOKENS, count_message
from tests.fakes.fake_llm import FakeLLM, heard
from tests.media_files import audio_bytes, image_bytes, noisy_jpeg, pdf_bytes

ONE_SHOT = {"num_retries": 0, "max_retries": 0}


@pytest.fixture
async def llm():
    async with FakeLLM() as server:
        yield server


def image_message(url: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": url}}]}]


async def test_fake_transcribes_what_litellm_uploads(llm):
    """litellm's atranscription reaches the fake as multipart; the transcript is derived from the bytes."""
    data = audio_bytes(9)
    resp = await litellm.atranscription(model="openai/whisper-1", file=("note.ogg", data, "audio/ogg"),
                                        api_base=llm.base_url, api_key="sk-test", **ONE_SHOT)
    assert resp.text == heard(data) and llm.transcriptions[0]["filename"] == "note.ogg"


@pytest.mark.parametrize("url", ["https://example.com/cat.png", "data:image/png;base64,!!notbase64!!",
                                 "data:image/png;base64," + base64.b64encode(b"not an image").decode(),
                                 "data:text/plain;base64,aGVsbG8="])
async def test_fake_refuses_a_malformed_image_part_like_openai(llm, url):
    """A part that is no data URI, does not decode or is not an image gets OpenAI's 400."""
    with pytest.raises(litellm.BadRequestError):
        await litellm.acompletion(model="openai/fake-model", api_base=llm.base_url, api_key="sk-test",
                                  messages=image_message(url), **ONE_SHOT)


async def test_fake_takes_a_prepared_image(llm, tmp_path):
    """What images.prepare makes is an image part the fake (and OpenAI) accepts."""
    path = tmp_path / "p.jpg"
    path.write_bytes(image_bytes(300, 200, "JPEG"))
    resp = await litellm.acompletion(model="openai/fake-model", api_base=llm.base_url, api_key="sk-test",
                                     messages=image_message(images.prepare(path).data_uri), **ONE_SHOT)
    assert resp.choices[0].message.content == "echo: see"


def test_large_photo_is_scaled_within_the_caps(tmp_path):
    """A 4000×3000 photo goes out at most MAX_SIDE a side and MAX_BYTES encoded, its source size remembered."""
    path = tmp_path / "big.jpg"
    path.write_bytes(noisy_jpeg(4000, 3000))
    picture = images.prepare(path)
    data = base64.b64decode(picture.data_uri.split(",", 1)[1])
    assert max(picture.width, picture.height) <= images.MAX_SIDE and len(data) <= images.MAX_BYTES
    assert (picture.source_width, picture.source_height) == (4000, 3000)
    assert Image.open(io.BytesIO(data)).size == (picture.width, picture.height)


def test_decompression_bomb_is_refused_before_decoding(tmp_path):
    """An image past MAX_PIXELS is refused from its header, naming the limit."""
    path = tmp_path / "bomb.png"
    Image.new("1", (10_000, 7_000)).save(path)
    with pytest.raises(MediaRefused, match="megapixels"):
        images.prepare(path)


def test_transparent_png_stays_png(tmp_path):
    """An image with transparency small enough is sent as PNG (JPEG would lose the alpha)."""
    path = tmp_path / "logo.png"
    Image.new("RGBA", (200, 100), (0, 0, 255, 128)).save(path)
    assert images.prepare(path).data_uri.startswith("data:image/png;base64,")


def test_binary_file_named_as_text_is_refused(tmp_path):
    """A .txt holding NUL bytes is binary: refused with what Tusk reads."""
    path = tmp_path / "x.txt"
    path.write_bytes(b"abc\x00\x01\x02" * 100)
    with pytest.raises(MediaRefused, match="binary"):
        documents.read_document(path, "x.txt", "text/plain", 10_000)


def test_pdf_reading_stops_at_the_cap(tmp_path):
    """A PDF with more text than the cap is refused once the cap is passed, naming the setting."""
    path = tmp_path / "long.pdf"
    path.write_bytes(pdf_bytes(["word " * 100] * 50))
    with pytest.raises(MediaRefused, match="TUSK_DOCUMENT_MAX_CHARS"):
        documents.read_document(path, "long.pdf", "application/pdf", 2000)


def test_source_code_is_text_by_extension(tmp_path):
    """A .py sent as octet-stream is read as text."""
    path = tmp_path / "a.py"
    path.write_text("print('hi')\n")
    assert documents.read_document(path, "a.py", "application/octet-stream", 1000).text == "print('hi')\n"


def test_clock_and_image_tokens():
    """Durations print as m:ss or h:mm:ss; an image part counts a fixed estimate."""
    assert (clock(42.4), clock(605), clock(3723), clock(None)) == ("0:42", "10:05", "1:02:03", "")
    message = {"role": "user", "content": [{"type": "text", "text": "hi"},
                                           {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}
    assert IMAGE_TOKENS <= count_message(message) <= IMAGE_TOKENS + 10
