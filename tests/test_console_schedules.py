"""The console's reminders and schedules: the JSON API (list, pause, resume, cancel, bad ids) and the
Reminders page and tab in a real headless Chromium."""

import contextlib
import re

import aiohttp
import pytest

from bot.app import TuskApp
from tests.browser import BrowserThread, playwright_expect
from tests.conftest import with_helpers
from tests.fakes.fake_llm import Reply
from tests.schedule_clock import Clock, berlin, outcome, scheduling

expect = playwright_expect()


@pytest.fixture(scope="module")
def browser():
    b = BrowserThread()
    yield b
    b.close()


@contextlib.asynccontextmanager
async def console(settings, clock):
    """A running Tusk with its HTTP channel whose schedules read `clock`, with `say` and `client` helpers."""
    app = TuskApp(settings)
    app.schedules.clock = clock
    http = app.add_http()
    async with app:
        await app.ready()
        origin = f"http://127.0.0.1:{http.port}"
        headers = {"Authorization": f"Bearer {http.settings.token}", "Origin": origin}
        async with aiohttp.ClientSession(headers=headers) as client:
            yield with_helpers(app, http, client)


async def call(tusk, method, path):
    headers = {"Content-Type": "application/json"} if method != "GET" else {}
    async with tusk.client.request(method, tusk.url + path, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_the_api_lists_pauses_resumes_and_cancels(make_settings, fake_llm):
    """GET /api/schedules shows each chat's schedules with rule, next run in its zone and runs; pause and resume
    act as /reminders does; a one-time reminder cannot be paused (409); an unknown id is a 404; cancel removes it."""
    clock = Clock(berlin(2026, 3, 2, 7, 0))
    async with console(make_settings(TUSK_TIMEZONE="Europe/Berlin"), clock) as tusk:
        fake_llm.script(scheduling("stretch", repeat="every day at 10:00"), Reply(text="ok"),
                        scheduling("dentist", when="2026-03-05T09:00"), Reply(text="ok"))
        await tusk.say("a", "stretch daily")
        await tusk.say("b", "dentist thursday")
        clock.set(berlin(2026, 3, 2, 10, 0))
        assert await tusk.schedules.tick() == 1
        (sid,) = [s.id for s in tusk.schedules.all() if s.kind == "text"]
        await outcome(tusk, sid, berlin(2026, 3, 2, 10, 0))
        status, body = await call(tusk, "GET", "/api/schedules")
        assert status == 200 and [(s["chat_id"], s["kind"]) for s in body["schedules"]] == [("a", "text"), ("b", "reminder")]
        daily = body["schedules"][0]
        assert daily["when"] == "every day at 10:00, next Tue 2026-03-03 10:00 Europe/Berlin" and not daily["paused"]
        assert daily["runs"][0]["status"] == "delivered" and daily["runs"][0]["shown"].startswith("Mon 2026-03-02 10:00")
        status, one = await call(tusk, "GET", "/api/schedules?channel=http&chat_id=b")
        assert [s["text"] for s in one["schedules"]] == ["dentist"]
        status, paused = await call(tusk, "POST", f"/api/schedules/{sid}/pause")
        assert status == 200 and paused["paused"] and paused["when"] == "every day at 10:00, paused"
        clock.set(berlin(2026, 3, 3, 10, 0))
        assert await tusk.schedules.tick() == 0
        status, resumed = await call(tusk, "POST", f"/api/schedules/{sid}/resume")
        assert resumed["when"] == "every day at 10:00, next Wed 2026-03-04 10:00 Europe/Berlin"
        rid = one["schedules"][0]["id"]
        assert (await call(tusk, "POST", f"/api/schedules/{rid}/pause"))[0] == 409
        assert (await call(tusk, "DELETE", "/api/schedules/snothing"))[0] == 404
        assert await call(tusk, "DELETE", f"/api/schedules/{sid}") == (200, {"cancelled": sid})
        assert [s["id"] for s in (await call(tusk, "GET", "/api/schedules"))[1]["schedules"]] == [rid]


async def test_the_reminders_page_shows_runs_and_pauses(make_settings, fake_llm, browser):
    """The Reminders page lists a schedule with its rule, next run and a failed run's reason; Pause turns it to
    paused and Resume back; the chat's own Reminders tab shows it too; Cancel removes it."""
    clock = Clock(berlin(2026, 3, 2, 7, 0))
    async with console(make_settings(TUSK_TIMEZONE="Europe/Berlin"), clock) as tusk:
        fake_llm.script(scheduling("brief me", repeat="every day at 08:00", kind="instruction"), Reply(text="ok"),
                        Reply(status=500))
        await tusk.say("web", "brief me daily")
        (s,) = tusk.schedules.all()
        clock.set(berlin(2026, 3, 2, 8, 0))
        assert await tusk.schedules.tick() == 1
        await outcome(tusk, s.id, berlin(2026, 3, 2, 8, 0))

        def scenario(page):
            page.goto(f"{tusk.url}/#token={tusk.token}")
            expect(page).not_to_have_url(re.compile("token"))
            page.goto(tusk.url + "/#/reminders")
            row = page.locator(f"tr[data-schedule='{s.id}']")
            expect(row).to_contain_text("every day at 08:00, next Tue 2026-03-03 08:00 Europe/Berlin")
            expect(row).to_contain_text("instruction")
            expect(row.locator("td.error")).to_contain_text("failed (The model is unavailable")
            row.get_by_role("button", name="Pause").click()
            expect(row).to_contain_text("every day at 08:00, paused")
            row.get_by_role("button", name="Resume").click()
            expect(row).to_contain_text("next Tue 2026-03-03 08:00")
            page.goto(tusk.url + "/#/memory/http/web")
            page.get_by_role("tab", name="Reminders").click()
            tab_row = page.locator(f".tab-body tr[data-schedule='{s.id}']")
            expect(tab_row).to_contain_text("brief me")
            tab_row.get_by_role("button", name="Cancel").click()
            expect(page.locator(".tab-body")).to_contain_text("No reminders or schedules")

        await browser.run(scenario)
        assert tusk.schedules.all() == []
