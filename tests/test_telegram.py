"""Telegram through real python-telegram-bot against a fake Bot API on 127.0.0.1."""

import asyncio
import json
import logging
import signal
import socket
import time

import aiohttp
import pytest
from telegram import Message, Update, User

from bot.app import TuskApp
from bot.events import ChatKey
from channels.telegram import target, to_inbound
from tests import procs
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.media_files import audio_bytes, image_bytes
from tests.own_words import ANSWERS, PERSONA, WHY, seed
from tests.settle import answered, drained
from tests.test_cli import env_for
from tests import kept

ME = User(id=123, first_name="Tusk", is_bot=True, username="tusk_bot")
COMMANDS = frozenset({"help", "memory", "forget", "new", "status"})


@pytest.fixture
async def tg():
    async with FakeTelegram(token="123:ABC", username="tusk_bot") as fake:
        yield fake


@pytest.fixture
async def start_tusk(make_settings, tg):
    """Start Tusk with the Telegram channel pointed at the fake (extra env as keyword arguments); stopped after."""
    apps = []

    async def start(**env):
        app = TuskApp(make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url, **env))
        app.add_http()
        assert [c.name for c in app.add_platforms()] == ["telegram"]
        await app.__aenter__()
        apps.append(app)
        return app

    yield start
    for app in apps:
        await app.__aexit__(None, None, None)


@pytest.fixture
async def tusk_tg(start_tusk):
    return await start_tusk()


def texts(tg, chat_id):
    return [m["plain"] for m in tg.sent if m["chat_id"] == chat_id]


async def test_dm_turn_end_to_end(tusk_tg, tg, fake_llm):
    """A DM is answered with the model's reply (as HTML), shows "typing", and is saved under its chat id."""
    fake_llm.script(Reply(text="Hello **Alice**!", delay=0.2))
    tg.push_message(42, "hi there", user_id=7, username="alice")
    await tg.wait_for(lambda: tg.sent)
    assert tg.sent[0]["text"] == "Hello <b>Alice</b>!" and tg.sent[0]["parse_mode"] == "HTML"
    assert ("sendChatAction", {"chat_id": 42, "action": "typing"}) in [(m, {k: p.get(k) for k in ("chat_id", "action")})
                                                                       for m, p in tg.calls]
    saved = kept.on_disk(tusk_tg, "telegram", "42").unconsolidated
    assert [(m.role, m.content) for m in saved] == [("user", "hi there"), ("assistant", "Hello **Alice**!")]
    assert "telegram direct chat; from Alice (id 7)" in fake_llm.requests[0]["messages"][-1]["content"]


async def test_tusks_own_words_are_shown_as_written(tusk_tg, tg, fake_llm):
    """Command answers go as plain text (no parse mode, nothing read as markup): the user sees facts 3 and 5, not
    3 and 4, each source line under its fact, `*strong*` with its asterisks and the `<...>` placeholder; the
    model's reply after them is still formatted."""
    seed(kept.files(tusk_tg, "telegram", "42"))
    fake_llm.script(Reply(text="**Green** tea, *strong*"))
    for n, text in enumerate((WHY, PERSONA, "which tea?"), 1):
        tg.push_message(42, text)
        await tg.wait_for(lambda: len(tg.sent) == n)
    assert texts(tg, 42) == [*ANSWERS, "Green tea, strong"] and len(fake_llm.requests) == 1
    assert [m.get("parse_mode") for m in tg.sent] == [None, None, "HTML"]


async def test_commands_menu_registered_at_start(tusk_tg, tg):
    """/memory, /forget, /new, /status and /help are in Telegram's command menu once Tusk has started."""
    assert {c["command"] for c in tg.commands} >= COMMANDS
    assert all(c["description"] for c in tg.commands)


async def test_start_is_answered_with_help(tusk_tg, tg, fake_llm):
    """/start (sent when someone first opens the bot) lists the commands without calling the model."""
    tg.push_message(42, "/start")
    await tg.wait_for(lambda: tg.sent)
    assert "/forget" in tg.sent[0]["plain"] and fake_llm.requests == []


async def test_group_messages_need_a_mention_reply_or_command(tusk_tg, tg, fake_llm):
    """In a group only mentions, replies to the bot and commands for it are answered; the rest never reach the LLM."""
    tg.push_message(-100, "just chatting among ourselves", chat_type="supergroup")
    tg.push_message(-100, "/status@other_bot", chat_type="supergroup")
    tg.push_message(-100, "@tusk_bot what is 2+2?", chat_type="supergroup")
    await tg.wait_for(lambda: len(tg.sent) == 1)
    assert fake_llm.requests[0]["messages"][-1]["content"].endswith("\n\nwhat is 2+2?")
    assert tg.sent[0]["reply_parameters"]["message_id"] == 3  # quotes the question in a group
    tg.push_message(-100, "and 3+3?", chat_type="supergroup", reply_to_bot=True)
    await tg.wait_for(lambda: len(tg.sent) == 2)
    tg.push_message(-100, "/status@tusk_bot", chat_type="supergroup")
    await tg.wait_for(lambda: any("Model:" in m["plain"] for m in tg.sent))
    await drained(tusk_tg, ChatKey("telegram", "-100"))  # anything /status started has ended
    assert len(fake_llm.requests) == 2 and [m["method"] for m in tg.sent].count("sendMessage") == 3


async def test_forget_in_a_group_is_for_admins_only(tusk_tg, tg, fake_llm):
    """A member's /forget confirm in a group is refused; an administrator's deletes the chat's files."""
    tg.push_message(-200, "@tusk_bot remember this", chat_type="group", user_id=7)
    await tg.wait_for(lambda: len(tg.sent) == 1)
    tg.push_message(-200, "/forget@tusk_bot confirm", chat_type="group", user_id=7)
    await tg.wait_for(lambda: len(tg.sent) == 2)
    assert "only its administrators" in tg.sent[1]["plain"]
    assert kept.files(tusk_tg, "telegram", "-200").session.exists()
    tg.members[(-200, 8)] = "administrator"
    tg.push_message(-200, "/forget@tusk_bot confirm", chat_type="group", user_id=8, username="boss")
    await tg.wait_for(lambda: len(tg.sent) == 3)
    assert "deleted" in tg.sent[2]["plain"]
    assert not kept.files(tusk_tg, "telegram", "-200").dir.exists()


async def test_long_reply_is_split_within_telegram_limit(tusk_tg, tg, fake_llm):
    """A 20,000-character reply arrives as pieces of at most 4,096 characters that reassemble to the text."""
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 20 for i in range(40)]
    text = "\n\n".join(paragraphs)[:20_000].strip()
    fake_llm.script(Reply(text=text))
    tg.push_message(42, "tell me everything")
    await tg.wait_for(lambda: sum(len(t) for t in texts(tg, 42)) >= 19_900)
    pieces = texts(tg, 42)
    assert len(pieces) >= 5 and all(len(p) <= 4096 for p in pieces)
    assert " ".join(" ".join(pieces).split()) == " ".join(text.split())
    assert all(p.startswith("Paragraph") for p in pieces)  # cut at paragraph boundaries


async def test_entity_error_falls_back_to_plain_text(tusk_tg, tg, fake_llm):
    """If Telegram rejects the HTML entities, the same piece is resent as plain text."""
    fake_llm.script(Reply(text="**bold** claim"))
    tg.fail_next("sendMessage", status=400, description="Bad Request: can't parse entities: unexpected end tag")
    tg.push_message(42, "go")
    await tg.wait_for(lambda: tg.sent)
    assert tg.sent[0]["text"] == "**bold** claim" and tg.sent[0].get("parse_mode") is None


async def test_rate_limit_waits_retry_after_and_retries(tusk_tg, tg, fake_llm):
    """A 429 with retry_after is waited out and the reply is delivered."""
    tg.fail_next("sendMessage", status=429, retry_after=1)
    start = time.monotonic()
    tg.push_message(42, "hello")
    await tg.wait_for(lambda: tg.sent, timeout=10)
    assert time.monotonic() - start >= 1.0 and tg.sent[0]["plain"].startswith("echo: ")
    assert [m for m, _ in tg.calls].count("sendMessage") == 2


async def test_network_error_is_retried(tusk_tg, tg, fake_llm):
    """A 502 from the Bot API (a network error to PTB) is retried with backoff."""
    tg.fail_next("sendMessage", status=502, description="Bad Gateway")
    tg.push_message(42, "hello")
    await tg.wait_for(lambda: tg.sent, timeout=10)
    assert tg.sent[0]["plain"].startswith("echo: ")


async def test_undeliverable_reply_is_logged_and_kept(tusk_tg, tg, fake_llm, caplog):
    """A reply Telegram refuses for good is logged with the chat key; the session still holds it."""
    tg.fail_next("sendMessage", status=403, description="Forbidden: bot was blocked by the user")
    with caplog.at_level(logging.ERROR):
        tg.push_message(42, "hello")
        await tg.wait_for(lambda: any("could not deliver" in r.getMessage() for r in caplog.records))
    record = next(r for r in caplog.records if "could not deliver" in r.getMessage())
    assert "telegram:42" in record.getMessage() and "blocked" in record.exc_text
    assert [m.role for m in kept.on_disk(tusk_tg, "telegram", "42").unconsolidated] == ["user", "assistant"]


async def test_allow_list_by_id(start_tusk, tg, fake_llm):
    """With TUSK_DM_POLICY=allowlist, users outside TELEGRAM_ALLOW_FROM cost nothing and get no answer."""
    app = await start_tusk(TELEGRAM_ALLOW_FROM="7, 51", TUSK_DM_POLICY="allowlist")
    tg.push_message(50, "let me in", user_id=50, username="mallory")
    tg.push_message(51, "hi", user_id=51, username="bob")
    tg.push_message(7, "hi", user_id=7, username=None)
    await tg.wait_for(lambda: len(tg.sent) == 2)  # 7's answered: mallory's message, before it, has been handled
    await drained(app, ChatKey("telegram", "50"))  # and a turn it started would have ended
    assert {m["chat_id"] for m in tg.sent} == {51, 7} and len(fake_llm.requests) == 2
    assert not (app.settings.home / "chats" / "telegram" / "50").exists()


async def test_media_edits_and_bots(tusk_tg, tg, fake_llm):
    """A sticker reaches the model as its emoji; edits and other bots are ignored."""
    tg.push_message(42, None, sticker=True)
    await tg.wait_for(lambda: len(tg.sent) == 1)
    assert fake_llm.requests[0]["messages"][-1]["content"].endswith("[sticker \N{SLIGHTLY SMILING FACE}]")
    tg.push_message(42, "hi", edited=True)
    tg.push_message(42, "I am a bot", is_bot=True, user_id=99)
    tg.push_message(42, "still there?")
    await tg.wait_for(lambda: answered(tg, "still there?"))  # the chat's turns run in order: the two came first
    assert len(tg.sent) == 2 and len(fake_llm.requests) == 2
    assert fake_llm.requests[1]["messages"][-1]["content"].endswith("\n\nstill there?")


async def test_voice_and_photo_reach_the_model(start_tusk, tg, fake_llm):
    """A voice note's transcript is the turn; a photo reaches a vision model once, later turns see its placeholder."""
    app = await start_tusk(TUSK_TRANSCRIBE_MODEL="openai/whisper-1", TUSK_VISION="true")
    tg.push_message(42, None, voice=audio_bytes(3))
    await tg.wait_for(lambda: len(tg.sent) == 1)
    (heard,) = [t["text"] for t in fake_llm.transcriptions]
    assert heard in json.dumps(fake_llm.requests[-1]["messages"][-1])
    tg.push_message(42, None, photo=image_bytes(800, 600), caption="what is this?")
    await tg.wait_for(lambda: len(tg.sent) == 2)
    photo_turn = json.dumps(fake_llm.requests[-1]["messages"][-1])
    assert "data:image/" in photo_turn and "what is this?" in photo_turn
    tg.push_message(42, "and now?")
    await tg.wait_for(lambda: len(tg.sent) == 3)
    later = json.dumps(fake_llm.requests[-1]["messages"])
    assert "data:image/" not in later and "[photo" in later and heard in later
    saved = (app.settings.home / "chats/telegram/42/session.jsonl").read_text()
    assert "[voice" in saved and "data:image/" not in saved


async def test_forum_topics_have_their_own_memory(tusk_tg, tg, fake_llm):
    """Each forum topic is its own chat, and replies go back into the topic."""
    tg.push_message(-300, "@tusk_bot topic one", chat_type="supergroup", thread_id=11)
    tg.push_message(-300, "@tusk_bot topic two", chat_type="supergroup", thread_id=12)
    await tg.wait_for(lambda: len(tg.sent) == 2)
    assert {m["message_thread_id"] for m in tg.sent} == {11, 12}
    chats = sorted(p.name for p in (tusk_tg.settings.home / "chats" / "telegram").iterdir())
    assert chats == ["-300.11", "-300.12"]


async def test_groups_and_topics_never_see_each_others_memory(tusk_tg, tg, fake_llm):
    """A group's MEMORY.md reaches only that group's prompts, not another group's nor another topic's."""
    for chat_id, canary in (("-400", "canary-group-A"), ("-500.7", "canary-topic-7")):
        files = kept.files(tusk_tg, "telegram", chat_id)
        files.dir.mkdir(parents=True)
        files.memory.write_text(f"- {canary}")
    seen = lambda body: " ".join(c for c in ("canary-group-A", "canary-topic-7") if c in json.dumps(body)) or "none"
    fake_llm.responder = lambda body: Reply(text=seen(body))
    tg.push_message(-400, "@tusk_bot hi", chat_type="supergroup")
    tg.push_message(-600, "@tusk_bot hi", chat_type="supergroup")
    tg.push_message(-500, "@tusk_bot hi", chat_type="supergroup", thread_id=7)
    tg.push_message(-500, "@tusk_bot hi", chat_type="supergroup", thread_id=8)
    await tg.wait_for(lambda: len(tg.sent) == 4)
    replies = {(m["chat_id"], m.get("message_thread_id")): m["plain"] for m in tg.sent}
    assert replies == {(-400, None): "canary-group-A", (-600, None): "none", (-500, 7): "canary-topic-7",
                       (-500, 8): "none"}


async def test_thirty_chats_at_once(tusk_tg, tg, fake_llm):
    """30 chats writing at once to a model that takes 1 s are answered together: far sooner than the 30 s one after
    another would take (the bound leaves room for a loaded 2-core machine)."""
    fake_llm.responder = lambda body: Reply(text="done", delay=1.0)
    start = time.monotonic()
    for i in range(30):
        tg.push_message(1000 + i, f"hi {i}", user_id=1000 + i)
    await tg.wait_for(lambda: len(tg.sent) == 30, timeout=15)
    assert time.monotonic() - start < 10.0
    assert {m["chat_id"] for m in tg.sent} == {1000 + i for i in range(30)}


async def test_webhook_mode(start_tusk, tg, fake_llm):
    """With TELEGRAM_WEBHOOK_URL, Tusk registers the webhook and answers updates posted with the secret."""
    with socket.socket() as probe:  # a free port for the webhook server
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    await start_tusk(TELEGRAM_WEBHOOK_URL="https://bot.example.org/tg/hook", TELEGRAM_WEBHOOK_PORT=port,
                     TELEGRAM_WEBHOOK_SECRET="hook-secret-123")
    assert tg.webhook["url"] == "https://bot.example.org/tg/hook"
    assert tg.webhook["secret_token"] == "hook-secret-123"
    update = tg.push_message(42, "via webhook")  # PTB does not poll in webhook mode: we deliver it
    async with aiohttp.ClientSession() as client:
        url = f"http://127.0.0.1:{port}/tg/hook"
        async with client.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"}) as resp:
            assert resp.status == 403
        async with client.post(url, json=update,
                               headers={"X-Telegram-Bot-Api-Secret-Token": "hook-secret-123"}) as resp:
            assert resp.status == 200
    await tg.wait_for(lambda: tg.sent)
    assert tg.sent[0]["plain"].startswith("echo: ") and len(fake_llm.requests) == 1


async def test_webhook_refuses_big_bodies_before_reading_them(start_tusk, tg, fake_llm):
    """The webhook server answers 400 to a body declared over 256 KiB at once (nothing buffered) and to one sent."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    await start_tusk(TELEGRAM_WEBHOOK_URL="https://bot.example.org/tg/hook", TELEGRAM_WEBHOOK_PORT=port,
                     TELEGRAM_WEBHOOK_SECRET="hook-secret-123")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /tg/hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"X-Telegram-Bot-Api-Secret-Token: hook-secret-123\r\nContent-Length: 100000000\r\n\r\n{")
    assert (await asyncio.wait_for(reader.read(), timeout=5)).startswith(b"HTTP/1.1 400")  # no 100 MB awaited
    writer.close()
    update = tg.push_message(42, "x" * 300_000)
    async with aiohttp.ClientSession() as client:
        try:
            async with client.post(f"http://127.0.0.1:{port}/tg/hook", json=update,
                                   headers={"X-Telegram-Bot-Api-Secret-Token": "hook-secret-123"}) as resp:
                assert resp.status == 400
        except aiohttp.ClientError:
            pass  # or the connection is closed on the sender
        async with client.post(f"http://127.0.0.1:{port}/tg/hook", json=tg.push_message(42, "a small one"),
                               headers={"X-Telegram-Bot-Api-Secret-Token": "hook-secret-123"}) as resp:
            assert resp.status == 200
    await tg.wait_for(lambda: answered(tg, "a small one"))  # the chat's turns run in order: the big one's first
    assert len(fake_llm.requests) == 1 and len(tg.sent) == 1


async def test_shutdown_finishes_the_running_turn(start_tusk, tg, fake_llm):
    """A turn still running when Tusk stops is finished and its reply delivered before the channel closes."""
    app = await start_tusk()
    fake_llm.script(Reply(text="finished late", delay=0.5))
    tg.push_message(42, "slow one")
    await fake_llm.wait_for_requests(1)
    await app.__aexit__(None, None, None)
    assert texts(tg, 42) == ["finished late"]


async def test_tusk_run_serves_telegram(tg, fake_llm, tmp_path):
    """`tusk run` with TELEGRAM_BOT_TOKEN and TUSK_DM_POLICY=open answers a DM, warns about the open allow-list,
    exits 0 on SIGTERM."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url,
                  TUSK_DM_POLICY="open")
    proc = await procs.start_tusk("run", env=env, cwd=tmp_path,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
    assert "running on telegram" in line
    tg.push_message(42, "ping over telegram")
    await tg.wait_for(lambda: tg.sent, timeout=procs.FIRST_TURN)
    assert tg.sent[0]["plain"].startswith("echo: ")
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    err = (await proc.stderr.read()).decode()
    assert "TELEGRAM_ALLOW_FROM is empty" in err and tg.token not in err and "ping over" not in err


async def test_tusk_run_with_telegram_unreachable_says_so(fake_llm, tmp_path):
    """An unreachable Bot API at start is one clear line and exit code 1 (systemd restarts it), not a traceback."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TELEGRAM_BOT_TOKEN="1:X", TELEGRAM_API_BASE="http://127.0.0.1:9")
    proc = await procs.start_tusk("run", env=env,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 1 and "cannot reach the Telegram Bot API" in err.decode()
    assert "Traceback" not in err.decode()


def message(**fields) -> Message:
    base = {"message_id": 5, "date": 1_764_680_000, "chat": {"id": 42, "type": "private"},
            "from": {"id": 7, "is_bot": False, "first_name": "Alice"}}
    return Update.de_json({"update_id": 1, "message": base | fields}, None).message


def test_to_inbound_dm_and_keys():
    """A DM maps to its chat id; a forum topic to '<chat>.<topic>', which `target` reads back."""
    msg = to_inbound(message(text="hello"), ME, COMMANDS)
    assert msg.key == ChatKey("telegram", "42") and msg.text == "hello" and not msg.is_group
    topic = to_inbound(message(text="@tusk_bot hi", chat={"id": -5, "type": "supergroup", "is_forum": True},
                               message_thread_id=9, is_topic_message=True,
                               entities=[{"type": "mention", "offset": 0, "length": 9}]), ME, COMMANDS)
    assert topic.key.chat_id == "-5.9" and topic.text == "hi" and target(topic.key) == (-5, 9)


def test_to_inbound_group_gating():
    """Group messages are turns only when addressed (the rest come marked unaddressed); bare commands only when Tusk's."""
    group = {"id": -1, "type": "group", "title": "g"}

    def cmd(text):
        length = len(text.split()[0])
        return to_inbound(message(text=text, chat=group,
                                  entities=[{"type": "bot_command", "offset": 0, "length": length}]), ME, COMMANDS)

    assert not to_inbound(message(text="hello all", chat=group), ME, COMMANDS).addressed
    assert cmd("/memory undo").text == "/memory undo" and cmd("/memory undo").addressed
    assert not cmd("/weather").addressed and not cmd("/memory@someone_else").addressed
    assert cmd("/weather@tusk_bot").text == "/weather@tusk_bot"
    mentioned = to_inbound(message(text="hey 👋 @TUSK_BOT how are you", chat=group,
                                   entities=[{"type": "mention", "offset": 7, "length": 9}]), ME, COMMANDS)
    assert mentioned.text == "hey 👋  how are you" and mentioned.is_group and not mentioned.sender_is_admin


def test_to_inbound_ignores_bots_and_channels_but_not_anonymous_admins():
    """Bots and channel posts are ignored; an anonymous group admin speaks as the group and is an admin."""
    assert to_inbound(message(text="x", **{"from": {"id": 9, "is_bot": True, "first_name": "B"}}), ME, COMMANDS) is None
    group = {"id": -1, "type": "supergroup", "title": "g"}
    anon = to_inbound(message(text="@tusk_bot hi", chat=group, sender_chat=group,
                              entities=[{"type": "mention", "offset": 0, "length": 9}],
                              **{"from": {"id": 1087968824, "is_bot": True, "first_name": "Group"}}), ME, COMMANDS)
    assert anon is not None and anon.sender_is_admin
