"""GET /readyz (channels/http/health.py) on a running Tusk's HTTP channel: public, 200 while its checks pass,
503 with a fixed reason when one fails, hangs or raises, and once the process drains."""

import asyncio
import logging

import aiohttp

from bot.app import TuskApp
from channels.http.health import DRAINING, Readiness
from store.postgres.pool import Database

TOKEN = "t" * 40


async def get(client, url):
    async with client.get(url) as resp:
        return resp.status, await resp.json()


def serving(make_settings, readiness):
    app = TuskApp(make_settings(TUSK_HTTP_TOKEN=TOKEN))
    return app, app.add_http(readiness)


async def test_without_checks_it_is_ready_and_public(make_settings):
    """No check (the files store): 200 {"ready": true} without the token, Host checks or not, while the API
    still wants the token."""
    app, http = serving(make_settings, Readiness())
    async with app, aiohttp.ClientSession() as client:
        assert await get(client, http.url + "/readyz") == (200, {"ready": True})
        async with client.get(http.url + "/readyz", headers={"Host": "lb.internal:8765"}) as resp:
            assert resp.status == 200 and resp.headers["Cache-Control"] == "no-store"
        async with client.get(http.url + "/api/chats") as resp:
            assert resp.status == 401


async def test_the_database_down_is_503_with_the_reason_then_ready_again(make_settings, pg_url, pg_server):
    """With the database's check: ready while it answers, 503 naming the database (never its URL or password)
    while it is stopped, ready again once it is back."""
    db = Database(pg_url)
    await db.open()
    readiness = Readiness()
    readiness.require(db.ready, "the database does not answer")
    app, http = serving(make_settings, readiness)
    try:
        async with app, aiohttp.ClientSession() as client:
            assert await get(client, http.url + "/readyz") == (200, {"ready": True})
            pg_server.stop()
            try:
                async with client.get(http.url + "/readyz") as resp:
                    body = await resp.text()
                    assert resp.status == 503, body
                assert await resp.json() == {"ready": False, "reason": "the database does not answer"}
                assert pg_server.password not in body and str(pg_server.port) not in body
            finally:
                pg_server.start()
            assert await get(client, http.url + "/readyz") == (200, {"ready": True})
    finally:
        await db.close()


async def test_a_check_that_hangs_or_raises_is_not_ready(make_settings, caplog):
    """A check slower than the timeout, or one that raises, is a 503 with its own reason; the exception's text
    (which could hold a secret) stays in the log."""
    never = asyncio.Event()

    async def hangs():
        await never.wait()
        return True

    async def raises():
        raise RuntimeError("connect to postgresql://u:hunter2@db failed")

    async def fine():
        return True

    slow, broken = Readiness(timeout=0.05), Readiness()
    slow.require(fine, "unused")
    slow.require(hangs, "the queue does not answer")
    broken.require(raises, "the database does not answer")
    app, http = serving(make_settings, slow)
    async with app, aiohttp.ClientSession() as client:
        assert await get(client, http.url + "/readyz") == (503, {"ready": False,
                                                                 "reason": "the queue does not answer"})
    app, http = serving(make_settings, broken)
    with caplog.at_level(logging.ERROR, "channels.http.health"):
        async with app, aiohttp.ClientSession() as client:
            async with client.get(http.url + "/readyz") as resp:
                assert resp.status == 503 and "hunter2" not in await resp.text()
    assert any("hunter2" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


async def test_draining_is_not_ready(make_settings):
    """After drain() (SIGTERM), /readyz is 503 "shutting down" even though every check passes."""
    async def fine():
        return True

    readiness = Readiness()
    readiness.require(fine, "unused")
    app, http = serving(make_settings, readiness)
    async with app, aiohttp.ClientSession() as client:
        assert (await get(client, http.url + "/readyz"))[0] == 200
        readiness.drain()
        assert await get(client, http.url + "/readyz") == (503, {"ready": False, "reason": DRAINING})
