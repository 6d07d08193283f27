"""The console's file upload in a real headless Chromium: the Attach button and drag-and-drop."""

import re

import pytest

from tests.browser import playwright_expect
from tests.conftest import running
from tests.fakes.fake_llm import Reply, images_in
from tests.media_files import image_bytes
from tests.test_console_browser import browser, sign_in  # noqa: F401  (the browser fixture, the sign-in)

expect = playwright_expect()


@pytest.fixture
async def seeing_tusk(make_settings):
    async with running(make_settings(TUSK_VISION="true")) as app:
        yield app


def open_chat(page, tusk, chat):
    sign_in(page, tusk)
    page.goto(f"{tusk.url}/#/chat/{chat}")
    expect(page.locator(".chat-head h2")).to_have_text(chat)


async def test_upload_an_image_with_the_attach_button(seeing_tusk, browser, fake_llm, tmp_path):
    """A photo chosen with Attach goes with its caption; the model's reply shows, and the model got the image."""
    photo = tmp_path / "holiday.png"
    photo.write_bytes(image_bytes(800, 600))
    fake_llm.script(Reply(text="A **red** picture."))

    def scenario(page):
        open_chat(page, seeing_tusk, "pics")
        page.get_by_label("File to send").set_input_files(str(photo))
        expect(page.locator(".attached")).to_contain_text("holiday.png")
        page.get_by_label("Message").fill("what is this?")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".msg.bot").last.locator("strong")).to_have_text("red")
        expect(page.locator(".msg.user .plain").last).to_contain_text("holiday.png")
        expect(page.locator(".attached")).to_be_empty()

    await browser.run(scenario)
    (part,) = images_in(fake_llm.requests[0])
    assert part["image_url"]["url"].startswith("data:image/jpeg;base64,")  # an opaque photo is sent as JPEG
    assert fake_llm.requests[0]["messages"][-1]["content"][0]["text"].endswith("what is this?")


async def test_drop_a_file_on_the_conversation(seeing_tusk, browser, fake_llm):
    """A file dropped on the conversation is attached and sent without a caption; its text reaches the model."""
    def scenario(page):
        open_chat(page, seeing_tusk, "drops")
        data = page.evaluate_handle("""() => {
            const dt = new DataTransfer();
            dt.items.add(new File(["meeting at noon on friday"], "notes.txt", { type: "text/plain" }));
            return dt; }""")
        page.locator(".conversation").dispatch_event("drop", {"dataTransfer": data})
        expect(page.locator(".attached")).to_contain_text("notes.txt")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".msg.bot")).to_have_count(1)

    await browser.run(scenario)
    assert "meeting at noon on friday" in fake_llm.requests[0]["messages"][-1]["content"]
