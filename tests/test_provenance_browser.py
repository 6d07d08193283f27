"""The console's Facts tab in a real headless Chromium: a click shows a fact's sources; it can be forgotten."""

from tests.fakes.fake_llm import Reply
from tests.test_console_browser import browser, chat_dir, expect, sign_in  # noqa: F401 - the module's browser
from tests import kept


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


async def test_facts_read_as_text_with_who_asked_as_a_label(tusk, browser):  # noqa: F811
    """Facts show without their list marker, Markdown rendered, the `[asked by ...]` note as a label ("asked by
    root", not "[asked by root, id root]"), numbered as /memory forget numbers them, under their sections."""
    files = kept.files(tusk, "http", "notes")
    files.ensure()
    files.memory.write_text("# Memory\n\n## Ann\n\n- Ann likes **green tea** [asked by root, id root]\n"
                            "- Ann works nights\n\n## Bob\n\n- Bob keeps bees [asked by Bob Smith, id 42]\n"
                            "- Bob fixes bikes [asked by id 9]\n")

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/memory/http/notes")
        page.get_by_role("tab", name="Facts").click()
        facts = page.locator(".facts")
        expect(facts.locator(".fact-text")).to_have_text(["Ann likes green tea", "Ann works nights",
                                                          "Bob keeps bees", "Bob fixes bikes"])
        expect(facts.locator(".asker")).to_have_text(["asked by root", "asked by Bob Smith", "asked by id 9"])
        expect(facts.locator("h4")).to_have_text(["Ann", "Bob"])
        expect(facts.locator(".fact-text strong")).to_have_text("green tea")
        numbers = facts.locator("li").evaluate_all("items => items.map((li) => li.value)")
        return numbers, facts.inner_text()

    numbers, text = await browser.run(scenario)
    assert numbers == [1, 2, 3, 4]
    assert "[asked by" not in text and "**" not in text and not any(line.startswith("- ") for line in text.split("\n"))
