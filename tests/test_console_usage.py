"""The console's Usage page: /api/usage and /api/budgets against a running Tusk, and the page in Chromium."""

import json
from datetime import datetime, timezone

import aiohttp
import pytest

from bot.usage.ledger import Call
from bot.usage.view import day_start
from tests.browser import BrowserThread, playwright_expect
from tests.conftest import running
from tests.test_console_api import call

UTC = timezone.utc
TODAY = day_start(UTC) + 1  # a second past midnight (UTC, the default zone): today whatever the hour
TWO_DAYS_AGO = day_start(UTC, 2) + 1
LIMITS = {"TUSK_LIMIT_DAILY_USD": "5", "TUSK_LIMIT_MONTHLY_USD": "50", "TUSK_CHAT_LIMIT_DAILY_USD": "0.001"}


def seed(app):
    """telegram:-100 (two people, priced, today and two days ago) and http:alice (an unknown price, today)."""
    for c in (Call(TODAY, "telegram", "-100", "7", "reply", "openai/gpt-4o-mini", 1000, 200,
                   cost_usd=0.003, cost_source="litellm"),
              Call(TODAY + 2, "telegram", "-100", "8", "reply", "openai/gpt-4o-mini", 500, 100,
                   cost_usd=0.002, cost_source="provider"),
              Call(TWO_DAYS_AGO, "telegram", "-100", "7", "reply", "openai/gpt-4o-mini", 400, 10,
                   cost_usd=0.25, cost_source="provider"),
              Call(TODAY + 3, "http", "alice", "alice", "reply", "local/llama", 300, 40)):
        app.ledger.record(c)


def day(ts):
    return datetime.fromtimestamp(ts, UTC).date().isoformat()


async def test_usage_gives_each_days_cost_stacked_by_chat_and_the_top_chats_and_people(tusk):
    """Per day and chat: cost, calls and tokens (cost null for an unknown price, 0 on a day without calls; tokens
    counted whatever the price); tops by cost."""
    seed(tusk)
    status, page = await call(tusk, "GET", "/api/usage?days=7")
    assert status == 200 and page["zone"] == "UTC"
    assert len(page["days"]) == 7 and page["days"][-1] == day(TODAY) and page["days"][-3] == day(TWO_DAYS_AGO)
    series = {s["chat"]: s for s in page["series"]}
    assert list(series) == ["telegram:-100", "http:alice"]  # costliest first, no "other": every chat is drawn
    tg, alice = series["telegram:-100"], series["http:alice"]
    assert tg["cost_usd"][-3:] == [0.25, 0.0, pytest.approx(0.005)] and tg["calls"][-3:] == [1, 0, 2]
    assert alice["cost_usd"][-1] is None and alice["calls"][-1] == 1 and alice["cost_usd"][0] == 0.0
    assert tg["tokens"][-3:] == [410, 0, 1800] and alice["tokens"][-1] == 340 and alice["tokens"][0] == 0
    assert [r["chat"] for r in page["top_chats"]] == ["telegram:-100", "http:alice"]
    assert page["top_chats"][1]["cost_usd"] is None
    assert [r["person"] for r in page["top_people"]] == ["telegram:7", "telegram:8", "http:alice"]
    assert page["standings"] == []  # no limit set


async def test_the_days_parameter_is_checked(tusk):
    """days must be a whole number from 1 to 366; a day before the period is left out."""
    seed(tusk)
    status, page = await call(tusk, "GET", "/api/usage?days=1")
    assert status == 200 and page["days"] == [day(TODAY)]
    assert {s["chat"]: s["calls"] for s in page["series"]} == {"telegram:-100": [2], "http:alice": [1]}
    for bad in ("0", "400", "x", "-1"):
        status, data = await call(tusk, "GET", f"/api/usage?days={bad}")
        assert status == 400 and "days must be a whole number" in data["error"]


async def test_todays_spend_against_each_limit(make_settings):
    """Owner daily and monthly, each chat's default or own limit: figures, and which are reached."""
    async with running(make_settings(**LIMITS)) as app:
        seed(app)
        assert (await call(app, "PUT", "/api/budgets/http/bob", json={"daily_usd": 2}))[0] == 200
        status, page = await call(app, "GET", "/api/usage")
    rows = {(s["limit"], s["who"]): s for s in page["standings"]}
    assert rows[("owner_daily", "everyone")]["spent"] == pytest.approx(0.005)
    assert rows[("owner_monthly", "everyone")]["limit_value"] == 50 and not rows[("owner_monthly", "everyone")]["reached"]
    chat = rows[("chat_daily", "telegram:-100")]
    assert chat["limit_value"] == 0.001 and chat["reached"] and not chat["override"]
    alice = rows[("chat_daily", "http:alice")]  # its call has no price: no USD against it, and the page says so
    assert (alice["spent"], alice["unpriced_calls"], chat["unpriced_calls"]) == (0.0, 1, 0)
    assert rows[("owner_daily", "everyone")]["unpriced_calls"] == 1
    bob = rows[("chat_daily", "http:bob")]
    assert bob == {"limit": "chat_daily", "who": "http:bob", "limit_value": 2.0, "spent": 0.0, "unit": "usd",
                   "override": True, "reached": False, "unpriced_calls": 0}
    assert [(u["model"], u["limits"], u["token_limit"]) for u in page["unpriced"]] == [
        ("openai/fake-model", ["TUSK_LIMIT_DAILY_USD", "TUSK_LIMIT_MONTHLY_USD", "TUSK_CHAT_LIMIT_DAILY_USD",
                               "http:bob's own ($2 a day)"], None)]
    assert page["unpriced"][0]["note"].startswith("openai/fake-model has no known price: TUSK_LIMIT_DAILY_USD, ")
    assert "give it a price in TUSK_MODELS (fake-model=openai/fake-model@IN/OUT" in page["unpriced"][0]["fix"]


async def test_a_token_limit_counts_what_a_usd_limit_cannot_and_the_budget_says_so(make_settings):
    """A chat's USD limit on a model without a known price comes with a warning naming the fix; a token limit
    (PUT daily_tokens) is what then applies, shown in the standings and counted as the page says."""
    async with running(make_settings()) as app:
        path = "/api/budgets/terminal/local"
        status, data = await call(app, "PUT", path, json={"daily_usd": 0.01})
        assert status == 200 and data["warning"] == (
            "openai/fake-model has no known price, so a dollar limit cannot count its calls: give it a price in "
            "TUSK_MODELS (fake-model=openai/fake-model@IN/OUT, USD per million input/output tokens), or set a "
            "token limit (tusk budget set terminal:local --tokens 20000).")
        status, data = await call(app, "PUT", path, json={"daily_tokens": 20000})
        assert status == 200 and (data["daily_usd"], data["daily_tokens"], data["applies_tokens"]) == (0.01, 20000, 20000)
        assert data["warning"] == ("openai/fake-model has no known price, so a dollar limit cannot count its calls; "
                                   "they count against a daily limit of 20,000 tokens instead.")
        app.ledger.record(Call(TODAY, "terminal", "local", "me", "reply", "openai/fake-model", 700, 50))
        rows = {s["limit"]: s for s in (await call(app, "GET", "/api/usage"))[1]["standings"]}
    assert rows["chat_daily_tokens"] == {"limit": "chat_daily_tokens", "who": "terminal:local", "limit_value": 20000,
                                         "spent": 750, "unit": "tokens", "override": True, "reached": False,
                                         "unpriced_calls": 0}
    assert rows["chat_daily"]["unpriced_calls"] == 1 and rows["chat_daily"]["spent"] == 0.0


async def test_a_chats_own_limit_is_set_read_and_cleared(make_settings, tmp_path):
    """PUT writes budgets.json (0600) through Limits, GET reads it back, DELETE returns to the default."""
    async with running(make_settings(TUSK_CHAT_LIMIT_DAILY_USD="1")) as app:
        path = "/api/budgets/telegram/-100123"
        status, data = await call(app, "GET", path)
        assert status == 200 and {k: v for k, v in data.items() if k != "warning"} == {
            "chat": "telegram:-100123", "daily_usd": None, "default_daily_usd": 1.0, "applies_usd": 1.0,
            "daily_tokens": None, "default_daily_tokens": None, "applies_tokens": None}
        status, data = await call(app, "PUT", path, json={"daily_usd": 1.5})
        assert status == 200 and data["daily_usd"] == 1.5 and data["applies_usd"] == 1.5
        budgets = tmp_path / "data/budgets.json"
        assert json.loads(budgets.read_text())["chats"] == [{"channel": "telegram", "chat": "-100123", "daily_usd": 1.5}]
        assert budgets.stat().st_mode & 0o777 == 0o600
        assert (await call(app, "GET", path))[1]["daily_usd"] == 1.5
        assert app.limits.overrides()[next(iter(app.limits.overrides()))] == 1.5
        status, data = await call(app, "DELETE", path)
        assert status == 200 and data["daily_usd"] is None and data["applies_usd"] == 1.0
        assert json.loads(budgets.read_text())["chats"] == []
        assert (await call(app, "DELETE", path))[0] == 200  # clearing twice is no error


@pytest.mark.parametrize("body, message", [({"daily_usd": -1}, "greater than or equal to 0"),
                                           ({"daily_usd": "2"}, "daily_usd"), ({}, "daily_usd"),
                                           ({"daily_usd": 1, "weekly_usd": 2}, "weekly_usd")])
async def test_a_bad_budget_is_refused(tusk, body, message):
    """A negative, textual, missing or unexpected field is a 400 naming it, and nothing is written."""
    status, data = await call(tusk, "PUT", "/api/budgets/telegram/1", json=body)
    assert status == 400 and message in data["error"] and '{"daily_usd": 1.5}' in data["error"]
    assert not (tusk.settings.home / "budgets.json").exists()


async def test_a_bad_chat_is_refused(tusk):
    """A channel name that is no channel's is a 400."""
    status, data = await call(tusk, "PUT", "/api/budgets/Bad%20Channel/1", json={"daily_usd": 1})
    assert status == 400 and "bad channel name" in data["error"]


async def test_usage_needs_the_token_and_reading_creates_no_ledger(make_settings, tmp_path):
    """Without the bearer token the usage routes are 401; with it, a Tusk that made no call creates no ledger."""
    async with running(make_settings()) as app:
        async with aiohttp.ClientSession(headers={"Origin": app.url}) as client:  # the page's origin, no token
            for method, path in (("GET", "/api/usage"), ("PUT", "/api/budgets/telegram/1"),
                                 ("DELETE", "/api/budgets/telegram/1")):
                async with client.request(method, app.url + path, json={"daily_usd": 1}) as resp:
                    assert resp.status == 401, path
        status, page = await call(app, "GET", "/api/usage")
        assert status == 200 and page["series"] == [] and page["top_chats"] == []
        assert not (tmp_path / "data/usage.sqlite").exists()


@pytest.fixture
def browser():
    playwright_expect()  # skips (locally) without Playwright or Chromium
    b = BrowserThread()
    yield b
    b.close()


PAINTED = """c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; }"""


async def test_the_chart_shows_tokens_when_no_price_is_known(make_settings, browser):
    """With only calls to models of unknown price, the chart stacks their tokens (a cost chart would be empty) and
    says why; the Cost button shows the cost chart, with no bars, and Tokens brings the bars back."""
    expect = playwright_expect()
    async with running(make_settings()) as app:
        for c in (Call(TODAY, "http", "alice", "alice", "reply", "local/llama", 3000, 400),
                  Call(TWO_DAYS_AGO, "http", "bob", "bob", "reply", "local/llama", 1200, 300)):
            app.ledger.record(c)

        def scenario(page):
            page.goto(f"{app.url}/#token={app.token}")
            page.get_by_role("link", name="Usage").click()
            title, note = page.locator(".chart-box h3"), page.locator(".chart-note")
            expect(title).to_have_text("Daily tokens by chat (input + output)")
            expect(note).to_have_text("No model called in this period has a known price, so the chart shows tokens.")
            expect(page.get_by_role("button", name="Tokens")).to_have_attribute("aria-pressed", "true")
            tokens = page.locator(".usage-chart canvas").evaluate(PAINTED)
            page.get_by_role("button", name="Cost").click()
            expect(title).to_have_text("Daily cost by chat")
            cost = page.locator(".usage-chart canvas").evaluate(PAINTED)
            page.get_by_role("button", name="Tokens").click()
            expect(title).to_have_text("Daily tokens by chat (input + output)")
            return tokens, cost, page.locator(".usage-chart canvas").evaluate(PAINTED)

        tokens, cost, again = await browser.run(scenario)
    assert tokens > cost + 1000 and again == tokens, (tokens, cost, again)


async def test_the_usage_page_draws_its_chart_from_tusks_own_copy_of_uplot(make_settings, browser):
    """The Usage tab draws the stacked chart on a canvas with uplot.js served by Tusk (no request leaves
    127.0.0.1), lists the top chats and the limits, and sets a chat's own limit."""
    expect = playwright_expect()
    async with running(make_settings(**LIMITS)) as app:
        seed(app)

        def scenario(page):
            requests = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(f"{app.url}/#token={app.token}")
            page.get_by_role("link", name="Usage").click()
            canvas = page.locator(".usage-chart canvas")
            expect(canvas).to_have_count(1)
            expect(page.locator(".top-chat tbody tr")).to_have_count(2)
            expect(page.locator(".top-chat tbody tr").first).to_contain_text("telegram:-100")
            expect(page.locator(".standings li.reached")).to_contain_text("telegram:-100")
            painted = canvas.evaluate(PAINTED)
            legend = page.locator(".u-legend").inner_text()
            page.get_by_label("Chat (CHANNEL:ID)").fill("telegram:-100")
            page.get_by_label("Daily limit in USD").fill("0.5")
            page.get_by_role("button", name="Set").click()
            expect(page.locator(".budget-result")).to_have_text("telegram:-100 may spend $0.50 a day.")
            expect(page.locator(".standings li").filter(has_text="telegram:-100")).to_contain_text("its own limit")
            return requests, painted, legend

        requests, painted, legend = await browser.run(scenario)
        assert app.limits.overrides() and list(app.limits.overrides().values()) == [0.5]
    assert painted > 1000, "the chart's canvas is blank"
    assert "telegram:-100" in legend and "http:alice" in legend
    assert f"{app.url}/console/uplot.js" in requests and f"{app.url}/console/uplot.css" in requests
    assert all(url.startswith(app.url + "/") or url.startswith("data:") for url in requests), requests
