"""Pairing: strangers get a code, the owner approves it, allow-lists take ids only; on the Telegram fake."""

import asyncio
import json
import re
import signal
import stat
import time

import pytest

from bot.config import load_settings
from bot.errors import ConfigError
from bot.events import ChatKey
from bot.access.pairing import PairingStore
from tests import procs
from tests.test_cli import env_for, tusk
from tests.settle import answered, drained
from tests.test_telegram import start_tusk, texts, tg  # noqa: F401  (fixtures)

CODE = re.compile(r"approve ([A-Z0-9]{8})\b")


def codes(tg, chat_id=None):
    return [m[1] for m in (CODE.search(s["plain"]) for s in tg.sent if chat_id in (None, s["chat_id"])) if m]


async def test_stranger_is_paired_through_the_cli_of_another_process(tg, fake_llm, tmp_path):  # noqa: F811
    """Unknown user -> one code, no LLM call, nothing saved -> `tusk pairing approve` in another process -> answered."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url)
    proc = await procs.start_tusk("run", env=env, cwd=tmp_path,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert "running on telegram" in (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        tg.push_message(42, "hello, who are you?", user_id=42, username="stranger")
        tg.push_message(42, "hello??", user_id=42, username="stranger")
        tg.push_message(43, "me too", user_id=43, username="other")  # its code comes once 42's two are handled
        await tg.wait_for(lambda: codes(tg, 43), timeout=20)
        assert len(texts(tg, 42)) == 1 and len(codes(tg, 42)) == 1  # the second message: same code, not told again
        assert fake_llm.requests == [] and not (tmp_path / "data" / "chats").exists()
        code = codes(tg, 42)[0]
        listed = await tusk("pairing", "list", env=env)
        assert listed[0] == 0 and code in listed[1] and "telegram:42 user" in listed[1]
        approved = await tusk("pairing", "approve", code.lower(), env=env)
        assert approved[0] == 0 and "Approved telegram:42" in approved[1]
        tg.push_message(42, "and now?", user_id=42, username="stranger")
        await tg.wait_for(lambda: answered(tg, "and now?"), timeout=20)
        assert len(texts(tg, 42)) == 2 and len(fake_llm.requests) == 1
        assert fake_llm.requests[0]["messages"][-1]["content"].endswith("and now?")  # the early ones never went
        assert stat.S_IMODE((tmp_path / "data" / "pairing.json").stat().st_mode) == 0o600
        again = await tusk("pairing", "approve", code, env=env)
        assert again[0] == 1 and "no pending request" in again[2]
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), timeout=30)
    assert "hello, who are you" not in (await proc.stderr.read()).decode()


async def test_expired_code_is_refused(start_tusk, tg, fake_llm):  # noqa: F811
    """A code past TUSK_PAIRING_TTL cannot be approved; the stranger's next message gets a new code, not an answer."""
    app = await start_tusk(TUSK_DM_POLICY="pairing", TUSK_PAIRING_TTL="10")  # minutes
    now = [time.time()]
    app.access.pairing.clock = clock = lambda: now[0]  # the time the running bot's codes are made and held by
    tg.push_message(50, "hi", user_id=50)
    await tg.wait_for(lambda: codes(tg))
    first = codes(tg)[0]
    now[0] += 10 * 60 - 1
    assert [r.code for r in PairingStore(app.settings.home).state().live(now[0]).pending] == [first]  # not yet
    now[0] += 2
    with pytest.raises(LookupError, match="expired"):
        PairingStore(app.settings.home, clock=clock).approve(first)
    tg.push_message(50, "hi again", user_id=50)
    await tg.wait_for(lambda: len(codes(tg)) == 2)
    assert codes(tg)[1] != first and fake_llm.requests == []


async def test_a_hundred_strangers_leave_a_bounded_pending_list(start_tusk, tg, fake_llm):  # noqa: F811
    """100 strangers get codes; only the newest TUSK_PAIRING_MAX_PENDING wait; no LLM call, no chat folder."""
    app = await start_tusk(TUSK_DM_POLICY="pairing", TUSK_PAIRING_MAX_PENDING="10")
    for user in range(1000, 1100):
        tg.push_message(user, "let me in", user_id=user)
    await tg.wait_for(lambda: len(tg.sent) == 100, timeout=20)
    pending = json.loads((app.settings.home / "pairing.json").read_text())["pending"]
    assert len(pending) == 10 and {p["id"] for p in pending} == {str(u) for u in range(1090, 1100)}
    assert fake_llm.requests == [] and not (app.settings.home / "chats").exists()
    with pytest.raises(LookupError):  # a dropped request cannot be approved
        PairingStore(app.settings.home).approve(codes(tg, 1000)[0])


async def test_a_group_is_approved_as_a_whole(start_tusk, tg, fake_llm):  # noqa: F811
    """A message for the bot in an unknown group gets a group code; once approved, any member there is answered."""
    app = await start_tusk(TUSK_DM_POLICY="pairing")
    tg.push_message(-100, "just talking", chat_type="supergroup", user_id=8)
    tg.push_message(-100, "@tusk_bot hello", chat_type="supergroup", user_id=8)
    await tg.wait_for(lambda: codes(tg))
    assert "this group" in tg.sent[0]["plain"] and fake_llm.requests == []
    approval = PairingStore(app.settings.home).approve(codes(tg)[0])
    assert (approval.kind, approval.id) == ("group", "-100")
    tg.push_message(-100, "@tusk_bot hello again", chat_type="supergroup", user_id=9)
    await tg.wait_for(lambda: len(tg.sent) == 2)
    assert tg.sent[1]["plain"].startswith("echo: ")
    tg.push_message(9, "and in private?", user_id=9)  # the group's approval does not reach the member's DM
    await tg.wait_for(lambda: len(tg.sent) == 3)
    assert codes(tg, 9) and len(fake_llm.requests) == 1


async def test_revoke_takes_an_approval_back(start_tusk, tg, fake_llm):  # noqa: F811
    """After `revoke`, the running bot treats the user as a stranger again (it re-reads the changed file)."""
    app = await start_tusk(TUSK_DM_POLICY="pairing")
    tg.push_message(60, "hi", user_id=60)
    await tg.wait_for(lambda: codes(tg))
    store = PairingStore(app.settings.home)
    store.approve(codes(tg)[0])
    tg.push_message(60, "in?", user_id=60)
    await tg.wait_for(lambda: len(tg.sent) == 2)
    assert [a.id for a in store.revoke("telegram:60")] == ["60"]
    tg.push_message(60, "still in?", user_id=60)
    await tg.wait_for(lambda: len(tg.sent) == 3)
    assert codes(tg, 60)[-1] != codes(tg, 60)[0] and len(fake_llm.requests) == 1


async def test_allowlist_policy_ignores_strangers_silently(start_tusk, tg, fake_llm):  # noqa: F811
    """TUSK_DM_POLICY=allowlist: a stranger gets no code, no reply, and no pairing request is stored."""
    app = await start_tusk(TUSK_DM_POLICY="allowlist", TELEGRAM_ALLOW_FROM="8")
    tg.push_message(70, "hi", user_id=70)
    tg.push_message(7, "hi", user_id=7)
    tg.push_message(8, "the owner", user_id=8)  # answered once the two before it are handled
    await tg.wait_for(lambda: answered(tg, "the owner"))
    await drained(app, ChatKey("telegram", "70"), ChatKey("telegram", "7"))  # a turn either started has ended
    assert [m["chat_id"] for m in tg.sent] == [8] and len(fake_llm.requests) == 1
    assert not (app.settings.home / "pairing.json").exists()


@pytest.mark.parametrize("variable,value", [("TELEGRAM_ALLOW_FROM", "7, @bob"), ("TELEGRAM_ALLOW_FROM", "bob"),
                                            ("DISCORD_ALLOW_FROM", "alice#1234"), ("SLACK_ALLOW_FROM", "@ann")])
def test_usernames_in_allow_lists_stop_tusk_at_start(make_settings, variable, value):
    """A username in an allow-list (changeable, reclaimable) is refused at start, naming it and how to find the id."""
    with pytest.raises(ConfigError, match=rf"{variable} contains .* not an id: usernames can be changed"):
        make_settings(**{variable: value})


def test_ids_in_allow_lists_load(make_settings):
    """User and group ids of every platform are accepted as they are."""
    s = make_settings(TELEGRAM_ALLOW_FROM="7,-1001234", DISCORD_ALLOW_FROM="80351110224678912",
                      SLACK_ALLOW_FROM="U0ANN,C0TEAM")
    assert s.telegram_allow_from == ("7", "-1001234") and s.slack_allow_from == ("U0ANN", "C0TEAM")


def test_unreadable_pairing_file_is_never_overwritten(tmp_path):
    """A corrupt pairing.json admits no one and issues no code, and stays as it was for the owner to fix."""
    (tmp_path / "pairing.json").write_text("{not json")
    store = PairingStore(tmp_path)
    assert not store.approved("telegram", "user", "7")
    with pytest.raises(Exception, match="not valid pairing data"):
        store.request("telegram", "user", "7")
    assert (tmp_path / "pairing.json").read_text() == "{not json"


def test_default_policy_is_pairing(make_settings):
    """Without TUSK_DM_POLICY, strangers are paired, and an empty allow-list is no longer reported as open."""
    s = load_settings(TUSK_MODEL="openai/x", TELEGRAM_BOT_TOKEN="1:X", TUSK_HOME=str(make_settings().home))
    assert s.dm_policy == "pairing" and s.open_allow_lists() == []


async def test_console_lists_approves_and_revokes(tusk):
    """The HTTP API's pairing routes list requests, approve a code (JSON only), refuse unknown ones and revoke."""
    request, new = tusk.access.pairing.request("telegram", "user", "42", "Ann")
    assert new
    async with tusk.client.get(f"{tusk.url}/api/pairing") as resp:
        assert [r["code"] for r in (await resp.json())["pending"]] == [request.code]
    async with tusk.client.post(f"{tusk.url}/api/pairing/approve", data=request.code) as resp:
        assert resp.status == 415
    async with tusk.client.post(f"{tusk.url}/api/pairing/approve", json={"code": "NOPE2345"}) as resp:
        assert resp.status == 404 and "no pending request" in (await resp.json())["error"]
    async with tusk.client.post(f"{tusk.url}/api/pairing/approve", json={"code": request.code}) as resp:
        assert resp.status == 200 and (await resp.json())["approved"]["id"] == "42"
    assert tusk.access.pairing.approved("telegram", "user", "42")
    async with tusk.client.post(f"{tusk.url}/api/pairing/revoke", json={"target": "telegram:42"}) as resp:
        assert resp.status == 200 and not tusk.access.pairing.approved("telegram", "user", "42")
