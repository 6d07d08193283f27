"""The web console in a real headless Chromium: chat, memory forming and changing, restore, forget,
the token, and hostile content shown as text."""

import json
import os
import re
import time
from pathlib import Path

import aiohttp
import pytest

from bot.app import TuskApp
from bot.usage.ledger import Call
from tests.fakes.fake_llm import Reply
from tests.own_words import ANSWERS, PERSONA, WHY, seed

from tests.browser import BrowserThread, playwright_expect
from tests.conftest import running
from tests import kept

expect = playwright_expect()

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
# TUSK_DOCS_SCREENSHOTS=1 saves the docs' pictures here (read at import: the fixtures clear TUSK_* variables)
DOCS_IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images" \
    if os.environ.get("TUSK_DOCS_SCREENSHOTS") == "1" else None


@pytest.fixture(scope="module")
def browser():
    b = BrowserThread()
    yield b
    b.close()


def chat_dir(tusk, chat):
    return kept.files(tusk, "http", chat).dir


def save_memory_call(entry, memory):
    return Reply(text=None, tool_calls=[("c1", "save_memory", {"history_entry": entry, "memory_update": memory})])


def sign_in(page, tusk):
    """Open the link `tusk run` prints (the token in the fragment): the page keeps the token and drops the fragment."""
    page.goto(f"{tusk.url}/#token={tusk.token}")
    expect(page).not_to_have_url(re.compile("token"))
    expect(page.locator("#token-dialog")).to_be_hidden()


async def test_send_a_message_and_see_the_reply(tusk, browser, fake_llm):
    """A message typed in a new local chat shows the typing indicator, then the reply rendered as Markdown."""
    fake_llm.script(Reply(text="Hello! Here is **bold** and `code`.\n\n- one\n- two", delay=0.6))

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/")
        expect(page.locator(".chat-head h2")).to_have_text("console")  # a newcomer lands in a ready chat
        page.get_by_label("New chat name").fill("alice")
        page.get_by_role("button", name="Open").click()
        expect(page.locator(".chat-head h2")).to_have_text("alice")
        page.get_by_label("Message").fill("hi there")
        page.get_by_label("Message").press("Enter")
        expect(page.locator(".typing")).to_be_visible()
        reply = page.locator(".msg.bot").last
        expect(reply.locator("strong")).to_have_text("bold")
        expect(reply.locator("li")).to_have_text(["one", "two"])
        expect(page.locator(".typing")).to_be_hidden()
        expect(page.locator(".chat-links a.current")).to_have_text("alice")
        page.reload()  # the conversation comes back from the session
        expect(page.locator(".msg.user .plain")).to_have_text("hi there")

    await browser.run(scenario)
    assert fake_llm.requests[0]["messages"][-1]["content"].endswith("hi there")


async def test_a_reply_appears_as_it_is_written(tusk, browser, fake_llm):
    """The console streams: part of a slow reply is on the page before the rest, then the final reply alone."""
    words = " ".join(f"w{i}" for i in range(120))
    fake_llm.script(Reply(text=f"**Start** {words} end.", token_delay=0.02))

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/chat/streamed")
        page.get_by_label("Message").fill("write a lot")
        page.get_by_label("Message").press("Enter")
        live = page.locator(".msg.bot.live")
        expect(live).to_contain_text("w10")
        assert "end." not in live.inner_text()  # seen while the model is still writing
        expect(live).to_have_count(0, timeout=10_000)
        reply = page.locator(".msg.bot").last
        expect(reply.locator("strong")).to_have_text("Start")
        expect(reply).to_contain_text("w119 end.")
        expect(page.locator(".msg.bot")).to_have_count(1)

    await browser.run(scenario)


async def test_memory_command_answers_in_the_page(tusk, browser):
    """/memory typed in the chat page gets the same answer as in any chat, and MEMORY.md shows once written, as
    written (a command's answer is Tusk's own text: its `**` stay)."""
    await tusk.say("bob", "hello")

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/chat/bob")
        page.get_by_label("Message").fill("/memory")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".msg.bot").last).to_contain_text("I don't remember anything about this chat yet")
        (chat_dir(tusk, "bob") / "MEMORY.md").write_text("- Bob likes **green tea**\n")
        page.get_by_label("Message").fill("/memory")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".msg.bot").last.locator(".plain")).to_contain_text("- Bob likes **green tea**\n\n")
        assert page.locator(".msg.bot").last.locator("strong, li").count() == 0

    await browser.run(scenario)


async def test_tusks_own_words_show_as_written_and_the_models_as_markdown(tusk, browser, fake_llm):
    """In the chat page `/memory why tea` shows facts 3 and 5 with their source lines and `*strong*`, `/persona`
    its `<...>` placeholder; the model's reply after them is still rendered from Markdown (bold, a list)."""
    seed(kept.files(tusk, "http", "tea"))
    fake_llm.script(Reply(text="**Tea** kinds:\n\n3. green\n5. black"))

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/chat/tea")
        for n, text in enumerate((WHY, PERSONA, "which teas?"), 1):
            page.get_by_label("Message").fill(text)
            page.get_by_label("Message").press("Enter")
            expect(page.locator(".msg.bot")).to_have_count(n)
        model = page.locator(".msg.bot").last
        expect(model.locator("strong")).to_have_text("Tea")
        return (page.locator(".msg.own .plain").all_inner_texts(), model.locator("ol").get_attribute("start"),
                model.locator("ol li").all_inner_texts(), page.locator(".msg.own .who").all_inner_texts())

    own, start, items, who = await browser.run(scenario)
    assert own == list(ANSWERS) and who == ["Tusk", "Tusk"]
    assert start == "3" and items == ["green", "black"]  # the model's Markdown list: 3, 4 on screen


async def test_memory_forms_from_the_conversation_and_forget_removes_it(tusk, browser, fake_llm):
    """After /new the chat's MEMORY.md, HISTORY.md and pointer show in the browser; Forget lists, deletes, and the chat is gone."""
    await tusk.say("carol", "I love hiking in Norway")
    fake_llm.script(save_memory_call("Carol said she loves hiking in Norway.", "- Carol loves **hiking** in Norway\n"))
    assert "summarised into memory" in (await tusk.say("carol", "/new"))[0]
    await tusk.say("carol", "and skiing")
    files = kept.files(tusk, "http", "carol")

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/memory")
        row = page.locator("tr[data-chat='http:carol']")
        expect(row.locator("td").nth(2)).to_have_text("4")  # messages
        page.get_by_label("Search chats by id").fill("zzz")
        expect(row).to_have_count(0)
        page.get_by_label("Search chats by id").fill("CAR")
        row.get_by_role("link", name="carol").click()
        expect(page.locator(".memory .md strong")).to_have_text("hiking")
        expect(page.locator(".usage")).to_contain_text("4 messages, 2 of them consolidated")
        expect(page.locator(".usage .prompt-tokens")).to_contain_text(f"of {tusk.consolidator.budget.limit:,} tokens")
        page.get_by_role("tab", name="HISTORY.md").click()
        expect(page.locator(".history li")).to_contain_text("hiking in Norway")
        page.get_by_role("tab", name="Session").click()
        entries = page.locator(".session > li")
        expect(entries).to_have_count(5)
        expect(entries.nth(2)).to_have_class("pointer")  # between the consolidated turn and the new one
        page.get_by_role("tab", name="Forget…").click()
        expect(page.locator(".forget-items li")).to_contain_text(["MEMORY.md", "1 history entry (HISTORY.md)",
                                                                  "4 session messages (session.jsonl)"])
        page.get_by_role("button", name="Delete it all").click()
        expect(page.locator(".forget-report")).to_contain_text("deleted 4 session messages (session.jsonl)")
        expect(page.locator("tr[data-chat='http:carol']")).to_have_count(0)

    await browser.run(scenario)
    assert not files.dir.exists() and not kept.cached(tusk, "http", "carol")  # gone from the disk and the running cache


async def test_edit_memory_makes_a_version_and_restore_brings_it_back(tusk, browser):
    """Saving MEMORY.md in the editor writes it and keeps the old text as a version; restoring a version puts it back."""
    await tusk.say("dave", "hello")
    memory = chat_dir(tusk, "dave") / "MEMORY.md"

    def edit(page, text):
        page.get_by_role("button", name="Edit").click()
        page.get_by_label("MEMORY.md").fill(text)
        page.get_by_role("button", name="Save").click()
        expect(page.locator(".memory .note")).to_contain_text("Saved")

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/memory/http/dave")
        edit(page, "- Dave drinks tea\n")
        expect(page.locator(".memory .md li")).to_have_text("Dave drinks tea")
        edit(page, "- Dave drinks coffee\n")
        assert memory.read_text() == "- Dave drinks coffee\n"
        page.get_by_role("tab", name="Versions").click()
        expect(page.locator(".versions li")).to_have_count(1)
        page.locator(".versions button").first.click()
        expect(page.locator(".diff .del")).to_have_text("- - Dave drinks tea")
        expect(page.locator(".diff .add")).to_have_text("+ - Dave drinks coffee")
        page.get_by_role("button", name="Restore this version").click()
        expect(page.locator(".memory .md li")).to_have_text("Dave drinks tea")
        page.get_by_role("tab", name="Versions").click()
        expect(page.locator(".versions li")).to_have_count(2)  # the replaced text is kept too

    await browser.run(scenario)
    assert memory.read_text() == "- Dave drinks tea\n"


async def test_hostile_text_in_a_message_and_in_memory_is_shown_as_text(tusk, browser):
    """HTML and script in a chat message and in MEMORY.md appear literally and never run, even with CSP off."""
    await tusk.say("eve", "hello")
    (chat_dir(tusk, "eve") / "MEMORY.md").write_text(f"# Notes\n\n{XSS}\n\n[click me](javascript:window.__xss=3)\n")

    def scenario(page):
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/chat/eve")
        page.get_by_label("Message").fill(XSS)
        page.get_by_label("Message").press("Enter")
        expect(page.locator(".msg.user .plain").last).to_have_text(XSS)
        expect(page.locator(".msg.bot").last).to_contain_text(XSS)  # the echo, through the Markdown renderer
        assert page.evaluate("window.__xss") is None
        sign_in(page, tusk)
        page.goto(tusk.url + "/#/memory/http/eve")
        expect(page.locator(".memory .md")).to_contain_text(XSS)
        expect(page.locator(".memory .md")).to_contain_text("[click me](javascript:window.__xss=3)")
        assert page.locator(".memory .md a, .memory .md img, .memory .md script").count() == 0
        page.get_by_role("tab", name="Session").click()
        expect(page.locator(".session .entry.user .plain").last).to_have_text(XSS)
        assert page.evaluate("window.__xss") is None

    await browser.run(scenario, bypass_csp=True)


async def test_token_is_asked_once_and_sent_with_every_call(make_settings, fake_llm, browser):
    """With TUSK_HTTP_TOKEN set the page asks for it (again if wrong), then chats; a reload does not ask again."""
    app = TuskApp(make_settings(TUSK_HTTP_TOKEN="s3cret-token"))
    http = app.add_http()

    def scenario(page):
        page.goto(http.url + "/")
        dialog = page.locator("#token-dialog")
        expect(dialog).to_be_visible()
        dialog.get_by_label("Access token").fill("wrong")
        dialog.get_by_role("button", name="Continue").click()
        expect(dialog.locator(".problem")).to_have_text("That token was refused: try again.")
        dialog.get_by_label("Access token").fill("s3cret-token")
        dialog.get_by_role("button", name="Continue").click()
        expect(dialog).to_be_hidden()
        page.get_by_label("Message").fill("hello")
        page.get_by_label("Message").press("Enter")
        expect(page.locator(".msg.bot")).to_contain_text("echo:")
        page.reload()
        expect(page.locator(".msg.bot")).to_contain_text("echo:")
        expect(dialog).to_be_hidden()

    async with app, aiohttp.ClientSession() as client:
        await browser.run(scenario, allow_errors=("401",))
        async with client.get(http.url + "/api/chats") as resp:
            assert resp.status == 401
    assert json.dumps(fake_llm.requests[-1]["messages"]).count("hello") >= 1


async def test_the_token_is_kept_where_the_dialog_says_until_sign_out(make_settings, browser):
    """The dialog says the token stays in this browser's local storage until Sign out, and so it does: another tab
    of the same browser needs no token; Sign out removes it and the page asks for it again."""
    app = TuskApp(make_settings(TUSK_HTTP_TOKEN="s3cret-token"))
    http = app.add_http()

    def scenario(page):
        page.goto(http.url + "/")
        dialog = page.locator("#token-dialog")
        expect(dialog).to_contain_text("kept in this browser's local storage for this address, in every tab")
        expect(dialog).to_contain_text("until you sign out (Sign out at the top of the page) or clear this site's data")
        expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
        dialog.get_by_label("Access token").fill("s3cret-token")
        dialog.get_by_role("button", name="Continue").click()
        expect(dialog).to_be_hidden()
        stored = page.evaluate("localStorage.getItem('tusk-token')")
        other = page.context.new_page()
        other.goto(http.url + "/#/memory")
        expect(other.locator(".memory-list h2")).to_have_text("Every chat's memory")
        other_asked = other.locator("#token-dialog").is_visible()
        other.close()
        page.get_by_role("button", name="Sign out").click()
        expect(dialog).to_be_visible()
        return stored, other_asked, page.evaluate("localStorage.getItem('tusk-token')")

    async with app:
        stored, other_asked, after = await browser.run(scenario, allow_errors=("401",))
    assert stored == "s3cret-token" and not other_asked and after is None


async def test_the_tools_page_lists_mcp_servers_without_their_secrets(make_settings, tmp_path, browser):
    """The Tools page shows each MCP server, its chats, state and tools; an env value never reaches the page."""
    import sys
    from pathlib import Path

    fake = str(Path(__file__).resolve().parent / "fakes" / "fake_mcp.py")
    secret = "s3cr3t-console-value"
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"notes": {
        "command": sys.executable, "args": [fake, "hang"], "cwd": str(tmp_path), "env": {"NOTES_TOKEN": secret},
        "chats": ["telegram:*"]}}}))
    app = TuskApp(make_settings(TUSK_MCP_CONFIG=str(tmp_path / "mcp.json")))
    http = app.add_http()
    async with app:
        def scenario(page):
            page.goto(f"http://127.0.0.1:{http.port}/#token={http.settings.token}")
            expect(page).not_to_have_url(re.compile("token"))  # kept by the page (as sign_in waits for)
            expect(page.locator("#token-dialog")).to_be_hidden()
            page.click("a[data-page='tools']")
            row = page.locator("tr[data-server='notes']")
            expect(row).to_contain_text("telegram:*")
            expect(row).to_contain_text("ready")
            expect(row).to_contain_text("notes__hang, notes__ping")
            expect(row).to_contain_text("NOTES_TOKEN=***")
            return page.content()

        html = await browser.run(scenario)
    assert secret not in html


def metered_month(app):
    """A month of priced calls in three chats (and the one conversation's own, of unknown price), for the Usage page."""
    now = time.time()
    chats = [("telegram", "-1001843", ("ana", "bo", "chen")), ("discord", "1187", ("dee",)),
             ("slack", "D0ANA", ("ana",))]
    for day in range(28, -1, -1):  # today too, for today's standing against the limits
        for n, (channel, chat, people) in enumerate(chats):
            calls = (day * 7 + n * 3) % 5 + (3 - n)
            for i in range(calls):
                tokens = 900 + (day * 131 + i * 57) % 2400
                app.ledger.record(Call(now - day * 86_400 - (i + 1) * 60, channel, chat, people[i % len(people)],
                                       "reply", "openai/gpt-4o-mini", tokens, tokens // 5,
                                       cost_usd=tokens * 4e-6, cost_source="litellm"))


async def test_docs_screenshots(make_settings, browser, fake_llm, tmp_path):
    """The chat, memory and usage pages the docs show, after a real conversation and a month of metered calls;
    saved to docs/images/ with TUSK_DOCS_SCREENSHOTS=1."""
    shots = DOCS_IMAGES or tmp_path
    fake_llm.script(
        Reply(text="Nice to meet you, Ana! Norway in June is a fine choice: long days, and the snow is "
                   "mostly gone from the lower trails."),
        save_memory_call("Ana introduced herself; she plans a hiking trip to Norway in June and asked about trails.",
                         "## Ana\n\n- Plans a **hiking trip to Norway** in June\n- Prefers huts to tents\n"
                         "- Time zone: Europe/Berlin\n"),
        Reply(text="You're planning a **hiking trip to Norway** in June, and you prefer huts to tents. "
                   "A few trails that suit that:\n\n- **Besseggen** (Jotunheimen): a classic day hike, "
                   "Gjendesheim hut at the start\n- **Trolltunga**: long, best from mid-June\n"
                   "- **Romsdalseggen**: ridge views over Åndalsnes\n\nWant me to remind you to book the huts?"))
    async with running(make_settings(TUSK_LIMIT_DAILY_USD="0.2", TUSK_LIMIT_MONTHLY_USD="5",
                                     TUSK_CHAT_LIMIT_DAILY_USD="0.06")) as tusk:
        await tusk.say("ana", "Hi! I'm Ana. I'm planning a hiking trip to Norway in June, and I prefer huts to tents.")
        await tusk.say("ana", "/new")
        await tusk.say("ana", "What do you remember about my trip? Any trails you'd suggest?")
        metered_month(tusk)
        await browser.run(lambda page: screenshots(page, tusk, shots), viewport={"width": 1100, "height": 680})
    assert (shots / "console-chat.png").stat().st_size > 10_000 and (shots / "console-memory.png").exists()
    assert (shots / "console-usage.png").stat().st_size > 10_000


def screenshots(page, tusk, shots):
    """The docs' pictures of the console: the chat, one chat's memory, the Usage page."""
    sign_in(page, tusk)
    page.goto(tusk.url + "/#/chat/ana")
    expect(page.locator(".msg.bot").last.locator("li")).to_have_count(3)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=shots / "console-chat.png")
    page.goto(tusk.url + "/#/memory/http/ana")
    expect(page.locator(".memory .md strong")).to_have_text("hiking trip to Norway")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=shots / "console-memory.png")
    page.set_viewport_size({"width": 1100, "height": 900})
    page.goto(tusk.url + "/#/usage")
    expect(page.locator(".usage-chart canvas")).to_have_count(1)
    expect(page.locator(".top-chat tbody tr")).to_have_count(4)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=shots / "console-usage.png")
