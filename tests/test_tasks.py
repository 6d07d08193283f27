"""Background tasks: a sub-agent runs apart, its result comes back as a turn, and history stays legal."""

import asyncio

from bot.events import ChatKey
from memory import files as memfiles
from tests.fakes.fake_llm import Reply
from tests.legality import violations
from tests.outbox import say, started
from tests import kept
from tests.settle import drained

HELPER = "You are a background helper"


def is_helper(body):
    return body["messages"][0]["content"].startswith(HELPER)


def saved_conversation(app, chat):
    return [{"role": "system", "content": "-"}, *(m.to_llm() for m in kept.on_disk(app, "http", chat).unconsolidated)]


def trip_research(body):
    """The model's side of the regression scenario (task started, result arrives, model calls a tool)."""
    msgs = body["messages"]
    last = msgs[-1]
    text = str(last.get("content"))
    if is_helper(body):
        if last["role"] == "user":
            return Reply(text=None, tool_calls=[("h1", "search_history", {"query": "trip"})])
        return Reply(text="Report: the trip goes to Lisbon in May.")
    if last["role"] == "user" and "research the trip" in text:
        return Reply(text=None, tool_calls=[("c1", "start_task", {"instructions": "Find the trip decisions."})])
    if last["role"] == "tool" and last["name"] == "start_task":
        return Reply(text="On it.")
    if last["role"] == "user" and "has finished" in text:
        return Reply(text=None, tool_calls=[("c2", "remember", {"fact": "The trip goes to Lisbon in May"})])
    if last["role"] == "tool" and last["name"] == "remember":
        return Reply(text="Found it: Lisbon in May.")
    return Reply(text="You're welcome.")


async def test_task_result_then_a_tool_call_keeps_history_legal(make_settings, fake_llm):
    """Regression: a task's result arrives, the model answers it with a tool call; the saved history and
    every request, then and later, stay legal (no two assistant messages in a row)."""
    fake_llm.responder = trip_research
    async with started(make_settings) as (app, box):
        memfiles.append_history(kept.files(app, "http", "trip"), "We chose Lisbon for the trip, in May.")
        memfiles.append_history(kept.files(app, "http", "other"), "Another chat's trip: Paris.")
        assert await say(app, box, "trip", "please research the trip decisions") == ["On it."]
        texts = await box.wait_for("trip", 3)
        assert texts[1:] == ["Noted: The trip goes to Lisbon in May", "Found it: Lisbon in May."]
        assert await say(app, box, "trip", "thanks") == ["You're welcome."]
    for body in fake_llm.requests:
        assert not violations(body["messages"]), body["messages"]
    helper_search = next(b for b in fake_llm.requests if is_helper(b) and b["messages"][-1]["role"] == "tool")
    assert "Lisbon" in helper_search["messages"][-1]["content"] and "Paris" not in str(helper_search)
    assert not violations(saved_conversation(app, "trip"))
    roles = [m["role"] for m in saved_conversation(app, "trip")[1:]]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant", "user",
                     "assistant"]
    note = saved_conversation(app, "trip")[5]["content"]
    assert note.startswith("[background task t") and note.endswith(" finished]")
    last = str(fake_llm.requests[-1]["messages"])
    assert "Report: the trip goes" not in last and "[background task t" in last  # injected for one turn only
    assert "Lisbon in May" in memfiles.read_memory(kept.files(app, "http", "trip"))


def slow_helper(delay):
    def respond(body):
        if is_helper(body):
            return Reply(text="late report", delay=delay)
        if body["messages"][-1]["role"] == "user" and str(body["messages"][-1]["content"]).endswith("\n\ngo"):
            return Reply(text=None, tool_calls=[("c1", "start_task", {"instructions": "dig"})])
        if body["messages"][-1]["role"] == "tool":
            return Reply(text="Started.")
        return Reply(text="echo: " + str(body["messages"][-1]["content"]))
    return respond


async def test_a_task_that_runs_out_of_time_reports_its_failure(make_settings, fake_llm):
    """A task past TUSK_TASK_TIMEOUT is stopped and the chat hears that it failed."""
    fake_llm.responder = slow_helper(1.0)
    async with started(make_settings, TUSK_TASK_TIMEOUT=0.3) as (app, box):
        assert await say(app, box, "slow", "go") == ["Started."]
        texts = await box.wait_for("slow", 2)
    assert "has failed" in texts[1] and "ran out of time (0.3 s)" in texts[1] and "late report" not in texts[1]
    assert app.tasks.running == {}


async def test_forget_cancels_the_chats_running_tasks(make_settings, fake_llm):
    """/forget lists a running task and cancels it: its result never arrives."""
    fake_llm.responder = slow_helper(30.0)  # still running after two more turns on a loaded machine
    async with started(make_settings) as (app, box):
        await say(app, box, "f", "go")
        (task,) = app.tasks.running.values()
        assert "1 running background task (cancelled)" in (await say(app, box, "f", "/forget"))[0]
        assert "deleted 1 running background task (cancelled)" in (await say(app, box, "f", "/forget confirm"))[0]
        await asyncio.wait_for(asyncio.wait([task.runner]), 10)  # it has ended: a report it made is published
        await drained(app, ChatKey("http", "f"))  # and its turn has ended too
    assert task.runner.cancelled() and app.tasks.running == {} and not any("late report" in t for t in box.to("f"))


async def test_a_chat_runs_at_most_max_tasks_at_once(make_settings, fake_llm):
    """Past TUSK_MAX_TASKS running tasks, start_task is an error the model sees."""
    fake_llm.responder = slow_helper(0.5)
    async with started(make_settings, TUSK_MAX_TASKS=1) as (app, box):
        await say(app, box, "m", "go")
        await say(app, box, "m", "go")
        results = [b["messages"][-1]["content"] for b in fake_llm.requests
                   if not is_helper(b) and b["messages"][-1]["role"] == "tool"]
        assert results[0].startswith("Background task t") and "already has 1 tasks running" in results[1]
        await box.wait_for("m", 3)
