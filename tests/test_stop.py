"""/stop: the running reply stopped at once, its text kept and marked, the queue behind it answered next."""

import asyncio
import json

import pytest

from bot.events import ChatKey, InboundMessage
from bot.stop import NOTHING_TO_STOP, STOPPED_RESULT, Stops, is_stop, stopped_note, stopped_turn
from memory.session import Message
from tests.conftest import running
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_web import FakeWeb
from tests.fakes.loopback import wait_until
from tests.legality import violations
from tests import kept

LONG = " ".join(f"word{i}" for i in range(400)) + "."


class Watched:
    """One streamed turn over the HTTP API, read as it comes: `events` grows while the turn runs."""

    def __init__(self, tusk, chat, text):
        self.events: list[tuple[str, dict]] = []
        self.task = asyncio.ensure_future(self._read(tusk, chat, text))

    async def _read(self, tusk, chat, text):
        name = None
        async with tusk.client.post(f"{tusk.url}/v1/chats/{chat}/messages",
                                    json={"text": text, "stream": True}) as resp:
            assert resp.status == 200
            async for raw in resp.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    self.events.append((name, json.loads(line[6:])))

    def shown(self) -> str:
        return "".join(data["text"] for name, data in self.events if name == "delta")

    async def done(self) -> list[str]:
        await asyncio.wait_for(self.task, 10)
        assert self.events[-1][0] == "done", self.events[-1]
        return self.events[-1][1]["replies"]


async def stop(tusk, chat, **body):
    async with tusk.client.post(f"{tusk.url}/v1/chats/{chat}/stop", json=body) as resp:
        assert resp.status == 200, await resp.text()
        return (await resp.json())["replies"]


def saved(tusk, chat):
    session = kept.on_disk(tusk, "http", chat)
    return kept.on_disk(tusk, "http", chat).unconsolidated


def conversation(tusk, chat):
    return [{"role": "system", "content": "-"}, *(m.to_llm() for m in saved(tusk, chat))]


async def test_stop_mid_stream_keeps_what_was_shown_marked_stopped(tusk, fake_llm):
    """The model is still writing: /stop ends the turn at once; the reply is the text so far plus the note,
    the same text is saved and ends the stream's preview, and the model's stream is dropped."""
    fake_llm.script(Reply(text=LONG, token_delay=0.02))
    turn = Watched(tusk, "s", "tell me everything")
    await wait_until(lambda: len(turn.shown()) > 200, timeout=10)
    assert await stop(tusk, "s") == []
    replies = await turn.done()
    assert len(replies) == 1 and replies[0].endswith("\n\n" + stopped_note(""))
    kept = replies[0].removesuffix("\n\n" + stopped_note(""))
    assert LONG.startswith(kept) and len(kept) < len(LONG) - 500 and turn.shown() == replies[0]
    assert [m.role for m in saved(tusk, "s")] == ["user", "assistant"] and saved(tusk, "s")[-1].content == replies[0]
    async with tusk.client.get(f"{tusk.url}/metrics") as resp:
        assert 'tusk_turns_total{channel="http",outcome="stopped"} 1.0' in await resp.text()


async def test_messages_sent_during_the_reply_are_answered_after_the_stop(tusk, fake_llm):
    """A message that arrived while the reply ran waits in the queue; /stop does not drop it: it is the next
    turn, answered in full, and the saved conversation is legal."""
    fake_llm.script(Reply(text=LONG, token_delay=0.02), Reply(text="the second answer"))
    turn = Watched(tusk, "q", "first")
    await wait_until(lambda: len(turn.shown()) > 100, timeout=10)
    second = asyncio.ensure_future(tusk.say("q", "second"))
    await wait_until(lambda: tusk.bus.backlog().get("http", (0, 0))[0] == 1)  # it waits behind the turn
    assert await stop(tusk, "q") == []
    assert (await turn.done())[0].endswith(stopped_note(""))
    assert await asyncio.wait_for(second, 10) == ["the second answer"]
    assert [m.content for m in saved(tusk, "q") if m.role == "user"] == ["first", "second"]
    assert violations(conversation(tusk, "q")) == []


async def test_stop_typed_as_a_message_works_like_the_route(tusk, fake_llm):
    """`/stop` sent as a chat message takes no turn of its own: it is answered before the queue, stopping the
    turn it would otherwise wait behind, and is never sent to the model."""
    fake_llm.script(Reply(text=LONG, token_delay=0.02))
    turn = Watched(tusk, "t", "go on")
    await wait_until(lambda: turn.shown(), timeout=10)
    assert await asyncio.wait_for(tusk.say("t", "/stop"), 5) == []
    assert (await turn.done())[0].endswith(stopped_note(""))
    assert len(fake_llm.requests) == 1 and [m.content for m in saved(tusk, "t") if m.role == "user"] == ["go on"]


async def test_stop_with_nothing_running_says_so(tusk, fake_llm):
    """No reply is being written: /stop answers that there is nothing to stop, and saves nothing."""
    assert await stop(tusk, "idle") == [NOTHING_TO_STOP]
    assert await tusk.say("idle", "/stop") == [NOTHING_TO_STOP]
    assert fake_llm.requests == [] and saved(tusk, "idle") == []


async def test_stop_in_one_chat_leaves_the_others_running(tusk, fake_llm):
    """Chat A's /stop stops A's reply only: B's reply, written at the same time, ends in full."""
    fake_llm.responder = lambda body: Reply(text=LONG, token_delay=0.005)
    a, b = Watched(tusk, "a", "one"), Watched(tusk, "b", "two")
    await wait_until(lambda: a.shown() and b.shown(), timeout=10)
    assert await stop(tusk, "a") == []
    assert (await a.done())[0].endswith(stopped_note(""))
    assert await b.done() == [LONG]


async def test_stop_without_streaming_ends_the_request_and_says_stopped(make_settings, fake_llm):
    """With TUSK_STREAM=off nothing was shown: the reply is the note alone, and the slow request is dropped."""
    fake_llm.script(Reply(text="never seen", delay=30))
    async with running(make_settings(TUSK_STREAM="off")) as tusk:
        asking = asyncio.ensure_future(tusk.say("o", "slow question"))
        await fake_llm.wait_for_requests(1)
        assert await stop(tusk, "o") == []
        assert await asyncio.wait_for(asking, 5) == [stopped_note("")]
        assert saved(tusk, "o")[-1].content == stopped_note("")


async def test_a_tool_step_cut_short_is_saved_legal(make_settings, fake_llm):
    """/stop while a tool runs: the call that finished keeps its result, the one cut short gets a result saying
    it was stopped, and the next request built from the session is legal."""
    async with FakeWeb() as site:
        fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {}),
                                                     ("c2", "web_fetch", {"url": site.base + "/slow"})]),
                        Reply(text="the next answer"))
        settings = make_settings(TUSK_WEB_ALLOW_HOSTS=site.allow, TUSK_WEB_HOST_INTERVAL=0)
        async with running(settings) as tusk:
            asking = asyncio.ensure_future(tusk.say("w", "what time is it, and read that page"))
            await wait_until(lambda: any(path == "/slow" for _, path, _ in site.requests), timeout=10)
            assert await stop(tusk, "w") == []
            assert await asyncio.wait_for(asking, 5) == [stopped_note("")]
            kept = saved(tusk, "w")
            assert [(m.role, m.name) for m in kept] == [("user", None), ("assistant", None), ("tool", "current_time"),
                                                         ("tool", "web_fetch"), ("assistant", None)]
            assert kept[3].content == STOPPED_RESULT and kept[2].content != STOPPED_RESULT
            assert violations(conversation(tusk, "w")) == []
            assert await tusk.say("w", "and now?") == ["the next answer"]
            assert violations(fake_llm.requests[-1]["messages"]) == []


async def test_stop_cancels_the_chats_background_task(tusk, fake_llm):
    """A background task is working (its model request is slow): /stop cancels it and says so; its result
    never comes back to the chat."""
    def model(body):
        if body["messages"][0]["content"].startswith("You are a background helper"):
            return Reply(text="a report", delay=30)
        if body["messages"][-1]["role"] == "tool":
            return Reply(text="Started.")
        if "research" in str(body["messages"][-1]["content"]):
            return Reply(text=None, tool_calls=[("c1", "start_task", {"instructions": "Find the trip."})])
        return Reply(text="sentinel answer")

    fake_llm.responder = model
    assert await tusk.say("bg", "research the trip") == ["Started."]
    await wait_until(lambda: tusk.tasks.of(ChatKey("http", "bg")))
    (task,) = tusk.tasks.of(ChatKey("http", "bg"))
    await wait_until(lambda: len(fake_llm.requests) == 3)  # the helper's request is under way
    assert await stop(tusk, "bg") == [f"Stopped the background task {task.id}: its result will not come."]
    assert tusk.tasks.of(ChatKey("http", "bg")) == []
    assert await tusk.say("bg", "anything else?") == ["sentinel answer"]
    assert not any("background task" in str(m.content) for m in saved(tusk, "bg") if m.role == "user")


def test_only_an_addressed_stop_from_a_person_is_a_stop():
    """`/stop` and `/stop@bot` from a person are stops; words around it, group chatter, Tusk's own turns are not."""
    key = ChatKey("telegram", "-5")
    assert is_stop(InboundMessage(key, "/stop", "1")) and is_stop(InboundMessage(key, " /STOP@tusk_bot ", "1"))
    assert not is_stop(InboundMessage(key, "/stop it now", "1"))
    assert not is_stop(InboundMessage(key, "please /stop", "1"))
    assert not is_stop(InboundMessage(key, "/stop", "1", addressed=False))


def test_a_stopped_step_gets_a_result_for_every_call_without_one():
    """Pure: the step cut short keeps its finished results, each other call gets the stopped result, then the
    reply (with who stopped it) closes the turn."""
    calls = tuple({"id": f"c{i}", "type": "function", "function": {"name": f"tool{i}", "arguments": "{}"}}
                  for i in (1, 2, 3))
    new = [Message(role="user", content="do three things"), Message(role="assistant", tool_calls=calls),
           Message(role="tool", tool_call_id="c1", name="tool1", content="one")]
    messages, text = stopped_turn(new, "Working on it", "Ann")
    assert text == "Working on it\n\n_(stopped by Ann)_"
    assert [(m.role, m.tool_call_id, m.content) for m in messages[2:]] == [
        ("tool", "c1", "one"), ("tool", "c2", STOPPED_RESULT), ("tool", "c3", STOPPED_RESULT),
        ("assistant", None, text)]
    convo = [{"role": "system", "content": "-"}, *(m.to_llm() for m in messages)]
    assert violations(convo) == []


async def test_a_shutdown_cancellation_is_not_taken_for_a_stop():
    """A turn cancelled by something else while a stop is under way is still cancelled (no Stopped)."""
    stops, key = Stops(), ChatKey("http", "x")
    entered = asyncio.Event()

    async def turn():
        async with stops.stoppable(key):
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.ensure_future(turn())
    await entered.wait()
    assert stops.stop(key)
    task.cancel()  # shutdown, at the same moment
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not stops.running(key)


async def test_stop_cuts_a_real_model_that_never_stops(make_settings):
    """The rambling llama.cpp model streams on and on: /stop ends its reply early, on the text it had shown,
    and that reply is what the session keeps (what no fake can tell: a real server's stream dropped)."""
    from tests.test_local_llm_real import RAMBLE, server

    settings = make_settings(TUSK_MODEL="openai/tiny", TUSK_API_BASE=server(RAMBLE), TUSK_CONTEXT_WINDOW=2048,
                             TUSK_LLM_TIMEOUT=300)
    async with running(settings) as tusk:
        turn = Watched(tusk, "ramble", "hello")
        await wait_until(lambda: len(turn.shown()) > 150, timeout=240)
        assert await stop(tusk, "ramble") == []
        (reply,) = await turn.done()
        kept = saved(tusk, "ramble")[-1]
    assert reply.endswith("\n\n" + stopped_note("")) and kept.content == reply
    assert kept.tokens < tusk.consolidator.budget.reserve // 2  # stopped long before the model's own end
