"""`tusk import`: each format into the right chat with dates and speakers, twice = nothing new, hostile refused."""

import json
import os
import signal
import zipfile
from pathlib import Path

import pytest

from memory.keys import ChatKey
from tests import procs
from tests.fakes.fake_llm import attributing_responder
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli
from tests import kept

FIXTURES = Path(__file__).parent / "fixtures" / "imports"


@pytest.fixture(autouse=True)
def summarising(fake_llm):
    """A model that answers consolidation rounds: `--yes` folds what it imports into memory."""
    fake_llm.responder = attributing_responder


def session(home, channel, chat):
    """The chat's messages (not its meta and pointer records)."""
    path = home / "chats" / channel / chat / "session.jsonl"
    return [rec for rec in map(json.loads, path.read_text().splitlines()) if "record" not in rec]


@pytest.fixture
def where(store_backend, request):
    """The environment that puts the imports on one store: {} (files under TUSK_HOME), or a fresh database."""
    return {} if store_backend == "files" else {"TUSK_DATABASE_URL": request.getfixturevalue("pg_url")}


async def stored(home, where, channel=None, chat=None):
    """A chat's messages as the store `where` names keeps them; without a chat, the keys of every chat."""
    from memory.keys import ChatKey
    from store import opened

    async with opened(home, where.get("TUSK_DATABASE_URL")) as store:
        if chat is None:
            return [info.key for info in await store.chats.chats()]
        return await store.chats.handle(ChatKey(channel, chat)).messages()


def progress(home, where, channel, chat) -> int:
    """How far an import has come: the session file's bytes, or (in the database) its messages times 170, about
    a line's bytes."""
    if not where:
        path = home / "chats" / channel / chat / "session.jsonl"
        return path.stat().st_size if path.exists() else 0
    import psycopg

    with psycopg.connect(where["TUSK_DATABASE_URL"]) as conn:
        try:
            row = conn.execute("SELECT total FROM chats WHERE channel = %s AND chat_id = %s",
                               (channel, chat)).fetchone()
        except psycopg.errors.UndefinedTable:  # the import has not brought the schema up yet
            return 0
    return row[0] * 170 if row else 0


async def imported(env, *args):
    code, out, err = await tusk_cli("import", *args, "--yes", env=env)
    assert code == 0, err
    return out


async def test_telegram_one_chat_twice(fake_llm, tmp_path, where):
    """A personal chat lands in telegram:<user id>: dates, senders, entities, forwards, media notes; no service
    messages; a second run adds nothing; without --yes nothing is written. (Read through the store: on the
    database, the kill and the moved chat below run again; this one's four commands would add seconds.)"""
    env = env_for(fake_llm, tmp_path, **where)
    home = tmp_path / "data"
    code, out, err = await tusk_cli("import", str(FIXTURES / "telegram_one.json"), env=env)
    assert code == 0 and "6 messages for telegram:4242" in out and await stored(home, where) == [], err
    assert "Imported 6 messages" in await imported(env, str(FIXTURES / "telegram_one.json"))
    msgs = await stored(home, where, "telegram", "4242")
    assert [m.content for m in msgs] == [
        "I moved to Oslo", "I like green tea a lot", "[forwarded from Bob] [reply to message 2] see this",
        "[photo]", "[voice message]", "[sticker 😀]"]
    assert (msgs[0].ts, msgs[0].sender_id, msgs[0].sender_name) == (1709287260, "4242", "Alice")
    again = await imported(env, str(FIXTURES / "telegram_one.json"))
    assert "6 messages for telegram:4242 (6 already there)" in again and "Nothing to do" in again
    assert len(await stored(home, where, "telegram", "4242")) == 6


async def test_telegram_all_chats_to_bot_api_ids(fake_llm, tmp_path):
    """An all-chats export: a supergroup becomes -100ID, a basic group -ID, each with its speakers."""
    env = env_for(fake_llm, tmp_path)
    home = tmp_path / "data"
    await imported(env, str(FIXTURES / "telegram_all.json"), "--format", "telegram")
    family = session(home, "telegram", "-1001500000001")
    assert [(m["sender"]["name"], m["content"]) for m in family] == [("Mum", "Dinner at 7"), ("Dad", "OK")]
    assert session(home, "telegram", "-777")[0]["content"] == "[poll: Lunch?]"


async def test_discord_and_nanobot(fake_llm, tmp_path):
    """DiscordChatExporter lands in discord:<channel id> (system messages out); nanobot's session keeps roles."""
    env = env_for(fake_llm, tmp_path)
    home = tmp_path / "data"
    for _ in range(2):
        await imported(env, str(FIXTURES / "discord.json"))
        await imported(env, str(FIXTURES / "nanobot"))
    msgs = session(home, "discord", "222333")
    assert [(m["sender"]["name"], m["content"]) for m in msgs] == [
        ("Kim", "[file agenda.png] Meeting on **Friday**"), ("lee", "[reply to message 901] I'll be there")]
    assert msgs[0]["ts"] == 1714550460.123
    nano = session(home, "telegram", "55")
    assert [(m["role"], m["content"]) for m in nano] == [("user", "My dog is called Rex"), ("assistant", "Nice name!")]


async def test_to_chooses_the_chat(fake_llm, tmp_path):
    """--to puts a history into any chat (here a local one)."""
    env = env_for(fake_llm, tmp_path)
    await imported(env, str(FIXTURES / "discord.json"), "--to", "http:team")
    assert len(session(tmp_path / "data", "http", "team")) == 2


async def test_hostile_and_truncated_files_are_refused(fake_llm, tmp_path):
    """Truncated JSON, a JSON bomb (too deep) and a non-export are refused with a message, nothing written."""
    env = env_for(fake_llm, tmp_path)
    text = (FIXTURES / "telegram_one.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) - 40])
    deep = tmp_path / "deep.json"
    deep.write_text('{"name": "x", "type": "personal_chat", "id": 1, "date_unixtime": "1", "messages": [{"id": 1, '
                    '"type": "message", "text": ' + "[" * 5000 + "]" * 5000 + "}]}")
    junk = tmp_path / "junk.zip"
    with zipfile.ZipFile(junk, "w") as z:
        z.writestr("../../evil.json", "[]")
    for path, words in ((cut, "truncated"), (deep, "deeper"), (junk, "not a format")):
        code, _, err = await tusk_cli("import", str(path), "--yes", env=env)
        assert code == 1 and words in err, err
    assert not (tmp_path / "data" / "chats").exists()


@pytest.mark.both_stores
async def test_kill_mid_import_resumes_without_duplicates(fake_llm, tmp_path, where):
    """A large import killed with SIGKILL mid-way, run again: every message exactly once (on either store)."""
    export = tmp_path / "big.json"
    with open(export, "w") as fh:
        fh.write('{"name": "Big", "type": "personal_chat", "id": 9, "messages": [')
        fh.write(",".join(json.dumps({"id": i, "type": "message", "date_unixtime": str(1700000000 + i),
                                      "from": "Al", "from_id": "user9", "text": f"message {i}"})
                          for i in range(6000)))
        fh.write("]}")
    env = env_for(fake_llm, tmp_path, **where)
    home = tmp_path / "data"
    proc = await procs.start_tusk("import", str(export), "--yes", env=env)
    import asyncio

    for _ in range(600):
        if progress(home, where, "telegram", "9") > 100_000:
            break
        await asyncio.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    await proc.wait()
    cut = len(await stored(home, where, "telegram", "9"))
    await imported(env, str(export))
    texts = [m.content for m in await stored(home, where, "telegram", "9")]
    assert 0 < cut < 6000 and len(texts) == len(set(texts)) == 6000


@pytest.mark.both_stores
async def test_tusk_export_moves_a_chat(tusk, fake_llm, tmp_path, where):
    """A `tusk export` archive imported --to another chat: its messages with roles and senders, and its memory;
    what that memory already holds (before the archive's pointer) is not summarised again, the rest is."""
    await tusk.say("old", "I am Dana")
    await tusk.chats.handle(ChatKey("http", "old")).write_memory("- Dana\n")
    old = await kept.chat(tusk, "http", "old")
    await tusk.chats.set_pointer(old, old.session.total)
    await tusk.say("old", "I keep bees")
    env = env_for(fake_llm, tmp_path, **where)
    archive = tmp_path / "old.tar.gz"
    assert (await tusk_cli("export", "http:old", "-o", str(archive), env=env))[0] == 0
    other = {**env, "TUSK_HOME": str(tmp_path / "other")}
    before = len(fake_llm.requests)
    outs = [await imported(other, str(archive), "--to", "http:new") for _ in range(2)]
    rounds = [json.dumps(body) for body in fake_llm.requests[before:]]
    msgs = await stored(tmp_path / "other", where, "http", "new")
    assert [m.role for m in msgs] == ["user", "assistant"] * 2 and msgs[0].content == "I am Dana"
    assert "MEMORY.md taken from the archive" in outs[0] and "; 2 messages folded" in outs[0]
    assert any("I keep bees" in r for r in rounds) and not any("I am Dana" in r for r in rounds)
    assert "(4 already there)" in outs[1] and "Nothing to do" in outs[1]


def slack_zip(path, extra=()):
    """A Slack export as documented: users.json, channels.json, dms.json, a channel folder of day files."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("users.json", json.dumps([
            {"id": "U1", "name": "ann", "real_name": "Ann Lee", "profile": {"display_name": "Ann"}},
            {"id": "U2", "name": "bo", "real_name": "Bo", "profile": {"display_name": ""}}]))
        z.writestr("channels.json", json.dumps([{"id": "C100", "name": "general", "members": ["U1", "U2"]}]))
        z.writestr("dms.json", json.dumps([{"id": "D200", "members": ["U1", "U2"]}]))
        z.writestr("general/2024-02-01.json", json.dumps([
            {"type": "message", "subtype": "channel_join", "user": "U2", "text": "<@U2> has joined",
             "ts": "1706781600.000100"},
            {"type": "message", "user": "U1", "text": "Launch is *Tuesday*", "ts": "1706781700.000200"},
            {"type": "message", "user": "U2", "text": "", "ts": "1706781800.000300", "files": [{"name": "plan.pdf"}]}]))
        z.writestr("D200/2024-02-02.json", json.dumps([
            {"type": "message", "user": "U2", "text": "psst", "ts": "1706868000.000100",
             "thread_ts": "1706868000.000100"}]))
        for name, data in extra:
            z.writestr(name, data)


async def test_slack_zip_twice_and_hostile(fake_llm, tmp_path):
    """Channels and DMs land in slack:<id> with names from users.json; twice adds nothing; `..` refused."""
    env = env_for(fake_llm, tmp_path)
    home = tmp_path / "data"
    export = tmp_path / "slack.zip"
    slack_zip(export)
    await imported(env, str(export))
    assert "Nothing to do" in await imported(env, str(export))
    general = session(home, "slack", "C100")
    assert [(m["sender"]["name"], m["content"]) for m in general] == [("Ann", "Launch is *Tuesday*"),
                                                                       ("Bo", "[file plan.pdf]")]
    assert general[0]["ts"] == 1706781700.0002 and session(home, "slack", "D200")[0]["content"] == "psst"
    evil = tmp_path / "evil.zip"
    slack_zip(evil, [("../../escape.json", "[]")])
    code, _, err = await tusk_cli("import", str(evil), "--yes", "--to", "slack:X", env=env)
    assert code == 1 and "climbs out" in err and not (home / "chats/slack/X").exists()
