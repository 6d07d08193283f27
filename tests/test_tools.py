"""The tool framework: schemas from signatures, validation before the call, errors as results."""

from datetime import datetime, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo

import pytest
from pydantic import Field

from bot.llm import ToolCall
from bot.tools.box import ToolBox, ToolContext
from bot.tools.when import parse_when
from tests.fakes.fake_llm import Reply
from tests import kept

BERLIN = ZoneInfo("Europe/Berlin")


def schema(tusk, name):
    return next(t["function"] for t in tusk.tools.schemas if t["function"]["name"] == name)


async def test_chat_tools_are_offered_with_schemas_from_their_signatures(tusk, fake_llm):
    """Every chat tool reaches the model with its docstring and a JSON schema; the chat context is hidden."""
    await tusk.say("s", "hi")
    offered = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert offered == {"current_time", "search_history", "remember", "set_reminder", "list_reminders",
                       "cancel_reminder", "start_task", "web_fetch"}  # TUSK_WEB_FETCH is on by default
    remind = schema(tusk, "set_reminder")
    assert remind["description"].startswith("Set a reminder here, once or repeating")
    params = remind["parameters"]
    assert set(params["properties"]) == {"text", "when", "repeat", "kind"} and params["required"] == ["text"]
    assert params["properties"]["text"]["maxLength"] == 1000 and "description" in params["properties"]["when"]
    assert params["properties"]["kind"]["enum"] == ["text", "instruction"] and "cron" in params["properties"]["repeat"]["description"]
    search = schema(tusk, "search_history")["parameters"]
    assert search["required"] == ["query"] and search["properties"]["limit"] == {
        "type": "integer", "default": 5, "minimum": 1, "maximum": 20,
        "description": "How many results, best first."}
    assert schema(tusk, "list_reminders")["parameters"]["properties"] == {}
    assert not any("ctx" in t["function"]["parameters"].get("properties", {}) for t in tusk.tools.schemas)


async def test_invalid_arguments_are_reported_before_the_call(tusk, fake_llm):
    """Arguments that break the schema come back to the model as an error result; the turn completes."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "search_history", {"query": "", "limit": 500}),
                                                 ("c2", "remember", {"fact": "x", "extra": 1}),
                                                 ("c3", "set_reminder", {"when": "in 1 hour"})]),
                    Reply(text="sorry"))
    assert await tusk.say("v", "go") == ["sorry"]
    results = [m["content"] for m in fake_llm.requests[1]["messages"][-3:]]
    assert all(r.startswith("Error: ToolArgumentError: invalid arguments for ") for r in results)
    assert "limit" in results[0] and "query" in results[0] and "extra" in results[1] and "text" in results[2]
    assert not kept.files(tusk, "http", "v").memory.exists()


async def test_a_failing_tool_is_an_error_result_not_a_broken_turn(tusk, fake_llm):
    """A tool that raises gives the model its error message and the conversation goes on."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "set_reminder", {"when": "someday", "text": "x"})]),
                    Reply(text="When exactly?"))
    assert await tusk.say("e", "remind me someday") == ["When exactly?"]
    error = fake_llm.requests[1]["messages"][-1]["content"]
    assert error.startswith("Error: ValueError: cannot read 'someday' as a time") and "in 2 hours" in error


async def test_bound_methods_with_context_and_constraints():
    """A bound method is a tool: name, docstring, constrained parameters; its context is passed, not shown."""
    seen = []

    class Greeter:
        async def greet(self, ctx: ToolContext, name: Annotated[str, Field(max_length=5)], times: int = 1) -> str:
            """Greet someone.

            Longer explanation."""
            seen.append(ctx)
            return "hi " * times + name

    box = ToolBox([Greeter().greet])
    fn = box.schemas[0]["function"]
    assert fn["name"] == "greet" and fn["description"] == "Greet someone.\n\nLonger explanation."
    assert fn["parameters"]["required"] == ["name"]
    ctx = ToolContext(key=None, chat=None)
    ok = await box.run(ToolCall("1", "greet", '{"name": "Bo", "times": 2}'), ctx)
    assert ok.for_model() == "hi hi Bo" and seen == [ctx]
    bad = await box.run(ToolCall("2", "greet", '{"name": "Bartholomew"}'), ctx)
    assert "at most 5 characters" in bad.for_model() and len(seen) == 1
    with pytest.raises(ValueError, match="two tools are named 'greet'"):
        ToolBox([Greeter().greet, Greeter().greet])


@pytest.mark.parametrize("when, expected", [
    ("2026-12-03T09:00", datetime(2026, 12, 3, 9, 0, tzinfo=BERLIN)),
    ("2026-12-03 09:00", datetime(2026, 12, 3, 9, 0, tzinfo=BERLIN)),
    ("2026-12-03T09:00Z", datetime(2026, 12, 3, 10, 0, tzinfo=BERLIN)),
    ("in 2 hours", datetime(2026, 12, 2, 16, 0, tzinfo=BERLIN)),
    ("+90m", datetime(2026, 12, 2, 15, 30, tzinfo=BERLIN)),
    ("1h30m", datetime(2026, 12, 2, 15, 30, tzinfo=BERLIN)),
    ("1 day, 2 hours and 5 minutes", datetime(2026, 12, 3, 16, 5, tzinfo=BERLIN)),
    ("PT45M", datetime(2026, 12, 2, 14, 45, tzinfo=BERLIN)),
    ("P1D", datetime(2026, 12, 3, 14, 0, tzinfo=BERLIN)),
])
def test_when_accepts_iso_times_and_delays(when, expected):
    """`when` is an ISO time (naive means the chat's zone) or a delay from now."""
    now = datetime(2026, 12, 2, 14, 0, tzinfo=BERLIN)
    assert parse_when(when, BERLIN, now) == expected


@pytest.mark.parametrize("when", ["tomorrow", "5", "3 fortnights", "in a while", ""])
def test_when_refuses_what_it_cannot_read(when):
    """Anything else is a ValueError that lists the accepted forms."""
    with pytest.raises(ValueError, match="ISO time"):
        parse_when(when, BERLIN, datetime(2026, 1, 1, tzinfo=BERLIN) + timedelta(0))


async def test_the_first_turns_fixed_prompt_stays_lean(tmp_path, monkeypatch):
    """A new chat's system prompt and default tool schemas stay under 1,400 tokens as Tusk counts them (the
    provider counts fewer: bench/prompt.py), and the system prompt names each tool once, without repeating
    its description."""
    from bot.app import TuskApp
    from bot.config import load_settings
    from bot.events import ChatKey, InboundMessage

    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.agents/skills of this machine's
    app = TuskApp(load_settings(TUSK_HOME=str(tmp_path / "data"), TUSK_MODEL="openai/fake-model"))
    files = await app.chats.open(ChatKey("http", "new"))  # the chat as a turn loads it
    tools = app.tools.for_chat(InboundMessage(ChatKey("http", "new"), "hi", sender_id="u")).schemas
    prompt = app.agent.context.system_prompt(files)
    assert app.agent.context.fixed_tokens(files) < 1400 and len(tools) >= 8
    for schema in tools:
        name, description = schema["function"]["name"], schema["function"]["description"]
        assert prompt.count(name) >= 1 and description.splitlines()[0] not in prompt
