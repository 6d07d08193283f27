"""Never twice: a platform's repeated delivery of one message is answered once (also across a restart), and a
reply is never sent twice by a retry (of a send, of the model)."""

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sqlite3

import aiohttp
import pytest

from bot.app import TuskApp
from bot.dedupe import FILE, MemorySeen, SeenStore
from store.postgres.seen import PgSeen
from tests import procs
from tests.conftest import running
from tests.fakes.fake_discord import FakeDiscord, snowflake
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.fake_telegram import FakeTelegram
from tests.test_cli import env_for
from tests.test_inbox import start_tusk as start_tusk_run
from tests.test_inbox import user_texts, where  # noqa: F401  (where: a fixture)
from tests import kept


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(autouse=True)
def plain_echo(fake_llm):
    """The model answers "echo: " and the last line of the message (the runtime context left out)."""
    fake_llm.responder = lambda body: Reply(text="echo: " + str(body["messages"][-1]["content"]).splitlines()[-1])


@contextlib.asynccontextmanager
async def tusk_on(settings):
    app = TuskApp(settings)
    app.add_platforms()
    async with app:
        yield app


# -- the store ------------------------------------------------------------------------------------------


@pytest.fixture(params=["files", "postgres"])
def seen_store(request, tmp_path):
    """`make(**options)`: a new process's seen ids on one storage (seen.sqlite under tmp_path, or a fresh
    database's `seen`); closed when the test ends."""
    db = request.getfixturevalue("shared_db") if request.param == "postgres" else None
    made = []

    def make(**options):
        store = SeenStore(tmp_path, **options) if db is None else PgSeen(db, **options)
        made.append(store)
        return store

    make.kind = request.param
    make.count = lambda: (sqlite3.connect(tmp_path / FILE).execute("SELECT count(*) FROM seen").fetchone()[0]
                          if db is None else _pg_count(db))
    yield make
    for store in made:
        store.close()


def _pg_count(db):
    with db.connection() as conn:
        return conn.execute("SELECT count(*) FROM seen").fetchone()[0]


def test_the_store_says_repeat_once_recorded_and_keeps_it_across_opens(seen_store, tmp_path):
    """seen() is False the first time and True after, in the same object and in a new one on the same storage;
    platforms do not share ids; the file is private."""
    first = seen_store()
    assert first.seen("telegram", "42:7") is False and first.seen("telegram", "42:7") is True
    assert first.seen("slack", "42:7") is False
    first.close()
    again = seen_store()
    assert again.seen("telegram", "42:7") is True and again.seen("telegram", "42:8") is False
    if isinstance(again, SeenStore):
        assert os.stat(tmp_path / FILE).st_mode & 0o777 == 0o600


def test_the_store_is_bounded(seen_store, monkeypatch):
    """Past its row cap the oldest ids go (pruned as it grows), the newest stay."""
    monkeypatch.setattr("bot.dedupe.PRUNE_EVERY", 10)
    store = seen_store(keep_rows=20, **({"prune_every": 10} if seen_store.kind == "postgres" else {}))
    for i in range(100):
        store.seen("discord", str(i))
    assert seen_store.count() <= 30 and store.seen("discord", "99") is True and store.seen("discord", "0") is False


def test_two_processes_on_one_database_take_an_id_once(shared_db):
    """Two processes' stores asked for the same ids at once (threads, each its own pool): each id is new to
    exactly one of them."""
    from concurrent.futures import ThreadPoolExecutor

    from store.postgres.pool import SyncDatabase

    other = SyncDatabase(shared_db.url)
    try:
        stores = [PgSeen(shared_db), PgSeen(other)]
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda s: [s.seen("telegram", f"1:{i}") for i in range(200)], stores))
    finally:
        other.close()
    assert all(a != b for a, b in zip(*answers))


def test_a_damaged_store_is_set_aside_and_started_anew(tmp_path, caplog):
    """A file that is not a database is kept as .damaged (logged) and a new one is used: no message is lost."""
    (tmp_path / FILE).write_bytes(b"this is not sqlite at all" * 100)
    with caplog.at_level(logging.WARNING):
        store = SeenStore(tmp_path)
        assert store.seen("telegram", "1:1") is False
    assert (tmp_path / (FILE + ".damaged")).exists() and "damaged" in caplog.text


def test_the_memory_backend_forgets_the_oldest():
    """The one-process backend keeps its last `size` ids."""
    seen = MemorySeen(size=2)
    assert [seen.seen("x", i) for i in "abca"] == [False, False, False, False]
    assert seen.seen("x", "c") is True


# -- Telegram ---------------------------------------------------------------------------------------------


async def test_a_telegram_webhook_retry_is_answered_once(make_settings, fake_llm):
    """Telegram posts the same update again (its webhook retry): one answer; the next message is answered."""
    async with FakeTelegram() as tg:
        port = free_port()
        settings = make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url,
                                 TELEGRAM_WEBHOOK_URL="https://bot.example.org/hook", TELEGRAM_WEBHOOK_PORT=port,
                                 TELEGRAM_WEBHOOK_SECRET="hook-secret-123")
        async with tusk_on(settings), aiohttp.ClientSession() as client:
            update, sentinel = tg.push_message(42, "only once"), tg.push_message(42, "the sentinel")
            for body in (update, update, sentinel):
                async with client.post(f"http://127.0.0.1:{port}/hook", json=body,
                                       headers={"X-Telegram-Bot-Api-Secret-Token": "hook-secret-123"}) as resp:
                    assert resp.status == 200
            await tg.wait_for(lambda: len(tg.sent) == 2, timeout=10)
    assert [m["plain"] for m in tg.sent] == ["echo: only once", "echo: the sentinel"]
    assert len(fake_llm.requests) == 2


@pytest.mark.both_stores
async def test_a_telegram_update_delivered_again_after_a_restart_is_not_answered_again(make_settings, fake_llm):
    """Answered, Tusk restarts, Telegram hands the same update over again (its offset was not confirmed):
    no second answer; the session holds the message once (on either store)."""
    async with FakeTelegram() as tg:
        settings = make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url)
        update = tg.push_message(42, "answer me once")
        async with tusk_on(settings):
            await tg.wait_for(lambda: tg.sent, timeout=10)
        tg.push_update(update)  # the same update_id and message, delivered again
        tg.push_message(42, "the sentinel")
        async with tusk_on(settings) as app:
            await tg.wait_for(lambda: len(tg.sent) == 2, timeout=10)
            users = [m.content for m in (await kept.session(app, "telegram", "42")).unconsolidated if m.role == "user"]
    assert [m["plain"] for m in tg.sent] == ["echo: answer me once", "echo: the sentinel"]
    assert users == ["answer me once", "the sentinel"] and len(fake_llm.requests) == 2


async def test_after_a_crash_the_journal_replays_and_the_redelivery_is_dropped(fake_llm, tmp_path, where):
    """SIGKILL while the model answers; Telegram hands the update over again and the journal holds it too: it
    is answered once (by the replay), and the next message normally (on files, and on a database)."""
    async with FakeTelegram() as tg:
        env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TELEGRAM_BOT_TOKEN=tg.token,
                      TELEGRAM_API_BASE=tg.base_url, TELEGRAM_ALLOW_FROM="7", **where)
        proc = await start_tusk_run(env)
        fake_llm.script(Reply(text="never sent", delay=30))
        update = tg.push_message(42, "cut short by the crash")
        await fake_llm.wait_for_requests(1, timeout=procs.FIRST_TURN)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        tg.push_update(update)  # Telegram delivers it again
        fake_llm.responder = lambda body: Reply(text=f"answer to {body['messages'][-1]['content'][-30:]}")
        proc = await start_tusk_run(env)
        await tg.wait_for(lambda: tg.sent, timeout=procs.FIRST_TURN)
        tg.push_message(42, "the sentinel")
        await tg.wait_for(lambda: len(tg.sent) == 2, timeout=procs.FIRST_TURN)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    assert len(tg.sent) == 2 and tg.sent[1]["plain"].endswith("the sentinel") and len(fake_llm.requests) == 3
    users = await user_texts(tmp_path / "data", where, "telegram", "42")
    assert users == ["cut short by the crash", "the sentinel"]


async def test_a_telegram_send_whose_answer_was_lost_is_not_sent_again(make_settings, fake_llm, caplog):
    """sendMessage is carried out but the connection drops before its answer: the reply is not sent a second
    time (it may have arrived), and the log says so; a send that never connected would be retried."""
    async with FakeTelegram() as tg:
        settings = make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url)
        async with tusk_on(settings) as app:
            tg.lose_answer_next("sendMessage")
            with caplog.at_level(logging.ERROR):
                tg.push_message(42, "hello")
                await tg.wait_for(lambda: any("not sent again" in r.getMessage() for r in caplog.records), timeout=10)
            tg.push_message(42, "the sentinel")
            await tg.wait_for(lambda: len(tg.sent) == 2, timeout=10)
            assert [m.role for m in kept.on_disk(app, "telegram", "42").unconsolidated] == ["user", "assistant"] * 2
    assert [m["plain"] for m in tg.sent] == ["echo: hello", "echo: the sentinel"]
    assert [m for m, _ in tg.calls].count("sendMessage") == 2


# -- Slack ------------------------------------------------------------------------------------------------


async def test_a_slack_retry_is_answered_once_also_after_a_restart(make_settings, fake_llm):
    """HTTP events: an event, its retry (same event_id, X-Slack-Retry-Num), and after a restart another retry:
    one answer; a new message is answered."""
    async with FakeSlack(bot_user_id="U0TUSK") as slack:
        slack.add_user("U0ANN", "ann")
        port = free_port()
        settings = make_settings(SLACK_BOT_TOKEN=slack.bot_token, SLACK_SIGNING_SECRET=slack.signing_secret,
                                 SLACK_API_URL=slack.api_url, SLACK_HTTP_PORT=str(port))
        url = f"http://127.0.0.1:{port}/slack/events"
        body = slack.event_body(slack.dm("answer me once"))
        async with tusk_on(settings):
            assert (await slack.deliver(url, body))[0] == 200
            assert (await slack.deliver(url, body, retry_num=1))[0] == 200
            await slack.wait_for(lambda: slack.posted, timeout=10)
        async with tusk_on(settings):
            assert (await slack.deliver(url, body, retry_num=2))[0] == 200
            assert (await slack.deliver(url, slack.event_body(slack.dm("the sentinel"))))[0] == 200
            await slack.wait_for(lambda: len(slack.posted) == 2, timeout=10)
    assert [p["text"] for p in slack.posted] == ["echo: answer me once", "echo: the sentinel"]
    assert len(fake_llm.requests) == 2


async def test_a_slack_post_answered_with_a_server_error_is_not_posted_again(make_settings, fake_llm, caplog):
    """chat.postMessage answered 500 may have been posted: it is not sent again (users.info's 5xx still is)."""
    async with FakeSlack(bot_user_id="U0TUSK") as slack:
        slack.add_user("U0ANN", "ann")
        settings = make_settings(SLACK_BOT_TOKEN=slack.bot_token, SLACK_APP_TOKEN=slack.app_token,
                                 SLACK_API_URL=slack.api_url)
        async with tusk_on(settings):
            await slack.wait_connected()
            slack.fail_next("chat.postMessage", "internal_error", status=500)
            with caplog.at_level(logging.WARNING):
                await slack.send_event(slack.dm("hello"))
                await slack.wait_for(lambda: "not sent again" in caplog.text, timeout=10)
            await slack.send_event(slack.dm("the sentinel"))
            await slack.wait_for(lambda: slack.posted, timeout=10)
    assert len(slack.calls_to("chat.postMessage")) == 2 and [p["text"] for p in slack.posted] == ["echo: the sentinel"]


# -- Discord ----------------------------------------------------------------------------------------------


@pytest.fixture
async def dc():
    async with FakeDiscord(token="fake-discord-token-123") as fake:
        fake.alice, fake.dm = fake.add_user("alice"), snowflake()
        yield fake


def discord_settings(make_settings, dc):
    return make_settings(DISCORD_BOT_TOKEN=dc.token, DISCORD_API_BASE=dc.api_base, DISCORD_GATEWAY_URL=dc.gateway_url)


async def test_a_discord_message_replayed_by_the_gateway_is_answered_once(make_settings, dc, fake_llm):
    """The gateway sends a MESSAGE_CREATE again (a RESUME's replay): one answer; the next message is answered."""
    async with tusk_on(discord_settings(make_settings, dc)):
        await dc.wait_connected()
        message = await dc.message(dc.dm, dc.alice, "answer me once")
        await dc.wait_for(lambda: dc.sent, timeout=10)
        await dc.replay(message)
        await dc.message(dc.dm, dc.alice, "the sentinel")
        await dc.wait_for(lambda: len(dc.sent) == 2, timeout=10)
    assert [m["content"] for m in dc.sent] == ["echo: answer me once", "echo: the sentinel"]
    assert len(fake_llm.requests) == 2


async def test_a_discord_send_retried_after_a_lost_answer_posts_once(make_settings, dc, fake_llm):
    """The message is created but the answer is a 502: discord.py sends it again with the same nonce, which
    Discord enforces, so the channel shows it once."""
    async with tusk_on(discord_settings(make_settings, dc)):
        await dc.wait_connected()
        dc.lose_answer_next("POST", f"/channels/{dc.dm}/messages", status=502)
        await dc.message(dc.dm, dc.alice, "hello")
        await dc.wait_for(lambda: [p for m, p in dc.requests if m == "POST" and p.endswith("/messages")][1:],
                          timeout=15)
        await dc.message(dc.dm, dc.alice, "the sentinel")
        await dc.wait_for(lambda: len(dc.sent) == 2, timeout=10)
    posts = [p for m, p in dc.requests if m == "POST" and p.endswith(f"/channels/{dc.dm}/messages")]
    assert len(posts) == 3 and [m["content"] for m in dc.sent] == ["echo: hello", "echo: the sentinel"]


# -- the model --------------------------------------------------------------------------------------------


async def test_a_fallback_model_after_an_unshown_cut_does_not_repeat_the_first_part(make_settings, fake_llm):
    """The first model's stream breaks before any of it was shown; the fallback model answers: the streamed
    preview is exactly the final reply (nothing of the first attempt in it), sent once."""
    first_words = " ".join(f"first{i}" for i in range(10))
    fallback = " ".join(f"second{i}" for i in range(80))
    fake_llm.script(Reply(text=first_words, token_delay=0.005, cut_after=5),  # broken before it showed
                    Reply(status=500),  # asked again unstreamed: the server fails
                    Reply(text=fallback, token_delay=0.005))  # the fallback model, streamed
    async with running(make_settings(TUSK_FALLBACK_MODELS="openai/fake-fallback")) as tusk:
        events, name = [], None
        async with tusk.client.post(f"{tusk.url}/v1/chats/fb/messages", json={"text": "hi", "stream": True}) as resp:
            async for raw in resp.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    events.append((name, json.loads(line[6:])))
    shown = "".join(data["text"] for kind, data in events if kind == "delta" and not data.get("replace"))
    assert events[-1] == ("done", {"replies": [fallback], "formats": ["markdown"]}) and shown == fallback \
        and "first" not in shown
    assert [body["model"] for body in fake_llm.requests] == ["fake-model", "fake-model", "fake-fallback"]
