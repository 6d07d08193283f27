"""Consolidation through real litellm against the fake LLM: trigger, target, boundaries, failures."""

import asyncio
import json
import time

import pytest

from bot.app import TuskApp
from bot.events import ChatKey
from bot.consolidation import MAX_FAILURES, ChatStats
from memory.consolidate import pick_cut
from memory.session import Message
from memory.tokens import count_text
from tests.fakes.fake_llm import Reply
from tests.outbox import attach
from tests.legality import violations
from tests import kept

pytestmark = pytest.mark.both_stores

FILLER = " ".join(f"word{i}" for i in range(60))  # ~120 tokens


async def memory(app, chat_id):
    """The chat's MEMORY.md as the app's store keeps it ("" when there is none)."""
    return (await app.chats.handle(ChatKey("http", chat_id)).memory()).text


async def history(app, chat_id):
    """The chat's HISTORY.md entries as the app's store keeps them, each as HISTORY.md shows it."""
    return [e.heading for e in await app.chats.handle(ChatKey("http", chat_id)).history()]


def is_consolidation(body):
    return any(t["function"]["name"] == "save_memory" for t in body.get("tools") or [])


def saving(memory="- likes tea", entry="They talked."):
    return Reply(text=None, tool_calls=[("s1", "save_memory", {"history_entry": entry, "memory_update": memory})])


def answer(fake_llm, memory="- likes tea"):
    def respond(body):
        return saving(memory) if is_consolidation(body) else Reply(text=f"noted {FILLER}")
    fake_llm.responder = respond


async def chat(app, chat_id, turns, start=0):
    from bot.events import ChatKey, InboundMessage

    box = attach(app)
    for i in range(start, start + turns):
        await app.bus.publish(InboundMessage(ChatKey("http", chat_id), f"message {i}: {FILLER}", sender_id="u"))
    await app.agent.aclose()
    return [m.text for m in box.sent]


@pytest.fixture
async def small(make_settings):
    """`await small(**env)`: a TuskApp on a 2,560-token window, its store open (the app itself not started: the
    tests drive its bus and consolidator); every one made is closed when the test ends."""
    made = []

    async def make(**env):
        app = TuskApp(make_settings(TUSK_CONTEXT_WINDOW=2560, **env))
        await app.store.start()
        made.append(app)
        return app

    yield make
    for app in made:
        await app.store.close()


def test_pick_cut_only_before_user_messages():
    """Cuts fall before a user message: the first that removes enough, else the last one, else none."""
    msgs = [Message(r, "x", tokens=t) for r, t in
            [("user", 10), ("assistant", 10), ("tool", 10), ("assistant", 10), ("user", 10), ("assistant", 10)]]
    assert pick_cut(msgs, 5) == 4 and pick_cut(msgs, 1000) == 4 and pick_cut(msgs[:4], 5) is None


async def test_over_budget_consolidates_to_half_at_a_turn_boundary(small, fake_llm):
    """Past the budget, the oldest whole turns go to HISTORY.md/MEMORY.md and the prompt drops to half."""
    app = await small()
    answer(fake_llm)
    await chat(app, "c", 12)
    session = await kept.session(app, "http", "c")
    assert session.last_consolidated > 0 and session.unconsolidated[0].role == "user"
    assert await memory(app, "c") == "- likes tea\n" and len(await history(app, "c")) >= 1
    budget = app.consolidator.budget
    assert app.agent.context.fixed_tokens(await kept.chat(app, "http", "c")) + session.tokens <= budget.limit
    calls = [b for b in fake_llm.requests if is_consolidation(b)]
    assert calls and calls[0]["tool_choice"]["function"]["name"] == "save_memory"
    assert all(b["temperature"] == 0 for b in calls)  # a summary, not a creative reply
    replies = [b for b in fake_llm.requests if not is_consolidation(b)]
    assert replies and all("temperature" not in b for b in replies)  # the provider's own for a reply
    assert "message 0:" in calls[0]["messages"][1]["content"]  # the oldest turn is in the first chunk


async def test_every_request_is_legal_and_within_the_window(small, fake_llm):
    """A long conversation on a small window: every request the fake saw is legal and fits."""
    app = await small()
    def respond(body):
        if is_consolidation(body):
            return saving()
        n = len(fake_llm.requests)
        if n % 3 == 0:  # some turns use a tool
            return Reply(text=None, tool_calls=[(f"t{n}", "current_time", {})])
        return Reply(text=f"ok {FILLER}")
    fake_llm.responder = respond
    await chat(app, "long", 60)
    for body in fake_llm.requests:
        if not is_consolidation(body):
            assert violations(body["messages"]) == []
        size = count_text(json.dumps(body["messages"])) + count_text(json.dumps(body.get("tools", [])))
        assert size <= 2560


async def test_failed_rounds_advance_nothing_then_raw_fallback(small, fake_llm):
    """A model that never calls save_memory moves nothing and backs off, each retry on a smaller chunk; the
    third failure keeps the raw chunk in HISTORY.md."""
    app = await small()
    fake_llm.responder = lambda body: Reply(text="no tool call")
    await kept.append(app, "http", "bad", [Message("user" if i % 2 == 0 else "assistant", f"message {i}: {FILLER}")
                                           for i in range(20)])
    opened = await kept.chat(app, "http", "bad")
    stats = app.consolidator.stats.setdefault(opened.key, ChatStats())
    def fixed():
        return app.agent.context.fixed_tokens(opened)
    sizes = []
    for attempt in range(1, MAX_FAILURES):
        assert await app.consolidator.run(opened, fixed) == 0
        sizes.append(len(fake_llm.requests[-1]["messages"][1]["content"]))
        assert opened.session.last_consolidated == 0 and await history(app, "bad") == []
        assert stats.failures == attempt and stats.retry_at > time.time()
        assert await app.consolidator.run(opened, fixed) == 0 and len(sizes) == len(fake_llm.requests)  # backing off
        stats.retry_at = 0  # the backoff has passed
    assert sizes[1] < sizes[0]  # the retry took a smaller chunk
    assert await app.consolidator.run(opened, fixed) == 1
    entries = await history(app, "bad")
    assert opened.session.last_consolidated > 0 and len(entries) == 1
    assert "[raw]" in entries[0] and "message 0:" in entries[0]
    assert await memory(app, "bad") == ""  # nothing invented into MEMORY.md


async def test_oversized_memory_is_rejected_and_shrink_requested(small, fake_llm):
    """A memory_update over TUSK_MEMORY_MAX_TOKENS is refused, and the retry asks for a shorter one."""
    app = await small(TUSK_MEMORY_MAX_TOKENS=100)
    big = "- fact " * 300
    def respond(body):
        if is_consolidation(body):
            shrink = "too long" in body["messages"][0]["content"]
            return saving(memory="- short" if shrink else big)
        return Reply(text=f"ok {FILLER}")
    fake_llm.responder = respond
    await chat(app, "big", 14)
    stats = app.consolidator.stats[ChatKey("http", "big")]
    assert "over 100 tokens" in stats.last_error and stats.shrink and await memory(app, "big") == ""
    stats.retry_at = 0  # the backoff has passed
    await chat(app, "big", 1)
    assert await memory(app, "big") == "- short\n"


async def test_pointer_survives_restart(small, fake_llm):
    """After a restart the chat resumes past the consolidated messages."""
    app = await small()
    answer(fake_llm)
    await chat(app, "r", 12)
    before = await kept.session(app, "http", "r")
    again = await kept.session(await small(), "http", "r")  # as a restarted Tusk loads it
    assert again.last_consolidated == before.last_consolidated > 0
    assert [m.content for m in again.unconsolidated] == [m.content for m in before.unconsolidated]


async def test_memory_is_versioned(small, fake_llm):
    """Each new MEMORY.md keeps the previous text under versions/."""
    app = await small()
    count = {"n": 0}
    def respond(body):
        if is_consolidation(body):
            count["n"] += 1
            return saving(memory=f"- version {count['n']}")
        return Reply(text=f"ok {FILLER}")
    fake_llm.responder = respond
    await chat(app, "v", 24)
    handle = app.chats.handle(ChatKey("http", "v"))
    earlier = await handle.versions()
    assert count["n"] >= 2 and earlier and earlier[-1].text == f"- version {count['n'] - 1}\n"
    assert await handle.restore_previous() and await memory(app, "v") == f"- version {count['n'] - 1}\n"


async def test_one_chats_memory_never_reaches_another(small, fake_llm):
    """Isolation canary: a fact told in chat A appears in no request made for chat B."""
    app = await small()
    answer(fake_llm, memory="- the canary is ZEBRA-42")
    await chat(app, "a", 12)
    mark = len(fake_llm.requests)
    answer(fake_llm, memory="- nothing special")
    await chat(app, "b", 12)
    assert any("ZEBRA-42" in json.dumps(b) for b in fake_llm.requests[:mark])
    assert all("ZEBRA-42" not in json.dumps(b) for b in fake_llm.requests[mark:])


async def test_sweep_consolidates_chats_left_over_budget(small, fake_llm):
    """After a restart, the sweep finds a chat over budget on disk and consolidates it; unchanged chats are skipped."""
    answer(fake_llm)
    first = await small()
    await kept.append(first, "http", "left", [Message("user" if i % 2 == 0 else "assistant", f"message {i}: {FILLER}")
                                              for i in range(30)])
    restarted = await small()
    assert await restarted.sweeper.sweep() == 1
    again = await kept.session(restarted, "http", "left")
    assert again.last_consolidated > 0 and await history(restarted, "left")
    assert await restarted.sweeper.sweep() == 1  # the pointer record changed the file: checked once more
    assert await restarted.sweeper.sweep() == 0


async def test_scheduler_job_is_coalesced_and_single(make_settings):
    """The sweep job is registered once, coalesced, never overlapping."""
    app = TuskApp(make_settings(TUSK_CONTEXT_WINDOW=2560))
    async with app:
        job = app._scheduler.get_job("consolidation-sweep")
        assert job.coalesce and job.max_instances == 1 and job.trigger.interval.total_seconds() == 600


async def test_forget_during_consolidation_discards_its_result(small, fake_llm):
    """A /forget confirm while a consolidation is waiting on the model leaves no memory files behind."""
    from bot.events import ChatKey, InboundMessage

    app = await small()
    def respond(body):
        if is_consolidation(body):
            return Reply(text=None, delay=0.5, tool_calls=[("s", "save_memory", {
                "history_entry": "x", "memory_update": "- should not survive"})])
        return Reply(text=f"ok {FILLER}")
    fake_llm.responder = respond
    await kept.append(app, "http", "gone", [Message("user" if i % 2 == 0 else "assistant", f"message {i}: {FILLER}")
                                            for i in range(30)])
    running = asyncio.create_task(app.agent.consolidate(ChatKey("http", "gone")))
    while not any(is_consolidation(b) for b in fake_llm.requests):
        await asyncio.sleep(0.01)
    box = attach(app)
    await app.bus.publish(InboundMessage(ChatKey("http", "gone"), "/forget confirm", sender_id="u"))
    await running
    assert "Forgotten" in box.sent[0].text and not await app.chats.handle(ChatKey("http", "gone")).exists()


async def test_tool_results_never_push_a_request_over_budget(small, fake_llm):
    """A model that keeps calling a tool with big results is stopped before a request would exceed the budget."""
    app = await small(TUSK_TOOL_RESULT_MAX_CHARS=100_000)
    fake_llm.responder = lambda body: Reply(text=None, tool_calls=[(f"c{len(fake_llm.requests)}", "nope", {"x": FILLER * 3})])
    sent = await chat(app, "tools", 1)
    assert "token budget" in sent[0]
    for body in fake_llm.requests:
        estimate = sum(count_text(json.dumps(m)) for m in body["messages"])
        assert estimate <= 2560
    session = await kept.session(app, "http", "tools")
    assert violations([{"role": "system", "content": ""}, *(m.to_llm() for m in session.unconsolidated)]) == []
