"""Replies before housekeeping on a one-slot model server (bot/llm/slots.py), through real litellm and the
direct client against the fake server answering one request at a time."""

import asyncio

import pytest

from bot.app import TuskApp
from bot.events import ChatKey, InboundMessage
from bot.llm import LLM, LLMSettings
from bot.llm.slots import Preempted, Slots, housekeeping
from memory import files as memfiles
from memory.session import Message
from tests import kept
from tests.fakes.fake_llm import Reply
from tests.fakes.loopback import wait_until
from tests.outbox import attach

FILLER = " ".join(f"word{i}" for i in range(60))  # ~120 tokens
MEMORY = "\n".join(f"- fact {i} of the garden" for i in range(20))  # ~150 tokens, streamed in ~70 chunks


def is_consolidation(body):
    return any(t["function"]["name"] == "save_memory" for t in body.get("tools") or [])


def consolidations(fake_llm):
    return [i for i, b in enumerate(fake_llm.requests) if is_consolidation(b)]


def slow_rounds(fake_llm, delay=0.02):
    """Consolidation answers that stream for seconds (a token every `delay` s); replies answer at once."""
    def respond(body):
        if is_consolidation(body):
            return Reply(text=None, token_delay=delay, tool_calls=[
                ("s", "save_memory", {"history_entry": "They talked about the garden.", "memory_update": MEMORY})])
        return Reply(text="here you are")
    fake_llm.responder = respond


async def over_budget(app, chat="long"):
    """30 long messages through the app's store; the chat's key."""
    await kept.append(app, "http", chat, [Message("user" if i % 2 == 0 else "assistant", f"message {i}: {FILLER}")
                                          for i in range(30)])
    return ChatKey("http", chat)


@pytest.fixture
def small(make_settings):
    return lambda **env: TuskApp(make_settings(TUSK_CONTEXT_WINDOW=2560, **env))


async def until(predicate):
    await wait_until(predicate, 30)


@pytest.mark.parametrize("direct", [False, True], ids=["litellm", "direct"])
async def test_a_reply_cuts_off_a_round_which_goes_again_from_the_same_chunk(small, fake_llm, direct):
    """One slot: a person's message arrives while a background round streams; the round's connection is closed
    (the server stops it), the reply goes out, then the same round is sent again and written once."""
    fake_llm.one_slot = True
    slow_rounds(fake_llm)
    app = small(TUSK_MODEL_SLOTS=1)
    app.llm.direct = direct
    key = await over_budget(app)
    box = attach(app)
    background = asyncio.create_task(app._consolidate(ChatKey("http", "long")))
    await until(lambda: fake_llm.streams >= 1)  # the round is streaming
    await app.bus.publish(InboundMessage(ChatKey("http", "other"), "hello", sender_id="u"))
    await background
    assert [m.text for m in box.sent] == ["here you are"] and fake_llm.hangups == 1
    rounds = consolidations(fake_llm)
    reply = next(i for i, b in enumerate(fake_llm.requests) if not is_consolidation(b))
    assert rounds[0] < reply < rounds[1]
    sent = [fake_llm.requests[i]["messages"][1]["content"] for i in rounds]
    assert sent[1] == sent[0] and len(set(sent)) == len(sent) - 1  # the cut chunk again; no other chunk twice
    stats = app.consolidator.stats[key]
    assert stats.failures == 0 and stats.runs == len(rounds) - 1 and app.llm.slots.cuts == 1
    folder = kept.files(app, key.channel, key.chat_id)
    assert len(memfiles.history_entries(folder)) == stats.runs and "fact 19 of" in memfiles.read_memory(folder)


async def test_a_round_the_server_cuts_short_goes_again_streamed(small, fake_llm):
    """One slot: a round whose stream the server ends early is sent again later, streamed, not at once whole
    (which no closed connection could stop), and the model is not taken for one that cannot stream."""
    fake_llm.one_slot = True
    saving = [("s", "save_memory", {"history_entry": "They talked.", "memory_update": "- likes tea"})]
    fake_llm.script(Reply(text=None, tool_calls=saving, cut_after=2))
    fake_llm.responder = lambda body: Reply(text=None, tool_calls=saving)
    app = small(TUSK_MODEL_SLOTS=1)
    key = await over_budget(app)
    await app._consolidate(ChatKey("http", "long"))
    rounds = consolidations(fake_llm)
    assert all(fake_llm.requests[i].get("stream") for i in rounds) and fake_llm.cuts == 1
    assert fake_llm.requests[rounds[1]]["messages"] == fake_llm.requests[rounds[0]]["messages"]
    stats = app.consolidator.stats[key]
    assert stats.failures == 0 and stats.runs == len(rounds) - 1 and app.llm.no_stream == {}


async def test_no_round_starts_while_a_turn_is_under_way(small, fake_llm):
    """One slot: a round due while a person's reply is being written is sent only once that reply is all out."""
    fake_llm.one_slot = True
    fake_llm.responder = lambda body: (Reply(text=None, tool_calls=[("s", "save_memory", {
        "history_entry": "They talked.", "memory_update": "- likes tea"})]) if is_consolidation(body)
        else Reply(text="slow " * 40, token_delay=0.02))
    app = small(TUSK_MODEL_SLOTS=1)
    await over_budget(app)
    turn = asyncio.ensure_future(app.bus.publish(InboundMessage(ChatKey("http", "other"), "hello", sender_id="u")))
    await until(lambda: fake_llm.requests)  # the reply is being written
    await app._consolidate(ChatKey("http", "long"))
    await turn
    (round_,) = consolidations(fake_llm)[:1]
    assert fake_llm.arrivals[round_] >= fake_llm.finished[0] and fake_llm.hangups == 0


async def test_with_several_slots_nothing_is_held_back(small, fake_llm):
    """A server of unknown slots (no TUSK_MODEL_SLOTS, no /props): a round in flight is not cut off, and a
    person's request goes out beside it."""
    fake_llm.responder = lambda body: Reply(text=None, delay=1.0, tool_calls=[("s", "save_memory", {
        "history_entry": "They talked.", "memory_update": MEMORY})]) if is_consolidation(body) else Reply(text="hi")
    app = small()
    key = await over_budget(app)
    background = asyncio.create_task(app._consolidate(ChatKey("http", "long")))
    await until(lambda: consolidations(fake_llm))
    await app.bus.publish(InboundMessage(ChatKey("http", "other"), "hello", sender_id="u"))
    reply = next(i for i, b in enumerate(fake_llm.requests) if not is_consolidation(b))
    await background
    first = consolidations(fake_llm)[0]
    assert fake_llm.finished[reply] < fake_llm.finished[first]  # answered while the round still streamed
    stats = app.consolidator.stats[key]
    assert fake_llm.hangups == 0 and app.llm.slots.cuts == 0 and stats.failures == 0
    assert len(consolidations(fake_llm)) == stats.runs == len(memfiles.history_entries(kept.files(app, key.channel, key.chat_id)))


@pytest.mark.parametrize("total", [1, 4])
async def test_the_slots_llama_cpp_reports_are_learned(make_settings, fake_llm, total):
    """llama.cpp's /props `total_slots` is read at the warm-up: one slot puts replies first, several change nothing."""
    fake_llm.props = {"total_slots": total, "default_generation_settings": {"n_ctx": 4096}}
    app = TuskApp(make_settings())
    await app.warmup.ready()
    assert app.llm.slots.count == total and app.llm.slots.one is (total == 1)
    await app.warmup.aclose()


async def test_a_configured_slot_count_wins(make_settings, fake_llm):
    """TUSK_MODEL_SLOTS wins over what the server says."""
    fake_llm.props = {"total_slots": 1}
    app = TuskApp(make_settings(TUSK_MODEL_SLOTS=3))
    await app.warmup.ready()
    assert app.llm.slots.count == 3
    await app.warmup.aclose()


async def test_a_background_step_cut_off_is_asked_again(fake_llm):
    """A background task's step (`Slots.retrying`) cut off by a person's request waits, then asks the same again."""
    fake_llm.one_slot = True
    fake_llm.script(Reply(text="step " * 60, token_delay=0.02), Reply(text="person"), Reply(text="step done"))
    llm = LLM(LLMSettings(model="openai/fake-model", api_base=fake_llm.base_url, api_key="sk-test", retries=0,
                          slots=1))
    step = asyncio.create_task(llm.slots.retrying(llm.complete)([{"role": "user", "content": "work"}]))
    await until(lambda: fake_llm.streams >= 1)
    person = await llm.complete([{"role": "user", "content": "hi"}])
    assert (person.content, (await step).content) == ("person", "step done")
    assert fake_llm.hangups == 1 and fake_llm.requests[2]["messages"] == fake_llm.requests[0]["messages"]
    await llm.aclose()


async def test_housekeeping_does_not_start_while_a_person_waits():
    """A housekeeping call made while a person's request is under way is not started: `Preempted`, not queued."""
    slots = Slots(1)
    started = []
    release = asyncio.Event()

    async def person():
        await release.wait()
        return "reply"

    async def chore():
        started.append("chore")
        return "done"

    waiting = asyncio.create_task(slots.run(person))
    await until(lambda: slots.people == 1)
    with housekeeping(), pytest.raises(Preempted):
        await slots.run(chore)
    release.set()
    assert await waiting == "reply" and started == []
    with housekeeping():
        assert await slots.run(chore) == "done"
