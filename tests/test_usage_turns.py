"""The usage ledger through real turns: the provider's figures recorded call for call, limits that stop a
chat while others go on, /usage and /status, and a restart after kill -9."""

import asyncio
import re

import pytest

from bot.events import ChatKey
from bot.usage.ledger import Ledger
from memory import files as memfiles
from tests.conftest import running
from tests.fakes.fake_llm import Reply, prompt_tokens
from tests import kept

PRICED = "fake=openai/fake-model@1000/2000"  # USD per million tokens: a call of 100 in / 10 out costs $0.12


def usage(prompt, completion, **extra):
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion, **extra}


def rows(tusk):
    ledger = Ledger(tusk.settings.home)
    try:
        got = ledger._rows("SELECT purpose, channel, chat, person, input_tokens, output_tokens, cached_tokens, "
                           "estimated, cost_usd, cost_source FROM calls ORDER BY id", [])
    finally:
        ledger.close()
    return [tuple(r) for r in got]


async def test_every_call_is_recorded_with_the_providers_figures(make_settings, fake_llm):
    """A reply with a tool step, then a reply streamed: one row per call, tokens as the provider reported them
    (cached ones too), the provider's own cost where it sent one, else the owner's price."""
    async with running(make_settings(TUSK_MODELS=PRICED)) as tusk:
        fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})], usage=usage(100, 10)),
                        Reply(text="Noon.", usage=usage(120, 5, prompt_tokens_details={"cached_tokens": 64})),
                        Reply(text="Hello!", usage=usage(90, 3, cost=0.0042)))
        assert await tusk.say("u1", "time?", user="alice") == ["Noon."]
        assert await tusk.say_streamed("u1", "hi", user="alice") == ["Hello!"]
    got = rows(tusk)
    assert [r[:8] for r in got] == [("reply", "http", "u1", "alice", 100, 10, 0, 0),
                                    ("reply", "http", "u1", "alice", 120, 5, 64, 0),
                                    ("reply", "http", "u1", "alice", 90, 3, 0, 0)]
    assert [r[8:] for r in got] == [(0.12, "configured"), (0.13, "configured"), (0.0042, "provider")]


async def test_a_daily_chat_limit_stops_that_chat_only_and_keeps_the_message(make_settings, fake_llm):
    """Past TUSK_CHAT_LIMIT_DAILY_USD the chat gets one sentence naming the limit and its reset; nothing reaches
    the model, the message is saved; another chat goes on."""
    fake_llm.responder = lambda body: Reply(text="ok", usage=usage(1500, 500))  # $0.0025 a call at $1/$2
    settings = make_settings(TUSK_MODELS="fake=openai/fake-model@1/2", TUSK_CHAT_LIMIT_DAILY_USD="0.01")
    async with running(settings) as tusk:
        answers = [(await tusk.say("lim", f"message {i}"))[0] for i in range(5)]
        # each call reserves its estimate (the prompt, tool schemas included: ~1,800 tokens, + a reply of 1,024)
        assert answers[:3] == ["ok"] * 3 and "ok" not in answers[3:]
        refused = answers[-1]  # $0.0025 short of the limit: this message's estimate is more than that
        assert re.fullmatch(r"Answering this message would cost about \$0\.00[3-5]\d*, more than is left of this "
                            r"chat's daily spending limit \(\$0\.01\): \$0\.0075 already spent today; it resets "
                            r"at midnight \(UTC\)\.", refused), refused
        sent = len(fake_llm.requests)
        assert await tusk.say("other", "hello") == ["ok"]
        assert len(fake_llm.requests) == sent + 1
        saved = [m.content for m in kept.on_disk(tusk, "http", "lim").unconsolidated if m.role == "user"]
        assert saved[-1] == "message 4"
        spent = sum(r[8] for r in rows(tusk) if r[2] == "lim")
        assert abs(spent - 0.0075) < 1e-9
        status = (await tusk.say("lim", "/status"))[0]
        assert "Spending (this chat today: $0.0075 of $0.01)" in status


async def test_usage_command_shows_today_by_purpose(make_settings, fake_llm):
    """/usage lists today's calls, tokens and cost by purpose, without calling the model."""
    fake_llm.responder = lambda body: Reply(text="ok", usage=usage(100, 10))
    async with running(make_settings(TUSK_MODELS=PRICED)) as tusk:
        await tusk.say("u2", "hello")
        before = len(fake_llm.requests)
        shown = (await tusk.say("u2", "/usage"))[0]
    assert len(fake_llm.requests) == before
    assert "Today: 1 call, 100 in / 10 out tokens, $0.12" in shown and "  reply: 1 call" in shown


async def test_an_unknown_price_is_recorded_as_unknown_never_zero(tusk, fake_llm):
    """A model with no known price: its cost is unknown (null), and /usage says so."""
    fake_llm.script(Reply(text="ok", usage=usage(50, 5)))
    await tusk.say("u3", "hello")
    assert rows(tusk)[-1][8:] == (None, None)
    assert "price unknown" in (await tusk.say("u3", "/usage"))[0]


async def test_consolidation_counts_under_its_chat_without_a_person(make_settings, fake_llm):
    """/new's consolidation is recorded under the chat, purpose consolidation, no person."""
    fake_llm.responder = lambda body: (
        Reply(text=None, tool_calls=[("s", "save_memory", {"history_entry": "Talked.", "memory_update": "- tea"})],
              usage=usage(200, 20))
        if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []) else
        Reply(text="ok", usage=usage(100, 10)))
    async with running(make_settings(TUSK_MODELS=PRICED)) as tusk:
        await tusk.say("u4", "I drink tea", user="bob")
        await tusk.say("u4", "/new", user="bob")
        assert memfiles.read_memory(kept.files(tusk, "http", "u4")).strip() == "- tea"
    purposes = [(r[0], r[2], r[3], r[4]) for r in rows(tusk)]
    assert ("consolidation", "u4", None, 200) in purposes and ("reply", "u4", "bob", 100) in purposes


async def test_forget_removes_the_chat_from_the_ledger_but_not_from_the_limits(make_settings, fake_llm):
    """/forget reports the chat's usage records and removes its ids; the day's spend still counts for its limit."""
    fake_llm.responder = lambda body: Reply(text="ok", usage=usage(2000, 500))
    settings = make_settings(TUSK_MODELS="fake=openai/fake-model@1/2", TUSK_CHAT_LIMIT_DAILY_USD="0.01")
    async with running(settings) as tusk:
        for i in range(2):
            await tusk.say("gone", f"hello {i}", user="carol")
        assert "2 usage records of this chat" in (await tusk.say("gone", "/forget"))[0]
        report = (await tusk.say("gone", "/forget confirm"))[0]
        assert "deleted 2 usage records of this chat" in report
        assert all(r[2] is None and r[3] is None for r in rows(tusk))
        await tusk.say("gone", "hello again", user="carol")  # $0.006 spent today still counts: one more fits
        assert "daily spending limit" in (await tusk.say("gone", "and again", user="carol"))[0]


@pytest.mark.both_stores
async def test_the_doctors_probes_are_recorded_as_probes(make_settings, fake_llm):
    """`tusk doctor`'s requests land in the ledger of the store the settings name as purpose "probe", of no
    chat; its price check speaks."""
    from bot.ops.probe import probe

    settings = make_settings(TUSK_MODELS=PRICED)
    settings.home.mkdir(parents=True)
    checks = await probe(settings)
    with kept.ledger(settings) as book:
        by_purpose, by_chat = book.report("purpose"), book.report("chat")
    assert [r.key for r in by_purpose] == ["probe"] and by_purpose[0].calls == len(fake_llm.requests) > 0
    assert [(r.channel, r.key) for r in by_chat] == [(None, None)]
    assert any(c.name == "price" and "TUSK_MODELS" in c.detail for c in checks)


async def test_a_background_task_counts_under_its_chat_and_person(make_settings, fake_llm):
    """A task started in a turn: its calls are recorded as purpose "task", under the chat and the person who
    asked; its result's turn as "task" too; every figure as the provider reported it."""
    from tests.outbox import say, started
    from tests.test_tasks import is_helper

    def model(body):
        last = body["messages"][-1]
        if is_helper(body):
            return Reply(text="Report: done.", usage=usage(300, 30))
        if last["role"] == "user" and "look into it" in str(last.get("content")):
            return Reply(text=None, tool_calls=[("c1", "start_task", {"instructions": "Look."})], usage=usage(100, 10))
        return Reply(text="On it.", usage=usage(110, 11))

    fake_llm.responder = model
    async with started(make_settings, TUSK_MODELS=PRICED) as (app, box):
        await say(app, box, "bg", "please look into it")
        await box.wait_for("bg", 2)
        await app.agent.aclose()
    got = [(r[0], r[2], r[3], r[4], r[5]) for r in rows(app)]
    assert ("task", "bg", "u1", 300, 30) in got
    assert got[:2] == [("reply", "bg", "u1", 100, 10), ("reply", "bg", "u1", 110, 11)]
    assert all(r[1] == "bg" for r in got), got


async def test_a_person_limit_follows_the_person_and_memory_still_consolidates(make_settings, fake_llm):
    """TUSK_PERSON_LIMIT_DAILY_USD stops one person in every chat while another person goes on; the stopped
    chat's /new still consolidates (consolidation's reserve), so its memory keeps working."""
    def model(body):
        if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
            return Reply(text=None, tool_calls=[("s", "save_memory", {"history_entry": "Talked.",
                                                                      "memory_update": "- likes tea"})],
                         usage=usage(1000, 100))
        return Reply(text="ok", usage=usage(2000, 500))

    fake_llm.responder = model
    settings = make_settings(TUSK_MODELS="fake=openai/fake-model@1/2", TUSK_PERSON_LIMIT_DAILY_USD="0.008")
    async with running(settings) as tusk:
        assert await tusk.say("p1", "hi", user="dave") == ["ok"]
        assert await tusk.say("p2", "I like tea", user="dave") == ["ok"]
        refused = (await tusk.say("p2", "more", user="dave"))[0]
        assert refused.startswith("You have reached your daily spending limit ($0.01)") or \
            "your daily spending limit" in refused
        assert await tusk.say("p2", "hello", user="erin") == ["ok"]
        assert "summarised into memory" in (await tusk.say("p2", "/new", user="dave"))[0]
        assert "likes tea" in memfiles.read_memory(kept.files(tusk, "http", "p2"))


PER_TOKEN = 1e-7  # the provider's price: $0.10 per million prompt tokens, replies free


def billing(body):
    """A provider that bills the whole prompt (tools and all, as tests/fakes/fake_llm.py counts it) and says
    what it cost, as OpenRouter does; each reply takes a moment, so the chats' calls overlap."""
    prompt = prompt_tokens(body)
    return Reply(text="ok", delay=0.3, usage=usage(prompt, 1, cost=prompt * PER_TOKEN))


async def test_many_chats_at_once_stay_within_an_owner_wide_limit(make_settings, fake_llm):
    """30 chats sending at once against an owner-wide limit sized for 11 calls: the calls that run, at the
    provider's own figures (the tool schemas billed too), never pass the limit; the others are refused."""
    fake_llm.responder = billing
    home = make_settings().home
    models = {"TUSK_MODELS": f"fake=openai/fake-model@{PER_TOKEN * 1e6:g}/0", "TUSK_HOME": home}
    async with running(make_settings(**models)) as tusk:  # one call, to learn what a call costs
        assert await tusk.say("first", "hello") == ["ok"]
    one = sum(r[8] for r in rows(tusk))
    limit = 12 * one  # the first call and room for 11 more
    async with running(make_settings(**models, TUSK_LIMIT_DAILY_USD=f"{limit:.9f}")) as tusk:
        answers = await asyncio.gather(*(tusk.say(f"chat{i}", "hello") for i in range(30)))
    costs = [r[8] for r in rows(tusk)]
    assert all(r[9] == "provider" for r in rows(tusk))
    assert sum(costs) <= float(f"{limit:.9f}") + 1e-12, (len(costs), sum(costs), limit)
    ran = sum(a == ["ok"] for a in answers)
    assert ran == len(costs) - 1 and 6 <= ran <= 11, ran  # not stopped far short of the limit either
    assert all("daily spending limit" in a[0] for a in answers if a != ["ok"])


async def test_a_usd_limit_on_a_model_without_a_price_says_it_counts_nothing(make_settings, fake_llm):
    """A chat's USD limit on a model with no known price: /status shows its calls as not counted and says why,
    with what the owner can do; once the owner sets a token limit, /status shows that one counting them."""
    fake_llm.responder = lambda body: Reply(text="ok", usage=usage(400, 20))
    settings = make_settings(TUSK_CHAT_LIMIT_DAILY_USD="0.01")
    async with running(settings) as tusk:
        for i in range(3):
            assert await tusk.say("free", f"message {i}") == ["ok"]
        status = (await tusk.say("free", "/status"))[0]
        assert ("Spending (this chat today: $0.00 of $0.01 + 3 calls of unknown price it cannot count)\n"
                "openai/fake-model has no known price, so a dollar limit cannot count its calls: the owner can give "
                "it a price or set a token limit.") in status
        tusk.limits.set_override(ChatKey("http", "free"), daily_tokens=5000)  # as `tusk budget set` does
        status = (await tusk.say("free", "/status"))[0]
        assert "this chat today: 1,260 of 5,000 tokens of models without a known price" in status
        assert "they count against a daily limit of 5,000 tokens instead." in status
