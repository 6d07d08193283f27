"""Where a fact came from (/memory why) and forgetting one fact for good (/memory forget), end to end."""

import re

import pytest

from bot import remembering
from bot.events import ChatKey
from memory import tombstones
from store.base import PROVENANCE
from tests.conftest import running
from tests.fakes.fake_llm import Reply, last_user_text
from tests.test_console_api import call
from tests import kept

pytestmark = pytest.mark.both_stores


async def memory(tusk, chat):
    """The chat's MEMORY.md as its store keeps it."""
    return (await tusk.chats.handle(ChatKey("http", chat)).memory()).text


async def forgotten(tusk, chat):
    """The chat's tombstones (forgotten.json), as its store keeps them."""
    return await remembering.stones(tusk.chats.handle(ChatKey("http", chat)))


FACT = re.compile(r"\bmy (\w[\w ]*?) is ([\w' -]+)", re.IGNORECASE)


def keeping_model(body):
    """A consolidating model that files every "my X is Y" of the excerpt as `- X: Y` over the current memory,
    and re-adds whatever the old messages say: it never honours a forgetting by itself."""
    if not any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
        return Reply(text="ok")
    text = last_user_text(body)
    memory = text.split("## Current MEMORY.md", 1)[-1].split("## Conversation excerpt", 1)[0].strip()
    facts = dict(line[2:].split(": ", 1) for line in memory.splitlines() if line.startswith("- ") and ": " in line)
    for line in text.split("## Conversation excerpt", 1)[-1].splitlines():
        if "] assistant:" not in line:
            facts.update((k.strip(), v.strip()) for k, v in FACT.findall(line))
    lines = [f"- {k}: {v}" for k, v in facts.items()]
    return Reply(text=None, tool_calls=[("s", "save_memory", {"history_entry": "They talked.",
                                                              "memory_update": "\n".join(lines) + "\n"})])


async def test_why_quotes_the_messages_that_said_a_consolidated_fact_after_a_restart(make_settings, fake_llm):
    """A fact written by consolidation is shown with the dated message that said it, not the others, after a restart."""
    fake_llm.responder = keeping_model
    settings = make_settings()
    async with running(settings) as tusk:
        await tusk.say("w", "hello there")
        await tusk.say("w", "my drink is green tea")
        await tusk.say("w", "my city is Lisbon")
        await tusk.say("w", "/new")
    async with running(settings) as tusk:
        answer = (await tusk.say("w", "/memory why drink"))[0]
        assert await tusk.chats.handle(ChatKey("http", "w")).doc(PROVENANCE)
    assert answer.startswith("1. drink: green tea") and "\u201cmy drink is green tea\u201d" in answer
    assert "Lisbon" not in answer and "hello there" not in answer and re.search(r"\[20\d\d-\d\d-\d\d ", answer)
    if tusk.store.kind == "files":  # a file of the owner's alone
        assert (kept.files(tusk, "http", "w").dir / "provenance.json").stat().st_mode & 0o777 == 0o600


async def test_why_for_a_fact_saved_by_remember_and_one_the_owner_edited(tusk, fake_llm):
    """remember links the message it was called from; a console edit is marked as the owner's."""
    fake_llm.script(Reply(text=None, tool_calls=[("m1", "remember", {"fact": "Bob's birthday is 12 May"})]),
                    Reply(text="Sure."))
    await tusk.say("r", "please remember that Bob's birthday is 12 May")
    answer = (await tusk.say("r", "/memory why birthday"))[0]
    assert "saved with remember" in answer and "\u201cplease remember that Bob's birthday is 12 May\u201d" in answer
    text = await memory(tusk, "r") + "- Ann owns a red kayak\n"
    status, _ = await call(tusk, "PUT", "/api/chats/http/r/memory", json={"text": text})
    assert status == 200
    assert "written by the owner in the console" in (await tusk.say("r", "/memory why kayak"))[0]
    assert "saved with remember" in (await tusk.say("r", "/memory why birthday"))[0]  # kept through the edit
    assert "No fact" in (await tusk.say("r", "/memory why zeppelin"))[0]


async def test_a_forgotten_fact_stays_forgotten_until_said_again(tusk, fake_llm):
    """Old messages repeating a forgotten fact do not bring it back through consolidation; a new statement does."""
    fake_llm.responder = keeping_model
    await tusk.say("f", "my drink is green tea")
    await tusk.say("f", "my city is Lisbon")
    await tusk.say("f", "/new")
    await tusk.say("f", "as I said, my drink is green tea")  # old conversation, consolidated after the forgetting
    listing = (await tusk.say("f", "/memory forget tea"))[0]
    assert "1. drink: green tea" in listing and "Lisbon" not in listing
    assert "Forgotten for good" in (await tusk.say("f", "/memory forget 1"))[0]
    assert "green tea" not in await memory(tusk, "f") and "Lisbon" in await memory(tusk, "f")
    await tusk.say("f", "/new")
    assert "green tea" not in await memory(tusk, "f") and await forgotten(tusk, "f")
    request = fake_llm.requests[-1]["messages"][0]["content"]
    assert "Do not re-add them" in request and "drink: green tea" in request
    await tusk.say("f", "my drink is green tea again, really")
    await tusk.say("f", "/new")
    assert "drink: green tea" in await memory(tusk, "f") and not await forgotten(tusk, "f")
    assert "green tea again" in (await tusk.say("f", "/memory why drink"))[0]


def notice_copying_model(body):
    """A consolidating model that keeps the current memory and copies every line of the request's notice about
    forgotten facts into memory_update and history_entry, as models do copy what a prompt shows."""
    if not any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
        return Reply(text="ok")
    system, text = body["messages"][0]["content"], last_user_text(body)
    memory = text.split("## Current MEMORY.md", 1)[-1].split("## Conversation excerpt", 1)[0].strip()
    notice = system.split("These facts were forgotten", 1)[1].splitlines()[1:] if "These facts were forgotten" in \
        system else []
    copied = [line if line.startswith("- ") else f"- {line}" for line in notice if line.strip()]
    lines = [line for line in memory.splitlines() if line.startswith("- ")] + copied
    return Reply(text=None, tool_calls=[("s", "save_memory", {"history_entry": "\n".join(["They talked.", *copied]),
                                                              "memory_update": "\n".join(lines) + "\n"})])


async def test_a_model_copying_the_forgotten_notice_brings_nothing_back(tusk, fake_llm):
    """A consolidation whose model copies the request's notice about forgotten facts into memory_update and
    history_entry: neither MEMORY.md nor HISTORY.md gets the forgotten fact back, in any form; other facts stay."""
    fake_llm.responder = keeping_model
    await tusk.say("n", "my dog is Rex the beagle")
    await tusk.say("n", "my city is Lisbon")
    await tusk.say("n", "/new")
    assert "dog: Rex the beagle" in await memory(tusk, "n")
    await tusk.say("n", "/memory forget dog")
    assert "Forgotten for good" in (await tusk.say("n", "/memory forget 1"))[0]
    fake_llm.responder = notice_copying_model
    await tusk.say("n", "the weather is fine today")
    await tusk.say("n", "/new")
    assert await memory(tusk, "n") == "- city: Lisbon\n"
    last_entry = (await tusk.chats.handle(ChatKey("http", "n")).history())[-1].heading
    assert "They talked." in last_entry and "Rex" not in last_entry and "forgotten" not in last_entry
    assert await forgotten(tusk, "n")  # still forgotten: nothing said it again
    request = fake_llm.requests[-1]["messages"][0]["content"]
    assert "dog: Rex the beagle" in request and "\n- dog: Rex the beagle" not in request  # no memory-shaped line


def test_the_older_notice_form_is_recognised_as_the_forgotten_fact():
    """`- fact (forgotten DATE)`, the notice's older form, and its bracketed or quoted variants are the forgotten
    fact itself: enforce drops them; a fact that merely mentions forgetting stays as written."""
    memory = "- dog: Rex the beagle\n- Ann forgot her keys (again)\n"
    memory, stones = tombstones.forget(memory, [], [f for f in tombstones.facts(memory) if "dog" in f.line])
    copied = ("- dog: Rex the beagle (forgotten 2026-12-04 19:54 UTC)\n- \"dog: Rex the beagle\" [forgotten 2026-12-04]\n"
              "- forgotten 2026-12-04 19:54 UTC: \"dog: Rex the beagle\"\n- Ann forgot her keys (again)\n"
              "- Ann said \"hi\"\n")
    assert tombstones.enforce(stones, memory, copied, []) == (
        "- Ann forgot her keys (again)\n- Ann said \"hi\"\n", stones)


async def test_forget_is_undone_by_memory_undo(tusk, fake_llm):
    """/memory forget writes a new version: /memory undo brings the fact back."""
    await tusk.chats.handle(ChatKey("http", "u")).write_memory("- Ann likes tea\n- Ann lives in Porto\n")
    await tusk.say("u", "/memory forget all tea")
    assert await memory(tusk, "u") == "- Ann lives in Porto\n"
    await tusk.say("u", "/memory undo")
    assert "Ann likes tea" in await memory(tusk, "u")


async def test_console_gives_sources_and_forgets_a_fact(tusk, fake_llm):
    """GET .../memory/why lists matching facts with their sources; POST .../memory/forget forgets one for good."""
    fake_llm.responder = keeping_model
    await tusk.say("c", "my pet is a gecko")
    await tusk.say("c", "/new")
    status, body = await call(tusk, "GET", "/api/chats/http/c/memory/why?fact=gecko")
    assert status == 200 and body["facts"][0]["fact"] == "pet: a gecko"
    assert body["facts"][0]["sources"][0]["text"] == "my pet is a gecko"
    status, body = await call(tusk, "POST", "/api/chats/http/c/memory/forget", json={"number": 1})
    assert status == 200 and body["forgotten"] == "pet: a gecko" and "gecko" not in body["text"]
    status, _ = await call(tusk, "POST", "/api/chats/http/c/memory/forget", json={"number": 9})
    assert status == 404


async def test_bench_links_beat_the_naive_baseline_and_nothing_comes_back(tmp_path):
    """bench/provenance.py: Tusk's links are more precise than the latest word-sharing message; 0 returns."""
    from bench import provenance as bench
    from bench.recall_data import generate

    precise, covered, base, _ = await bench.measure(generate(2, 8, history=False)[0], tmp_path, 24)
    assert sum(precise) / len(precise) > sum(base) / len(base) and sum(covered) / len(covered) > 0.8
    assert await bench.forgetting(tmp_path, 10) == (0, True)
