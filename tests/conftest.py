"""Shared fixtures: a fake LLM server, settings pointing at it, a running Tusk with its HTTP channel."""

import contextlib
import json
import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import aiohttp
import pytest

from bot.app import TuskApp
from bot.config import load_settings
from bot.llm import load_litellm
from tests import procs
from tests.fakes.fake_llm import FakeLLM


@pytest.fixture(autouse=True, scope="session")
def _litellm_loaded():
    """litellm imported once per test process, before the first test: an in-process Tusk's first turn then
    waits for nothing (a started `tusk` still loads it in the background, as in use)."""
    load_litellm().result()


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test():
    """Every process a test started through tests.procs is killed (with its group) when the test ends."""
    yield
    assert procs.cleanup() == [], "a test process survived SIGKILL"


@pytest.fixture(autouse=True)
def _no_user_dirs(tmp_path, monkeypatch):
    """In-process code finds no settings file or data dir of the developer's (bot/places.py), nor the skills
    other agents share (~/.agents/skills, bot/skills/catalog.py): the user config and data dirs and the home
    point into this test's temporary folder."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    (tmp_path / "user-home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))


@pytest.fixture
async def fake_llm():
    async with FakeLLM() as llm:
        yield llm


@pytest.fixture
async def tg():
    """The fake Telegram Bot API (tests/fakes/fake_telegram.py), its bot @tusk_bot."""
    from tests.fakes.fake_telegram import FakeTelegram

    async with FakeTelegram(token="123:ABC", username="tusk_bot") as fake:
        yield fake


def pytest_generate_tests(metafunc):
    """A module marked `both_stores` runs each of its tests that make settings on the files and on PostgreSQL."""
    if "store_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_stores"):
        metafunc.parametrize("store_backend", ["files", "postgres"], indirect=True)


@pytest.fixture
def store_backend(request):
    """Which store the test's Tusk keeps its data in: files (the default), or a fresh PostgreSQL database."""
    return getattr(request, "param", "files")


@pytest.fixture
def make_settings(tmp_path, fake_llm, monkeypatch, store_backend, request):
    database_url = request.getfixturevalue("pg_url") if store_backend == "postgres" else None
    for name in list(os.environ):
        if name.startswith(("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no stray .env

    def make(**env):
        base = {"TUSK_HOME": str(tmp_path / "data"), "TUSK_MODEL": "openai/fake-model",
                "TUSK_API_BASE": fake_llm.base_url, "TUSK_API_KEY": "sk-test-secret-key",
                "TUSK_HTTP_PORT": "0", "TUSK_LLM_RETRIES": "0", "TUSK_LLM_BACKOFF": "0.01", "TUSK_SHUTDOWN_GRACE": "5",
                "TUSK_DM_POLICY": "open"}  # tests about who may talk set their own policy
        if database_url:
            base["TUSK_DATABASE_URL"] = database_url
        return load_settings(**{**base, **{k: str(v) for k, v in env.items()}})

    return make


@pytest.fixture
async def tusk(make_settings):
    """A running Tusk (HTTP channel only) and a helper to post a message and get the replies."""
    async with running(make_settings()) as app:
        yield app


@contextlib.asynccontextmanager
async def running(settings):
    """Tusk started with `settings` (HTTP channel only), with `say(chat, text)` for the replies."""
    app = TuskApp(settings)
    http = app.add_http()
    async with app:
        await app.ready()  # litellm loaded and the window settled, as after a first turn
        origin = f"http://127.0.0.1:{http.port}"  # the console token, sent like the console page sends it
        headers = {"Authorization": f"Bearer {http.settings.token}", "Origin": origin}
        async with aiohttp.ClientSession(headers=headers) as client:
            yield with_helpers(app, http, client)


def with_helpers(app, http, client):
    async def say(chat, text, **extra):
        url = f"http://127.0.0.1:{http.port}/v1/chats/{chat}/messages"
        async with client.post(url, json={"text": text, **extra}) as resp:
            assert resp.status == 200, await resp.text()
            return (await resp.json())["replies"]

    async def say_streamed(chat, text, **extra):
        """The replies of a turn asked for as Server-Sent Events: someone watches, so the model streams."""
        url = f"http://127.0.0.1:{http.port}/v1/chats/{chat}/messages"
        last = None
        async with client.post(url, json={"text": text, "stream": True, **extra}) as resp:
            assert resp.status == 200, await resp.text()
            async for raw in resp.content:
                if raw.startswith(b"data: "):
                    last = json.loads(raw[6:])
        assert last is not None and "replies" in last, last
        return last["replies"]

    app.say = say
    app.say_streamed = say_streamed
    app.url = f"http://127.0.0.1:{http.port}"
    app.client = client
    app.token = http.settings.token
    return app


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server for this test process (tests/pg_server.py), stopped when the run ends."""
    from tests.pg_server import PgServer, available

    if not available():
        pytest.fail("PostgreSQL is not installed (apt-get install postgresql): .ci/run installs it")
    with PgServer() as server:
        yield server


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the test server, owned by an unprivileged role; its URL."""
    url = pg_server.new_database()
    yield url
    pg_server.drop_database(url.rsplit("/", 1)[1])


def migrated(url: str) -> None:
    """The database at `url` brought to the current schema (store/postgres/migrations.py), from sync code."""
    import asyncio
    import concurrent.futures

    from store.postgres import migrations
    from store.postgres.pool import Database

    async def upgrade() -> None:
        db = Database(url)
        await db.open()
        try:
            await migrations.require_current(db)
        finally:
            await db.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own event loop, whoever runs this test's
        pool.submit(asyncio.run, upgrade()).result()


@pytest.fixture
def shared_db(pg_url):
    """The test database at the current schema, through the sync pool of the shared stores (closed after)."""
    from store.postgres.pool import SyncDatabase

    migrated(pg_url)
    db = SyncDatabase(pg_url)
    yield db
    db.close()
