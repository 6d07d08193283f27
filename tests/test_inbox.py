"""The inbox journal on both backends (inbox.jsonl: bot/inbox.py; the database's `inbox`: bot/inbox_pg.py): a
platform message whose turn a crash cut short is run again at the next start."""

import asyncio
import json
import signal

import pytest

from bot import running
from bot.app import TuskApp
from bot.events import ChatKey, InboundMessage, Injected
from bot.inbox import Inbox
from bot.inbox_pg import PgInbox
from memory.session import Message
from tests import procs
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.settle import drained
from tests.test_cli import env_for


@pytest.fixture
def held(tmp_path):
    """The home (tmp_path) held as a running Tusk holds it: what take_pending asks for."""
    claim = running.claim(tmp_path, "tusk run")
    yield claim
    claim.release()


@pytest.fixture(params=["files", "postgres"])
def journal(request, tmp_path):
    """`make(**files_options)`: the journal of a new process on the same storage (inbox.jsonl under tmp_path, or
    the inbox table of a fresh database); each made one is closed when the test ends."""
    db = request.getfixturevalue("shared_db") if request.param == "postgres" else None
    made = []

    def make(**options):
        inbox = Inbox(tmp_path / "inbox.jsonl", **options) if db is None else PgInbox(db)
        made.append(inbox)
        return inbox

    make.kind = request.param
    yield make
    for inbox in made:
        died(inbox)


def died(inbox) -> None:
    """The process that wrote to `inbox` is gone (the database's: its run's lock let go; a file has none)."""
    if isinstance(inbox, PgInbox):
        inbox.close()


def rows(inbox) -> int:
    """What the journal holds now: the file's lines, or the table's rows."""
    if isinstance(inbox, PgInbox):
        with inbox.db.connection() as conn:
            return conn.execute("SELECT count(*) FROM inbox").fetchone()[0]
    return len(inbox.path.read_text().splitlines())


def torn(inbox) -> None:
    """A record that cannot be read: a torn last line, or a row whose record is no message (of a dead run)."""
    if isinstance(inbox, PgInbox):
        with inbox.db.transaction() as conn:
            conn.execute("INSERT INTO inbox (run, seq, channel, chat_id, sender_id, record) "
                         "VALUES (999, 1, 'telegram', '1', '7', '{\"key\": [\"tel\"]}')")
        return
    with open(inbox.path, "a") as fh:
        fh.write('{"id": "torn", "key": ["tel')


def test_pending_are_the_messages_without_done(journal, held):
    """Recorded and not done comes back (fields and injected context intact); done or unreadable ones do not."""
    inbox = journal()
    a = InboundMessage(ChatKey("telegram", "-5.3"), "first", "7", "Ann", is_group=True, sender_is_admin=True, ts=1.5)
    b = InboundMessage(ChatKey("slack", "D1"), "second", "U1")
    c = InboundMessage(ChatKey("discord", "9"), "[reminder r1] call Bob", "tusk",
                       injected=Injected("reminder", "A reminder is due: call Bob", "Reminder: call Bob"))
    for msg in (a, b, c):
        inbox.record(msg)
    inbox.done(b)
    torn(inbox)
    died(inbox)
    again = journal().take_pending(held)
    assert [(m.key, m.text, m.sender_id, m.sender_name, m.is_group, m.sender_is_admin, m.ts, m.injected)
            for m in again] == [(a.key, a.text, "7", "Ann", True, True, 1.5, None),
                                (c.key, c.text, "tusk", "", False, False, c.ts, c.injected)]


def test_replayed_messages_are_journaled_once_and_settle(journal, held):
    """After a replay the journal holds just the pending messages; publishing them again adds no second copy."""
    crashed = journal()
    crashed.record(InboundMessage(ChatKey("telegram", "1"), "lost in a crash", "7"))
    died(crashed)
    inbox = journal()
    [msg] = inbox.take_pending(held)
    inbox.record(msg)  # what the bus does when the app publishes it again
    assert rows(inbox) == 1
    inbox.done(msg)
    assert rows(inbox) == (0 if journal.kind == "postgres" else 2)  # the row deleted; the file: its `done` line
    died(inbox)
    assert journal().take_pending(held) == []


def test_the_open_turns_of_a_live_tusk_on_the_same_database_are_never_taken(journal, held):
    """Two Tusks on one database: the rows of the one that lives stay its own, those of one that died are taken,
    once (a third Tusk starting after finds nothing left)."""
    if journal.kind == "files":
        pytest.skip("one Tusk per home on files: the home's lock decides (the test below)")
    alive, dead = journal(), journal()
    alive.record(InboundMessage(ChatKey("telegram", "1"), "being answered elsewhere", "7"))
    dead.record(InboundMessage(ChatKey("telegram", "2"), "cut short", "8"))
    died(dead)
    assert [m.text for m in journal().take_pending(held)] == ["cut short"]
    assert journal().take_pending(held) == []
    assert rows(alive) == 2  # the live one's row, and the taken one (now the taker's)


def test_open_turns_are_taken_only_under_the_homes_lock(tmp_path):
    """take_pending refuses a claim of another home, and a claim already released: only the one Tusk holding
    this home may take the journal's open turns (another live Tusk's turns are never a crash's leftovers)."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    Inbox(home / "inbox.jsonl").record(InboundMessage(ChatKey("telegram", "1"), "open elsewhere", "7"))
    other = running.claim(elsewhere, "tusk run")
    with pytest.raises(PermissionError):
        Inbox(home / "inbox.jsonl").take_pending(other)
    other.release()
    mine = running.claim(home, "tusk run")
    mine.release()
    with pytest.raises(PermissionError):
        Inbox(home / "inbox.jsonl").take_pending(mine)
    assert "open elsewhere" in (home / "inbox.jsonl").read_text()  # untouched
    mine = running.claim(home, "tusk run")
    try:
        assert [m.text for m in Inbox(home / "inbox.jsonl").take_pending(mine)] == ["open elsewhere"]
    finally:
        mine.release()


def test_a_tusk_takes_only_the_turns_of_its_channels(journal, held):
    """A Tusk serving only the terminal (a `tusk chat` alone after a crash) replays the terminal's open turn and
    leaves the Telegram one, untouched by its own compaction, for the next Tusk that serves Telegram."""
    crashed = journal()
    crashed.record(InboundMessage(ChatKey("telegram", "42"), "for telegram", "7"))
    crashed.record(InboundMessage(ChatKey("terminal", "local"), "[reminder r1] stretch", "tusk",
                                  injected=Injected("reminder", "A reminder is due: stretch", "Reminder: stretch")))
    died(crashed)
    chat = journal(compact_at=1)
    [replayed] = chat.take_pending(held, {"terminal"})
    assert replayed.text == "[reminder r1] stretch"
    chat.record(replayed)
    chat.done(replayed)  # every open turn of this run ended, and the file is over its size: no compaction
    died(chat)
    assert [m.text for m in journal().take_pending(held, {"telegram", "terminal"})] == ["for telegram"]


def test_a_claim_let_go_takes_nothing_from_the_database(shared_db, tmp_path):
    """The database's journal, too, is taken only by a Tusk that holds its home's lock (a released claim is refused)."""
    mine = running.claim(tmp_path, "tusk run")
    mine.release()
    with pytest.raises(PermissionError):
        PgInbox(shared_db).take_pending(mine)


def test_file_is_emptied_when_idle_and_large(tmp_path):
    """Once no journaled turn is open and the file passed its size limit, it is emptied."""
    inbox = Inbox(tmp_path / "inbox.jsonl", compact_at=200)
    msgs = [InboundMessage(ChatKey("telegram", "1"), "x" * 50, "7") for _ in range(3)]
    for msg in msgs:
        inbox.record(msg)
    for msg in msgs[:2]:
        inbox.done(msg)
    assert (tmp_path / "inbox.jsonl").stat().st_size > 200  # one turn still open: kept
    inbox.done(msgs[2])
    assert (tmp_path / "inbox.jsonl").stat().st_size == 0


async def start_tusk(env):
    proc = await procs.start_tusk("run", env=env,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert "running on telegram" in (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
    return proc


@pytest.fixture(params=["files", "postgres"])
def where(request):
    """The environment that puts a Tusk's keeping on one backend: {} (files under TUSK_HOME), or a fresh database."""
    return {} if request.param == "files" else {"TUSK_DATABASE_URL": request.getfixturevalue("pg_url")}


async def user_texts(home, where, channel, chat_id):
    """The user messages a chat keeps, read through the store the environment `where` names."""
    from store import opened

    async with opened(home, where.get("TUSK_DATABASE_URL")) as store:
        kept = await store.chats.handle(ChatKey(channel, chat_id)).messages()
    return [m.content for m in kept if m.role == "user"]


async def test_a_turn_cut_short_by_a_crash_is_answered_after_restart(fake_llm, tmp_path, where):
    """SIGKILL while the model answers a Telegram message: after a restart it is answered, once; an answered one is not."""
    async with FakeTelegram() as tg:
        env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TELEGRAM_BOT_TOKEN=tg.token,
                      TELEGRAM_API_BASE=tg.base_url, TELEGRAM_ALLOW_FROM="7", **where)
        proc = await start_tusk(env)
        tg.push_message(42, "answered before the crash")
        await tg.wait_for(lambda: tg.sent, timeout=procs.FIRST_TURN)
        fake_llm.script(Reply(text="never sent", delay=30))
        tg.push_message(42, "cut short by the crash")
        await fake_llm.wait_for_requests(2, timeout=20)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        fake_llm.responder = lambda body: Reply(text="answered after the restart")
        proc = await start_tusk(env)
        await tg.wait_for(lambda: len(tg.sent) == 2, timeout=procs.FIRST_TURN)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    assert [m["plain"] for m in tg.sent][1] == "answered after the restart" and len(fake_llm.requests) == 3
    assert await user_texts(tmp_path / "data", where, "telegram", "42") == ["answered before the crash",
                                                                           "cut short by the crash"]
    if where:  # nothing lingers: every turn ended, so the database's journal is empty
        assert await journal_rows(where["TUSK_DATABASE_URL"]) == []


async def journal_rows(url):
    """The chat keys of the database's inbox rows."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        return await (await conn.execute("SELECT channel, chat_id FROM inbox ORDER BY id")).fetchall()


async def test_tusk_forget_also_removes_messages_waiting_for_a_replay(tmp_path, where):
    """`tusk forget` lists and deletes the chat's journaled messages, so a restart cannot bring them back."""
    from bot import stores
    from bot.ops import admin
    from store import opened

    home = tmp_path / "data"
    home.mkdir()
    url = where.get("TUSK_DATABASE_URL")
    async with opened(home, url) as store:
        await store.chats.append(await store.chats.open(ChatKey("telegram", "42")), [Message("user", "earlier")])
        crashed = stores.inbox(store)
        crashed.record(InboundMessage(ChatKey("telegram", "42"), "my secret", "7"))
        crashed.record(InboundMessage(ChatKey("telegram", "43"), "not mine", "8"))
        died(crashed)
        report = await admin.forget(store.chats, home, ChatKey("telegram", "42"), confirm=True, store=store)
        where_said = "the database's inbox" if url else "inbox.jsonl"
        assert f"deleted 1 message waiting to be answered after a crash ({where_said})" in report
        held, after = running.claim(home, "tusk run"), stores.inbox(store)
        try:
            assert [m.text for m in after.take_pending(held)] == ["not mine"]
        finally:
            held.release()
            died(after)


async def test_forget_in_a_running_bot_leaves_no_line_of_the_chat_in_the_inbox(make_settings, fake_llm, where):
    """/forget confirm removes every journal record of the chat (answered ones and itself), reports it, and
    keeps the other chats' records."""
    from tests.test_telegram import texts

    async with FakeTelegram() as tg:
        app = TuskApp(make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url, **where))
        app.add_platforms()
        where_said = "the database's inbox" if where else "inbox.jsonl"
        async with app:
            tg.push_message(42, "my secret plan", user_id=7)
            tg.push_message(43, "someone else", user_id=8)
            await tg.wait_for(lambda: len(tg.sent) == 2)
            tg.push_message(42, "/forget", user_id=7)
            await tg.wait_for(lambda: len(texts(tg, 42)) == 2)
            if not where:  # the file keeps answered lines until it is emptied; the database deletes a row when done
                assert f" messages in the inbox journal ({where_said})" in texts(tg, 42)[1]
            else:  # a row lives while its turn runs; the /forget's own is not listed as something kept
                assert "inbox journal" not in texts(tg, 42)[1]
            tg.push_message(42, "/forget confirm", user_id=7)
            await tg.wait_for(lambda: len(texts(tg, 42)) == 3)
            if not where:
                assert f"deleted 3 messages in the inbox journal ({where_said})" in texts(tg, 42)[2]
            else:
                assert "inbox journal" not in texts(tg, 42)[2] and "Forgotten" in texts(tg, 42)[2]
            await drained(app, ChatKey("telegram", "42"))  # the /forget turn has ended: its own line settled
            if where:
                assert await journal_rows(where["TUSK_DATABASE_URL"]) == []
                tg.push_message(43, "still here", user_id=8)
                await tg.wait_for(lambda: len(texts(tg, 43)) == 2)
                return
            lines = [json.loads(line) for line in (app.settings.home / "inbox.jsonl").read_text().splitlines()]
            ids = {rec["id"] for rec in lines if "id" in rec}
            assert lines and all(rec.get("key", ["telegram", "43"]) == ["telegram", "43"] for rec in lines)
            assert all(rec["done"] in ids for rec in lines if "done" in rec)  # no stray line of the forgotten turns
            tg.push_message(43, "still here", user_id=8)
            await tg.wait_for(lambda: len(texts(tg, 43)) == 2)
