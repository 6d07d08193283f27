"""Group chats that know who said what, and /forget me: three members on Telegram's fake, end to end."""

import asyncio
import json
import time
from datetime import timezone

import pytest
from psycopg import sql

from bot.events import ChatKey
from tests.fakes.fake_llm import Reply, attributing_responder
from tests.fakes.fake_telegram import FakeTelegram
from tests.legality import violations
from tests import kept

pytestmark = pytest.mark.both_stores

GROUP = -300
KEY = ChatKey("telegram", str(GROUP))
MEMBERS = {7: "alice", 8: "bob", 9: "carol"}


@pytest.fixture
async def tg():
    async with FakeTelegram(token="123:ABC", username="tusk_bot") as fake:
        yield fake


@pytest.fixture
async def tusk(make_settings, tg, fake_llm):
    from bot.app import TuskApp
    app = TuskApp(make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url))
    app.add_platforms()
    fake_llm.responder = attributing_responder
    async with app:
        yield app


async def say(tg, user_id, text):
    """Post `text` in the group as that member and wait for the bot's answer."""
    before = len(tg.sent)
    command = text.startswith("/")
    tg.push_message(GROUP, text, chat_type="group", user_id=user_id, username=MEMBERS[user_id])
    # the model's final reply is formatted (HTML; a streamed reply's earlier updates are plain text); a command's
    # answer is Tusk's own words, sent once, as plain text
    await tg.wait_for(lambda: len(tg.sent) > before and (command or tg.sent[-1].get("parse_mode") == "HTML"),
                      timeout=15)  # a group's final edit comes GROUP_INTERVAL (3 s) after the first text
    return tg.sent[-1]["plain"]


def group(tusk):
    """The group chat's handle on the app's store."""
    return tusk.chats.handle(KEY)


async def memory(tusk) -> str:
    """The group's MEMORY.md as its store keeps it."""
    return (await group(tusk).memory()).text


async def history(tusk) -> str:
    """The group's HISTORY.md entries as its store keeps them, one text."""
    return "\n\n".join(f"{e.heading}\n{e.text}" for e in await group(tusk).history())


async def said(tusk) -> str:
    """Every message of the group's session (consolidated or not) as its store keeps them, one text."""
    return "\n".join(m.content or "" for m in await group(tusk).messages())


async def unconsolidated(tusk, count):
    """The group's messages past the pointer, once there are `count` of them (TimeoutError after 5 s)."""
    deadline = time.monotonic() + 5
    while len(saved := (await kept.session(tusk, "telegram", str(GROUP))).unconsolidated) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(saved)} of {count} messages saved")
        await asyncio.sleep(0.01)
    return saved


def every_file_text(folder):
    return {p: p.read_text(encoding="utf-8", errors="replace") for p in folder.rglob("*") if p.is_file()}


def everything_kept(tusk) -> dict[str, str]:
    """All the store holds, as text by where: the group's folder and inbox.jsonl (files), or every row of
    every table of the database (PostgreSQL: the search index's words and the inbox journal too)."""
    if tusk.store.kind == "files":
        return {**every_file_text(kept.files(tusk, "telegram", str(GROUP)).dir),
                tusk.inbox.path: tusk.inbox.path.read_text()}
    with tusk.store.sync_db.connection() as conn:
        tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        return {f"{table} row {i}": text for table in tables for i, (text,) in enumerate(
            conn.execute(sql.SQL("SELECT row_to_json(t)::text FROM {} AS t").format(sql.Identifier(table))))}


def journal(tusk) -> str:
    """The inbox journal's text: inbox.jsonl (files) or the `inbox` table's records (PostgreSQL)."""
    if tusk.store.kind == "files":
        return tusk.inbox.path.read_text()
    with tusk.store.sync_db.connection() as conn:
        return "\n".join(text for (text,) in conn.execute("SELECT record::text FROM inbox"))


def legal(fake_llm):
    return all(not violations(r["messages"]) for r in fake_llm.requests)


async def test_history_sent_to_the_model_names_each_speaker(tusk, tg, fake_llm):
    """In a group, each earlier user message reaches the model as 'Name: text'; the stored text is unchanged."""
    await say(tg, 7, "@tusk_bot I like tea")
    await say(tg, 8, "@tusk_bot I like coffee")
    await say(tg, 9, "@tusk_bot and I like water")
    convo = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"]
    assert convo[0] == "Alice: I like tea" and convo[1] == "Bob: I like coffee"
    assert "from Carol (id 9)" in convo[2] and convo[2].endswith("\n\nand I like water")
    saved = [m.content for m in (await kept.session(tusk, "telegram", str(GROUP))).unconsolidated
             if m.role == "user"]
    assert saved == ["I like tea", "I like coffee", "and I like water"] and legal(fake_llm)
    assert fake_llm.requests[-1]["messages"][0] == fake_llm.requests[-2]["messages"][0]  # system prompt unchanged


async def test_a_member_of_two_groups_carries_nothing_across(tusk, tg, fake_llm):
    """The same person in two groups: neither group's people or words reach the other's prompt."""
    await say(tg, 8, "@tusk_bot my drink is espresso-8b2")
    before = len(tg.sent)
    tg.push_message(-400, "@tusk_bot hello other group", chat_type="group", user_id=7, username="alice")
    tg.push_message(-400, "@tusk_bot hi", chat_type="group", user_id=9, username="carol")
    await tg.wait_for(lambda: len(tg.sent) == before + 2)
    await say(tg, 7, "@tusk_bot and me here")
    other = json.dumps(fake_llm.requests[2]["messages"])
    assert "Alice: hello other group" in other and "espresso" not in other and "Bob" not in other
    here = json.dumps(fake_llm.requests[-1]["messages"])
    assert "Bob: my drink is espresso-8b2" in here and "other group" not in here and "Carol" not in here


async def test_facts_land_in_each_members_section(tusk, tg, fake_llm):
    """After consolidation MEMORY.md has a section per member with their own facts, and one for the group."""
    await say(tg, 7, "@tusk_bot my drink is mint-tea-7a1")
    await say(tg, 8, "@tusk_bot my drink is espresso-8b2")
    await say(tg, 9, "@tusk_bot my drink is lemonade-9c3")
    await say(tg, 8, "/new@tusk_bot")
    sections = {s.split("\n", 1)[0]: s for s in (await memory(tusk)).split("## ")[1:]}
    assert set(sections) == {"Alice", "Bob", "Carol", "The group"}
    assert "mint-tea-7a1" in sections["Alice"] and "espresso-8b2" in sections["Bob"]
    assert "lemonade-9c3" in sections["Carol"] and "espresso" not in sections["Alice"]
    system = fake_llm.requests[-1]["messages"][0]["content"]
    assert "organise memory_update by person" in system
    assert "Alice: my drink is mint-tea-7a1" in fake_llm.requests[-1]["messages"][1]["content"]
    shown = await say(tg, 7, "/memory@tusk_bot")  # a command's answer: MEMORY.md exactly as written
    assert shown.startswith("## Alice\n\n- drink: mint-tea-7a1\n\n## Bob\n\n- drink: espresso-8b2")
    assert legal(fake_llm)


async def test_forget_me_removes_one_member_from_every_file(tusk, tg, fake_llm):
    """/forget me confirm leaves none of that member's canaries in any file of the chat; others' facts stay."""
    await say(tg, 7, "@tusk_bot my drink is mint-tea-7a1, my pet is gecko-7d4")
    await say(tg, 8, "@tusk_bot my drink is espresso-8b2")
    await say(tg, 9, "@tusk_bot my drink is lemonade-9c3")
    await say(tg, 8, "/new@tusk_bot")
    fake_llm.script(Reply(text=None, tool_calls=[("q1", "search_history", {"query": "gecko drink"})]),
                    Reply(text="found it"))
    await say(tg, 7, "@tusk_bot my plan is kayak-7f6: what is my pet?")  # a turn with a tool step
    assert "gecko-7d4" in fake_llm.requests[-1]["messages"][-1]["content"]  # the index holds her text now
    await say(tg, 9, "/new@tusk_bot")  # a second consolidation: Alice's first section is now a kept version
    await say(tg, 7, "@tusk_bot my bike is tandem-7g8")  # unconsolidated: in the session only
    assert any("mint-tea-7a1" in v.text for v in await group(tusk).versions())
    report = await say(tg, 7, "/forget@tusk_bot me confirm")
    assert "removed their section from MEMORY.md and from 1 earlier version" in report
    assert "rewrote 1 history entry without them (by the model)" in report
    assert "removed 1 history entry only about them" in report
    if tusk.store.kind == "files":  # search.sqlite, a copy dropped; the database's search rows go with the chat's
        assert "search index" in report and "messages of theirs from the journal (inbox.jsonl)" in report
    else:
        assert "1 message of theirs from the journal (the database's inbox)" in report

    everything = everything_kept(tusk)
    assert any("espresso-8b2" in text for text in everything.values())  # what is read holds the others' facts
    for where, text in everything.items():
        for canary in ("mint-tea-7a1", "gecko-7d4", "kayak-7f6", "tandem-7g8"):
            assert canary not in text, f"{canary} left in {where}"
    kept_memory = await memory(tusk)
    assert "espresso-8b2" in kept_memory and "lemonade-9c3" in kept_memory and "## Alice" not in kept_memory
    assert "espresso-8b2" in await history(tusk) and "Bob said" in await history(tusk)
    session = await kept.session(tusk, "telegram", str(GROUP))
    assert {m.sender_id for m in session.unconsolidated if m.role == "user"} <= {"8", "9"}
    assert not tusk.store.search.holds(KEY)
    hits = await tusk.store.search.search(KEY, "gecko mint tea kayak tandem drink", 5, timezone.utc)
    assert hits and not any(c in h.text for h in hits for c in ("gecko", "mint-tea", "kayak", "tandem"))
    assert legal(fake_llm)


async def test_forget_me_lists_first_and_is_everyones_right(tusk, tg, fake_llm):
    """/forget me lists a member's share without removing it; a member may not erase someone else."""
    await say(tg, 7, "@tusk_bot my drink is mint-tea-7a1")
    await say(tg, 8, "@tusk_bot my drink is espresso-8b2")
    listing = await say(tg, 7, "/forget@tusk_bot me")
    assert listing.startswith("This would remove what Alice left in this chat:")
    assert "1 turn of theirs in the conversation (2 messages, with my replies)" in listing
    assert "/forget me confirm" in listing and "mint-tea-7a1" in await said(tusk)
    assert "only its administrators" in await say(tg, 7, "/forget@tusk_bot @bob confirm")
    tg.members[(GROUP, 9)] = "administrator"
    assert "This would remove what Bob left" in await say(tg, 9, "/forget@tusk_bot @bob")
    assert "Forgotten Bob" in await say(tg, 9, "/forget@tusk_bot id:8 confirm")
    text = await said(tusk)
    assert "espresso-8b2" not in text and "mint-tea-7a1" in text and legal(fake_llm)


async def test_listen_on_keeps_unaddressed_chatter_without_a_model_call(tusk, tg, fake_llm):
    """With /listen off chatter is dropped; after an admin's /listen on it is saved with its sender, costs no
    LLM call, gets no reply, and reaches the next consolidation under its speaker."""
    tg.push_message(GROUP, "my secret is dropped-7z0", chat_type="group", user_id=7, username="alice")
    assert "only its administrators" in await say(tg, 8, "/listen@tusk_bot on")
    tg.members[(GROUP, 9)] = "administrator"
    assert "Listening: on" in await say(tg, 9, "/listen@tusk_bot on")
    assert (await kept.chat(tusk, "telegram", str(GROUP))).prefs.listen is True
    assert "Listening: on" in await say(tg, 8, "/status@tusk_bot")
    calls, replies = len(fake_llm.requests), len(tg.sent)
    tg.push_message(GROUP, "my snack is pretzel-7h9", chat_type="group", user_id=7, username="alice")
    tg.push_message(GROUP, "my snack is olive-8i1", chat_type="group", user_id=8, username="bob")
    saved = await unconsolidated(tusk, 2)
    assert len(fake_llm.requests) == calls and len(tg.sent) == replies
    assert [(m.sender_name, m.content) for m in saved] == [("Alice", "my snack is pretzel-7h9"),
                                                          ("Bob", "my snack is olive-8i1")]
    await say(tg, 9, "@tusk_bot my snack is grape-9j2")
    convo = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"]
    assert convo[0].startswith("Alice: my snack is pretzel-7h9\n\nBob: my snack is olive-8i1\n\n[context:")
    await say(tg, 9, "/new@tusk_bot")
    kept_memory = await memory(tusk)
    assert "## Alice\n\n- snack: pretzel-7h9" in kept_memory and "## Bob\n\n- snack: olive-8i1" in kept_memory
    assert "dropped-7z0" not in json.dumps(fake_llm.requests) and "dropped-7z0" not in await said(tusk)
    assert "dropped-7z0" not in journal(tusk)  # not even journaled
    assert "Listening: off" in await say(tg, 9, "/listen@tusk_bot off")
    assert legal(fake_llm)


async def test_forget_me_without_the_model_removes_history_entries(tusk, tg, fake_llm):
    """When the model cannot rewrite a history entry naming the member, the entry is removed, and the report says why."""
    await say(tg, 7, "@tusk_bot my drink is mint-tea-7a1")
    await say(tg, 8, "@tusk_bot my drink is espresso-8b2")
    await say(tg, 8, "/new@tusk_bot")
    fake_llm.script(Reply(status=503))
    report = await say(tg, 7, "/forget@tusk_bot me confirm")
    assert "removed 1 history entry naming them (the model was unavailable to rewrite them)" in report
    assert await group(tusk).history() == [] and "mint-tea" not in await memory(tusk)
    assert "espresso-8b2" in await memory(tusk)


async def test_forget_me_in_a_direct_chat_is_forget(tusk, tg, fake_llm):
    """In a direct chat /forget me is /forget: it lists the whole chat, and with confirm deletes its folder."""
    tg.push_message(42, "my drink is mint-tea-7a1", user_id=7, username="alice")
    await tg.wait_for(lambda: tg.sent)
    tg.push_message(42, "/forget me", user_id=7, username="alice")
    await tg.wait_for(lambda: len(tg.sent) == 2)
    assert "Send /forget confirm" in tg.sent[-1]["plain"]
    tg.push_message(42, "/forget me confirm", user_id=7, username="alice")
    await tg.wait_for(lambda: len(tg.sent) == 3)
    assert "Forgotten:" in tg.sent[-1]["plain"] and not await tusk.chats.handle(ChatKey("telegram", "42")).exists()
