"""The inbox journal: a platform message whose turn a crash cut short is run again at the next start."""

import asyncio
import json
import signal

import pytest

from bot import running
from bot.app import TuskApp
from bot.events import ChatKey, InboundMessage, Injected
from bot.inbox import Inbox
from tests import procs
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.test_cli import env_for


@pytest.fixture
def held(tmp_path):
    """The home (tmp_path) held as a running Tusk holds it: what take_pending asks for."""
    claim = running.claim(tmp_path, "tusk run")
    yield claim
    claim.release()


def test_pending_are_the_messages_without_done(tmp_path, held):
    """Recorded and not done comes back (fields and injected context intact); done or torn lines do not."""
    inbox = Inbox(tmp_path / "inbox.jsonl")
    a = InboundMessage(ChatKey("telegram", "-5.3"), "first", "7", "Ann", is_group=True, sender_is_admin=True, ts=1.5)
    b = InboundMessage(ChatKey("slack", "D1"), "second", "U1")
    c = InboundMessage(ChatKey("discord", "9"), "[reminder r1] call Bob", "tusk",
                       injected=Injected("reminder", "A reminder is due: call Bob", "Reminder: call Bob"))
    for msg in (a, b, c):
        inbox.record(msg)
    inbox.done(b)
    with open(tmp_path / "inbox.jsonl", "a") as fh:
        fh.write('{"id": "torn", "key": ["tel')
    again = Inbox(tmp_path / "inbox.jsonl").take_pending(held)
    assert [(m.key, m.text, m.sender_id, m.sender_name, m.is_group, m.sender_is_admin, m.ts, m.injected)
            for m in again] == [(a.key, a.text, "7", "Ann", True, True, 1.5, None),
                                (c.key, c.text, "tusk", "", False, False, c.ts, c.injected)]


def test_replayed_messages_are_journaled_once_and_settle(tmp_path, held):
    """After a replay the file holds just the pending messages; publishing them again adds no second copy."""
    path = tmp_path / "inbox.jsonl"
    Inbox(path).record(InboundMessage(ChatKey("telegram", "1"), "lost in a crash", "7"))
    inbox = Inbox(path)
    [msg] = inbox.take_pending(held)
    inbox.record(msg)  # what the bus does when the app publishes it again
    assert len(path.read_text().splitlines()) == 1
    inbox.done(msg)
    assert Inbox(path).take_pending(held) == []


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


def test_a_tusk_takes_only_the_turns_of_its_channels(tmp_path, held):
    """A Tusk serving only the terminal (a `tusk chat` alone after a crash) replays the terminal's open turn and
    leaves the Telegram one in the file, untouched by its own compaction, for the next Tusk that serves Telegram."""
    path = tmp_path / "inbox.jsonl"
    crashed = Inbox(path)
    crashed.record(InboundMessage(ChatKey("telegram", "42"), "for telegram", "7"))
    crashed.record(InboundMessage(ChatKey("terminal", "local"), "[reminder r1] stretch", "tusk",
                                  injected=Injected("reminder", "A reminder is due: stretch", "Reminder: stretch")))
    chat = Inbox(path, compact_at=1)
    [replayed] = chat.take_pending(held, {"terminal"})
    assert replayed.text == "[reminder r1] stretch"
    chat.record(replayed)
    chat.done(replayed)  # every open turn of this run ended, and the file is over its size: no compaction
    assert [m.text for m in Inbox(path).take_pending(held, {"telegram", "terminal"})] == ["for telegram"]


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


async def test_a_turn_cut_short_by_a_crash_is_answered_after_restart(fake_llm, tmp_path):
    """SIGKILL while the model answers a Telegram message: after a restart it is answered, once; an answered one is not."""
    async with FakeTelegram() as tg:
        env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TELEGRAM_BOT_TOKEN=tg.token,
                      TELEGRAM_API_BASE=tg.base_url, TELEGRAM_ALLOW_FROM="7")
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
    lines = (tmp_path / "data/chats/telegram/42/session.jsonl").read_text().splitlines()
    users = [json.loads(line)["content"] for line in lines if '"role":"user"' in line]
    assert users == ["answered before the crash", "cut short by the crash"]


async def test_tusk_forget_also_removes_messages_waiting_for_a_replay(tmp_path):
    """`tusk forget` lists and deletes the chat's journaled messages, so a restart cannot bring them back."""
    from bot.ops import admin
    from store.files.chats import FileChats

    home = tmp_path / "data"
    (home / "chats/telegram/42").mkdir(parents=True)
    Inbox(home / "inbox.jsonl").record(InboundMessage(ChatKey("telegram", "42"), "my secret", "7"))
    Inbox(home / "inbox.jsonl").record(InboundMessage(ChatKey("telegram", "43"), "not mine", "8"))
    report = await admin.forget(FileChats(home), home, ChatKey("telegram", "42"), confirm=True)
    assert "deleted 1 message waiting to be answered after a crash (inbox.jsonl)" in report
    held = running.claim(home, "tusk run")
    try:
        assert [m.text for m in Inbox(home / "inbox.jsonl").take_pending(held)] == ["not mine"]
    finally:
        held.release()


async def test_forget_in_a_running_bot_leaves_no_line_of_the_chat_in_the_inbox(make_settings, fake_llm):
    """/forget confirm removes every inbox.jsonl line of the chat (answered ones and itself), reports it, and
    keeps the other chats' lines."""
    from tests.test_telegram import texts

    async with FakeTelegram() as tg:
        app = TuskApp(make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url))
        app.add_platforms()
        async with app:
            tg.push_message(42, "my secret plan", user_id=7)
            tg.push_message(43, "someone else", user_id=8)
            await tg.wait_for(lambda: len(tg.sent) == 2)
            tg.push_message(42, "/forget", user_id=7)
            await tg.wait_for(lambda: len(texts(tg, 42)) == 2)
            assert " messages in the inbox journal (inbox.jsonl)" in texts(tg, 42)[1]
            tg.push_message(42, "/forget confirm", user_id=7)
            await tg.wait_for(lambda: len(texts(tg, 42)) == 3)
            assert "deleted 3 messages in the inbox journal (inbox.jsonl)" in texts(tg, 42)[2]
            await asyncio.sleep(0.1)
            lines = [json.loads(line) for line in (app.settings.home / "inbox.jsonl").read_text().splitlines()]
            ids = {rec["id"] for rec in lines if "id" in rec}
            assert lines and all(rec.get("key", ["telegram", "43"]) == ["telegram", "43"] for rec in lines)
            assert all(rec["done"] in ids for rec in lines if "done" in rec)  # no stray line of the forgotten turns
            tg.push_message(43, "still here", user_id=8)
            await tg.wait_for(lambda: len(texts(tg, 43)) == 2)
