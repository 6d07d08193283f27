"""The console's Facts tab in a real headless Chromium: a click shows a fact's sources; it can be forgotten."""

from tests.fakes.fake_llm import Reply
from tests.test_console_browser import browser, chat_dir, expect, sign_in  # noqa: F401 - the module's browser


async def test_a_clicked_fact_shows_its_message_and_can_be_forgotten(tusk, browser, fake_llm):  # noqa: F811
    """Facts tab: clicking a fact quotes the message it came from; "Forget this fact" takes it out of MEMORY.md."""
    fake_llm.script(Reply(text=None, tool_calls=[("m1", "remember", {"fact": "Erin keeps bees"})]), Reply(text="ok"))
    await tusk.say("erin", "remember that I keep bees")
    memory = chat_dir(tusk, "erin") / "MEMORY.md"

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/memory/http/erin")
        page.get_by_role("tab", name="Facts").click()
        page.get_by_role("button", name="Erin keeps bees").click()
        expect(page.locator(".fact-sources li")).to_contain_text("remember that I keep bees")
        page.get_by_role("button", name="Forget this fact").click()
        expect(page.locator(".facts p")).to_have_text("MEMORY.md holds no facts yet.")

    await browser.run(scenario)
    assert "bees" not in memory.read_text()
