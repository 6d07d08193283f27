"""Streaming replies through the HTTP API's Server-Sent Events, and what a cut stream leaves behind."""

import json
import time

from bot.stream import CUT_NOTE, visible
from tests.conftest import running
from tests.fakes.fake_llm import Reply
from tests.legality import violations
from tests import kept

LONG = " ".join(f"word{i}" for i in range(80)) + "."


async def stream_turn(tusk, chat, text):
    """(event name, data, arrival time) of each event of one streamed turn."""
    url = f"{tusk.url}/v1/chats/{chat}/messages"
    events, name = [], None
    async with tusk.client.post(url, json={"text": text, "stream": True}) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:]), time.monotonic()))
    return events


def saved(tusk, chat):
    session = kept.on_disk(tusk, "http", chat)
    return kept.on_disk(tusk, "http", chat).unconsolidated


def streamed_text(events):
    text = ""
    for name, data, _ in events:
        if name == "delta":
            text = data["text"] if data.get("replace") else text + data["text"]
        elif name == "tool":
            text = ""
    return text


async def test_the_first_text_arrives_long_before_the_whole_reply(tusk, fake_llm):
    """A slow model's reply shows up word by word: the first delta comes well before `done`."""
    fake_llm.script(Reply(text=LONG, token_delay=0.01))
    events = await stream_turn(tusk, "s1", "tell me")
    deltas = [e for e in events if e[0] == "delta"]
    done = events[-1]
    assert done[0] == "done" and done[1] == {"replies": [LONG], "formats": ["markdown"]}
    assert len(deltas) >= 3 and done[2] - deltas[0][2] > 0.3
    assert streamed_text(events) == LONG
    assert saved(tusk, "s1")[-1].content == LONG


async def test_a_short_reply_comes_as_done_alone(tusk, fake_llm):
    """Under TUSK_STREAM_MIN_CHARS nothing is streamed: one final answer, no flicker."""
    fake_llm.script(Reply(text="Short answer.", token_delay=0.01))
    events = await stream_turn(tusk, "s2", "hi")
    assert [e[0] for e in events] == ["done"]
    assert events[0][1] == {"replies": ["Short answer."], "formats": ["markdown"]}
    assert fake_llm.requests[-1]["stream"] is True


async def test_a_tool_step_shows_its_status_then_the_answer(tusk, fake_llm):
    """While a tool runs the client gets a `tool` event; the answer that follows is the saved one."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})]), Reply(text=LONG, token_delay=0.01))
    events = await stream_turn(tusk, "s3", "what time is it, at length")
    names = [e[0] for e in events]
    assert names[0] == "tool" and events[0][1] == {"status": "checking the time…"}
    assert names[-1] == "done" and "delta" in names
    assert streamed_text(events) == LONG == saved(tusk, "s3")[-1].content


async def test_think_blocks_never_stream(tusk, fake_llm):
    """A `<think>` block, even while it is still open, is never sent as a delta."""
    fake_llm.script(Reply(text="<think>secret plan " + "x " * 60 + "</think>" + LONG, token_delay=0.002))
    events = await stream_turn(tusk, "s4", "hi")
    assert not any("secret" in json.dumps(e[1]) or "think" in json.dumps(e[1]) for e in events)
    assert events[-1][1] == {"replies": [LONG], "formats": ["markdown"]}


async def test_a_stream_cut_mid_text_keeps_what_came_with_a_note(tusk, fake_llm):
    """The connection drops mid-reply: the user gets the text so far plus a note, the session keeps exactly
    that as a legal turn, and the next turn's request is legal."""
    fake_llm.script(Reply(text=LONG, cut_after=50, token_delay=0.002))
    events = await stream_turn(tusk, "s5", "tell me")
    reply = events[-1][1]["replies"][0]
    assert reply.endswith(CUT_NOTE) and reply.startswith("word0 word1") and "word79" not in reply
    assert fake_llm.cuts == 1 and len(fake_llm.requests) == 1  # shown text is not asked for again
    messages = saved(tusk, "s5")
    assert [m.role for m in messages] == ["user", "assistant"] and messages[-1].content == reply
    assert (await tusk.say("s5", "go on"))[0].endswith("go on")
    assert violations(fake_llm.requests[-1]["messages"]) == []


async def test_a_stream_cut_inside_a_tool_call_saves_no_half_call(tusk, fake_llm):
    """Text, then a tool call whose arguments are cut off: the text and a note are the reply; no call is saved."""
    text = ("Let me look that up for you, it takes a moment while I search the history of this chat carefully "
            "and then read through everything I find there. ")
    reply = Reply(text=text, tool_calls=[("c1", "search_history", {"query": "a fairly long query text"})],
                  token_delay=0.002)
    reply.cut_after = 1 + len(text.split()) + 3  # role chunk, the words, the call's head and two argument pieces
    fake_llm.script(reply)
    events = await stream_turn(tusk, "s6", "find it")
    final = events[-1][1]["replies"][0]
    assert final == text.strip() + CUT_NOTE
    messages = saved(tusk, "s6")
    assert [m.role for m in messages] == ["user", "assistant"] and not any(m.tool_calls for m in messages)


async def test_a_stream_cut_before_anything_showed_is_retried(make_settings, fake_llm):
    """Cut inside a tool call before any text was shown: asked again whole, and the turn completes; the next
    request streams again."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})], cut_after=3),
                    Reply(text=None, tool_calls=[("c1", "current_time", {})]), Reply(text="It is late."))
    async with running(make_settings(TUSK_LLM_RETRIES="1")) as tusk:
        assert await tusk.say_streamed("s7", "time?") == ["It is late."]
        messages = saved(tusk, "s7")
        assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert violations(fake_llm.requests[-1]["messages"]) == []
        assert [b.get("stream", False) for b in fake_llm.requests] == [True, False, True]


async def test_the_timeout_bounds_the_whole_stream(make_settings, fake_llm):
    """A model that streams too slowly is cut at TUSK_LLM_TIMEOUT: what came is kept, with the note."""
    fake_llm.script(Reply(text=LONG, token_delay=0.03))
    async with running(make_settings(TUSK_LLM_TIMEOUT="1")) as tusk:
        started = time.monotonic()
        events = await stream_turn(tusk, "s8", "slow")
        assert time.monotonic() - started < 2
        assert events[-1][1]["replies"][0].endswith(CUT_NOTE)


async def test_stream_off_asks_for_one_whole_reply(make_settings, fake_llm):
    """TUSK_STREAM=off: no streamed request, and a streaming client still gets its `done`."""
    async with running(make_settings(TUSK_STREAM="off")) as tusk:
        fake_llm.script(Reply(text=LONG))
        events = await stream_turn(tusk, "s9", "hi")
        assert [e[0] for e in events] == ["done"] and events[0][1]["replies"] == [LONG]
        assert "stream" not in fake_llm.requests[-1]


def test_visible_text_hides_thoughts_and_half_tags():
    """What a draft may show: no closed or open `<think>` block, no tag still arriving."""
    assert visible("Hello <think>plan</think>world") == "Hello world"
    assert visible("Hello <thi") == "Hello"
    assert visible("Hello <think>secret") == "Hello"
    assert visible("a < b") == "a < b"


async def test_the_terminal_prints_the_reply_as_it_comes(make_settings, fake_llm):
    """`tusk chat`'s channel writes the reply while the model writes it, and ends on the saved text once."""
    import asyncio
    import io

    from bot.app import TuskApp
    from channels.terminal import TerminalChannel

    out = io.StringIO()
    lines = io.StringIO("tell me a lot\n")
    app = TuskApp(make_settings())
    terminal = app.add(TerminalChannel("t1", app.bus.publish, stdin=lines, stdout=out))
    fake_llm.script(Reply(text=LONG, token_delay=0.01))
    async with app:
        run = asyncio.create_task(terminal.run())
        await fake_llm.wait_for_requests(1)
        for _ in range(200):
            await asyncio.sleep(0.02)
            if "word20" in out.getvalue():
                break
        assert "word20" in out.getvalue() and "word79" not in out.getvalue()  # part of it, before the end
        await run
    assert out.getvalue().count(f"Tusk> {LONG}\n\n") == 1
    assert kept.on_disk(app, "terminal", "t1").unconsolidated[-1].content == LONG
