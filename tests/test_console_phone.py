"""The web console on a phone (375 px wide) and a desktop: every page fits its width (no sideways scrolling,
nothing cut off at the side or hidden in a box that scrolls sideways: tables' columns, the Usage figures),
long code lines scroll inside their block, and the composer stays in view. Screenshots go to tmp_path."""

import time

import pytest

from bot.usage.ledger import Call

from tests.browser import playwright_expect
from tests.fakes.fake_llm import Reply
from tests.test_console_browser import browser, sign_in  # noqa: F401  (the browser fixture, the sign-in)
from tests import kept

expect = playwright_expect()

PHONE = {"width": 375, "height": 740}
DESKTOP = {"width": 1280, "height": 800}
LONG_CODE = "result = compute(" + ", ".join(f"argument_number_{i}" for i in range(30)) + ")"
LONG_WORD = "https://example.invalid/" + "a" * 180
# Elements of the page that reach past the screen's sides, or clip what is in them sideways (a box scrolling
# sideways hides part of its content until scrolled): none may, but a code block (it scrolls inside itself),
# a text box (its own text) and the chart's drawing area (drawn to the width it is given).
CUT = """() => {
  const width = window.innerWidth, cut = [];
  for (const el of document.querySelectorAll("main *")) {
    if (el.closest("pre, textarea, .u-wrap")) continue;
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height) continue;
    const clips = ["auto", "scroll", "hidden", "clip"].includes(getComputedStyle(el).overflowX);
    if (box.right > width + 1 || box.left < -1 || (clips && el.scrollWidth > el.clientWidth + 1)) {
      cut.push(`${el.tagName.toLowerCase()}.${el.className}: ${(el.textContent || "").trim().slice(0, 50)}`);
    }
  }
  return cut;
}"""


async def a_lived_in_chat(tusk, fake_llm):
    """A console chat with a long code line, an unbroken long word, MEMORY.md and HISTORY.md; beside its calls
    (of unknown price), a priced one in a supergroup with a long id, for the Usage page's figures."""
    fake_llm.script(Reply(text=f"Here it is:\n\n```python\n{LONG_CODE}\n```\n\nand a link: {LONG_WORD}"),
                    Reply(text="Noted. " + "A long sentence that wraps on a narrow screen. " * 12))
    await tusk.say("phone", f"show me the call, and keep {LONG_WORD}")
    await tusk.say("phone", "thanks " * 40)
    files = kept.files(tusk, "http", "phone")
    files.memory.write_text(f"# Memory\n\n- The user keeps links like {LONG_WORD}\n- `{LONG_CODE}`\n")
    files.history.write_text(f"# History\n\n## 2026-12-03 10:00\n\nTalked about {LONG_CODE} and {LONG_WORD}.\n")
    tusk.ledger.record(Call(time.time(), "telegram", "-1001234567890123", "123456789012", "reply",
                            "openai/gpt-4o-mini", 1_234_567, 89_012, cost_usd=12.3456, cost_source="litellm"))


def fits(page, name, shots, width):
    """Assert the page needs no sideways scrolling at this width; keep a screenshot of it."""
    page.wait_for_load_state("networkidle")
    page.screenshot(path=shots / f"{width}-{name}.png", full_page=True)
    scroll, inner = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
    # a phone widens its layout viewport to what overflows, so the screen's own width is the measure too
    assert scroll <= inner <= width, f"{name} at {width}px scrolls sideways: {scroll} (viewport {inner})"
    assert page.evaluate(CUT) == [], f"{name} at {width}px cuts something off at the side"


def every_page(page, tusk, shots, width):
    sign_in(page, tusk)
    page.goto(tusk.url + "/#/chat/phone")
    expect(page.locator(".msg.bot pre").first).to_be_visible()
    fits(page, "chat", shots, width)
    code = page.locator(".msg.bot pre").first
    assert code.evaluate("e => e.scrollWidth > e.clientWidth && getComputedStyle(e).overflowX === 'auto'"), \
        "a long code line should scroll inside its block"
    composer = page.get_by_label("Message")
    assert composer.evaluate("e => e.getBoundingClientRect().bottom <= window.innerHeight"), "composer out of view"
    page.goto(tusk.url + "/#/memory")
    expect(page.locator("table.chats")).to_be_visible()
    fits(page, "memory", shots, width)
    page.goto(tusk.url + "/#/memory/http/phone")
    tabs = page.locator(".tabs button")
    expect(tabs.first).to_be_visible()
    for i in range(tabs.count()):
        tabs.nth(i).click()
        fits(page, f"memory-chat-tab{i}", shots, width)
    page.goto(tusk.url + "/#/tools")
    expect(page.locator("main h2").first).to_be_visible()
    fits(page, "tools", shots, width)
    page.goto(tusk.url + "/#/usage")
    expect(page.locator(".top-chat")).to_be_visible()
    fits(page, "usage", shots, width)


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
async def test_every_page_fits_the_screen(tusk, browser, fake_llm, tmp_path, viewport):  # noqa: F811
    """Chat, memory list, a chat's memory (each tab) and tools: no sideways scrolling; code scrolls in its block."""
    await a_lived_in_chat(tusk, fake_llm)
    await browser.run(lambda page: every_page(page, tusk, tmp_path, viewport["width"]), viewport=viewport,
                      is_mobile=viewport is PHONE, has_touch=viewport is PHONE)
    assert len(list(tmp_path.glob("*.png"))) >= 5


async def test_the_composer_stays_above_the_keyboard(tusk, browser, fake_llm):  # noqa: F811
    """With the phone's keyboard open (the viewport cut to 375x380), a message sent and its long reply leave
    the message box and the Send button in view."""
    await a_lived_in_chat(tusk, fake_llm)
    fake_llm.script(Reply(text="A reply long enough to fill a small screen. " * 20))

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/chat/phone")
        expect(page.locator(".msg.bot").first).to_be_visible()
        page.set_viewport_size({"width": 375, "height": 380})
        page.get_by_label("Message").fill("one more")
        page.get_by_label("Message").press("Enter")
        expect(page.locator(".msg.bot")).to_have_count(3)
        expect(page.locator(".typing")).to_be_hidden()
        page.wait_for_timeout(100)  # the last reply's scrollIntoView
        boxes = [page.get_by_label("Message").bounding_box(), page.get_by_role("button", name="Send").bounding_box()]
        return boxes, page.evaluate("window.innerHeight")

    boxes, height = await browser.run(scenario, viewport=PHONE, is_mobile=True, has_touch=True)
    assert all(0 <= box["y"] and box["y"] + box["height"] <= height for box in boxes), (boxes, height)
