"""The model's profile (bot/llm/profile.py): one place for what is known of the model, read by every part at
use time, taught only by the LLM boundary; and a consolidation round that surfaces a bug instead of hiding it.
The tests that start a Tusk run on both stores (files, PostgreSQL)."""

import pytest

from bot.app import TuskApp
from bot.consolidation import Consolidator
from bot.errors import ContextOverflow, ToolsUnsupported
from bot.llm.learned import FILE, ModelBook
from bot.llm.profile import ModelProfile
from memory.consolidate import Budget
from memory.session import Message
from tests import kept
from tests.conftest import running
from tests.fakes.fake_llm import Reply, overflow_body

pytestmark = pytest.mark.both_stores


async def test_a_window_learned_in_a_turn_applies_to_every_reader(make_settings, fake_llm):
    """One overflow mid-run: the turn's budget, consolidation's, the tasks', the memory cap and the skills'
    share all follow the learned window at once."""
    async with running(make_settings()) as tusk:
        fake_llm.script(overflow_body("vllm", 4096, 9000))
        (reply,) = await tusk.say("big", "hello")
        assert reply.startswith("echo: ")
        budget = tusk.profile.budget
        assert budget.window == 4096 and tusk.consolidator.budget == budget
        assert tusk.agent.fit.budget("openai/fake-model") == budget
        assert tusk.tasks.budget() == budget.limit and tusk.memory_tools.memory_cap() == 409
        assert tusk.consolidator.max_memory_tokens == 409 and tusk.skills.window() == 4096


async def test_the_task_budget_follows_the_window_the_warm_up_settles(make_settings):
    """The tasks' budget is not the provisional window's: after the warm-up it is the settled window's."""
    app = TuskApp(make_settings(TUSK_MODEL="openai/gpt-4o-mini"))
    provisional = app.tasks.budget()
    await app.ready()
    assert app.profile.window.tokens == 128_000 and app.tasks.budget() == app.profile.budget.limit != provisional


async def test_a_consolidation_overflow_teaches_the_chats_window(make_settings, fake_llm):
    """A round the server finds too long teaches the chat model's window too (the same model), in one place."""
    async with running(make_settings(TUSK_CONTEXT_WINDOW="6000")) as tusk:
        def respond(body):
            if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
                return overflow_body("vllm", 5000, 9000)
            return Reply(text="ok " + "word " * 300)
        fake_llm.responder = respond
        for i in range(12):
            await tusk.say("c", f"message {i} " + "word " * 300)
            if tusk.profile.window.tokens == 5000:
                break
        assert tusk.profile.window.tokens == 5000 and tusk.consolidator.budget.window == 5000
        assert ModelBook(tusk.store.doc(FILE)).get("openai/fake-model").window == 5000  # kept for the next start


def test_only_a_smaller_window_is_learned(tmp_path):
    """An overflow naming a window no smaller than a step down's is still learned smaller; none under 1,024."""
    profile = ModelProfile("m", ModelBook(tmp_path), configured_window=8000)
    assert profile.overflowed(ContextOverflow("too long", window=6000), "m") and profile.window.tokens == 6000
    floor = ModelProfile("m", None, configured_window=1024)
    assert not floor.overflowed(ContextOverflow("too long"), "m") and floor.window.tokens == 1024


def test_tools_refused_once_per_model_and_kept(tmp_path):
    """A refusal is learned once (a second, for a request without tools, teaches nothing) and kept in models.json."""
    profile = ModelProfile("m", ModelBook(tmp_path))
    assert profile.tools_refused(ToolsUnsupported("no tools"), "m") and not profile.tools
    assert not profile.tools_refused(ToolsUnsupported("no tools"), "m")
    assert profile.tools_refused(ToolsUnsupported("no tools"), "other") and not profile.takes_tools("other")
    assert not ModelProfile("m", ModelBook(tmp_path)).tools  # a restart remembers


def test_a_cut_prompt_is_noticed_for_the_main_model(tmp_path):
    """A server counting under half a long prompt marks the model as one that cuts prompts, and /status says so."""
    profile = ModelProfile("m", ModelBook(tmp_path))
    profile.prompt_counted("m", 4000, 2500)
    assert not profile.truncates
    profile.prompt_counted("m", 4000, 1000)
    assert profile.truncates and any("cuts long prompts" in n for n in profile.notes())


def test_the_reply_cap_follows_the_model_once_settled(tmp_path):
    """The reserve is the model's largest reply (or a quarter of the window) once the warm-up tells it."""
    from bot.llm.window import Window

    profile = ModelProfile("m", None)
    assert profile.budget.source == "default" and profile.budget.reserve == 1024
    profile.settle(Window(100_000, "litellm"), known_output=8000)
    assert profile.budget == Budget(100_000, 8000, "litellm") and profile.memory_cap == 10_000


async def test_a_bug_in_a_round_raises_and_writes_nothing(make_settings):
    """A programming error in a round (here in the model call) goes up as itself: no [raw] entry, however often,
    and the store keeps the chat as it was (pointer, MEMORY.md, HISTORY.md)."""
    async with running(make_settings()) as tusk:
        await kept.append(tusk, "http", "bug", [Message(role=r, content=f"{r} {i} " + "word " * 50).counted()
                                                for i in range(4) for r in ("user", "assistant")])

        async def broken(messages, tools, max_tokens):
            raise TypeError("a bug")

        consolidator = Consolidator(tusk.chats, broken, lambda: Budget.for_window(8000), lambda: 800)
        chat = await kept.chat(tusk, "http", "bug")
        for _ in range(4):
            with pytest.raises(TypeError):
                await consolidator.run(chat, lambda: 0, force=True)
        again = await kept.chat(tusk, "http", "bug")
        assert again.session.last_consolidated == 0 and len(again.session.unconsolidated) == 8
        assert again.memory.text == "" and await tusk.chats.handle(again.key).history() == []
        assert consolidator.rounds() == (0, 0) and consolidator.stats[again.key].failures == 0
