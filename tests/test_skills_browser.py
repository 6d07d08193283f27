"""The console's Tools page in a real headless Chromium: the skills, offered or not and why, shown as text."""

import re

import pytest

from tests.browser import BrowserThread, playwright_expect
from tests.conftest import running

expect = playwright_expect()
XSS = '<img src=x onerror="window.__xss=1">'


@pytest.fixture(scope="module")
def browser():
    b = BrowserThread()
    yield b
    b.close()


def write(home, name, front, body="Steps."):
    folder = home / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\n{front}---\n\n{body}\n")


async def test_the_tools_page_lists_the_skills_with_why_one_is_not_offered(make_settings, browser):
    """Each skill's row: its description, source and chats; one needing a program says which; markup stays text."""
    settings = make_settings(TUSK_SKILLS_CHATS="*,oncall=slack:*")
    write(settings.home, "refunds", f"description: 'Refund questions. {XSS}'\n")
    write(settings.home, "oncall", "description: Who is on call.\n")
    write(settings.home, "github", 'description: Use gh.\nmetadata: {"nanobot":{"requires":{"bins":["gh"]}}}\n')
    async with running(settings) as tusk:
        def scenario(page):
            page.goto(f"{tusk.url}/#token={tusk.token}")
            expect(page).not_to_have_url(re.compile("token"))
            page.click("a[data-page='tools']")
            refunds = page.locator("tr[data-skill='refunds']")
            expect(refunds).to_contain_text(f"Refund questions. {XSS}")
            expect(refunds).to_contain_text("$TUSK_HOME/skills")
            expect(refunds).to_contain_text("offered to *")
            expect(page.locator("tr[data-skill='oncall']")).to_contain_text("offered to slack:*")
            expect(page.locator("tr[data-skill='github']")).to_contain_text(
                "not offered: it needs the program gh (metadata.nanobot.requires.bins), and Tusk runs no programs")
            expect(page.locator("section.skills p.muted").first).to_contain_text("TUSK_SKILLS_MAX_TOKENS 1,000")
            return page.evaluate("window.__xss === undefined")

        assert await browser.run(scenario)
