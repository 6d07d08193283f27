"""What real providers send: each shape gets a sensible answer or a clear error, and the next request is legal.
Each shape is sent both ways: as one whole reply and streamed (the `tusk` fixture below).

Every request the fake LLM receives in these tests is checked with tests/legality.py (roles, pairing, and
well-formed tool calls), and each chat's session is reloaded from disk before the next turn.
"""

import json
import re
import time

import pytest

from bot.errors import ContextOverflow, LLMError, LLMFiltered
from memory.session import load
from tests import procs
from tests.conftest import running
from tests.fakes.fake_llm import OVERFLOW_BODIES, Reply, overflow_body
from tests.legality import violations
from tests import kept


@pytest.fixture(params=["whole", "streamed"])
async def tusk(make_settings, request):
    """Each shape both ways: asked for plainly (one whole reply) and over SSE (the model streams it)."""
    async with running(make_settings()) as app:
        if request.param == "streamed":
            app.say = app.say_streamed
        yield app


def assert_all_legal(fake_llm):
    for body in fake_llm.requests:
        assert violations(body["messages"]) == [], json.dumps(body["messages"])[:2000]


def reload(tusk, chat):
    """Drop the cached session and read it from disk, as after a restart."""
    session = kept.on_disk(tusk, "http", chat)
    return kept.on_disk(tusk, "http", chat)


def call(name, args, cid="call_0"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


async def test_empty_and_reused_ids_never_collide(tusk, fake_llm):
    """A provider that sends "" or `call_0` every turn: Tusk's own ids are unique in every later request."""
    for cid in ("", "call_0", "call_0"):
        fake_llm.script(Reply(message={"role": "assistant", "content": None,
                                       "tool_calls": [call("current_time", "{}", cid)]}), Reply(text="done"))
        assert await tusk.say("ids", "time?") == ["done"]
        reload(tusk, "ids")
    await tusk.say("ids", "and now?")
    ids = [c["id"] for m in fake_llm.requests[-1]["messages"] for c in m.get("tool_calls") or []]
    assert len(ids) == 3 == len(set(ids)) and all(ids)
    assert_all_legal(fake_llm)


async def test_arguments_as_an_object_are_serialised(tusk, fake_llm):
    """An arguments object (not a string) runs the tool and is stored as JSON text."""
    fake_llm.script(Reply(message={"role": "assistant", "content": None,
                                   "tool_calls": [call("current_time", {"timezone": "Asia/Tokyo"})]}),
                    Reply(text="late"))
    assert await tusk.say("obj", "time?") == ["late"]
    step, result = fake_llm.requests[1]["messages"][-2:]
    assert json.loads(step["tool_calls"][0]["function"]["arguments"]) == {"timezone": "Asia/Tokyo"}
    assert "JST" in result["content"]
    assert_all_legal(fake_llm)


async def test_invalid_json_is_stored_as_empty_object_with_the_raw_text_in_the_error(tusk, fake_llm):
    """Broken arguments: the call is stored with {} and the tool result quotes what the model wrote."""
    fake_llm.script(Reply(tool_calls=[("c", "current_time", '{"timezone": "Asia/Tok')], text=None),
                    Reply(text="sorry"))
    assert await tusk.say("bad", "time?") == ["sorry"]
    saved = reload(tusk, "bad").unconsolidated
    assert saved[1].tool_calls[0]["function"]["arguments"] == "{}"
    assert '{"timezone": "Asia/Tok' in saved[2].content and saved[2].content.startswith("Error")
    await tusk.say("bad", "again")
    assert_all_legal(fake_llm)


TOKYO = re.compile(r"\w+day \d{4}-\d\d-\d\d \d\d:\d\d:\d\d JST \(UTC\+0900\)")


@pytest.mark.parametrize("raw", ['  ```json\n{"timezone": "Asia/Tokyo",}\n```  ',
                                 '{"timezone": "Asia/Tokyo\t"}',
                                 '"{\\"timezone\\": \\"Asia/Tokyo\\"}"'])
async def test_arguments_as_servers_write_them_are_read(tusk, fake_llm, raw):
    """A code fence, a trailing comma, a raw tab inside a string, double encoding: the tool runs (with the
    string as sent: a time zone with a tab in it is one it does not know)."""
    fake_llm.script(Reply(tool_calls=[("c", "current_time", raw)], text=None), Reply(text="ok"))
    await tusk.say("lenient", "time?")
    result = fake_llm.requests[1]["messages"][-1]["content"]
    if "\t" in raw:
        assert result == "Error: ValueError: unknown time zone 'Asia/Tokyo\\t'"
    else:
        assert TOKYO.fullmatch(result), result
    assert_all_legal(fake_llm)


async def test_prefixed_name_is_repaired_and_nameless_call_dropped(tusk, fake_llm):
    """`functions.current_time` runs current_time; a call with no name disappears with nothing stored for it."""
    fake_llm.script(Reply(message={"role": "assistant", "content": "checking", "tool_calls": [
        call("functions.current_time", "{}", "a"), {"id": "b", "type": "function", "function": {"arguments": "{}"}}]}),
        Reply(text="it is now"))
    assert await tusk.say("names", "time?") == ["it is now"]
    step = fake_llm.requests[1]["messages"][-2]
    assert [c["function"]["name"] for c in step["tool_calls"]] == ["current_time"]
    await tusk.say("names", "thanks")
    assert_all_legal(fake_llm)


async def test_reasoning_of_tool_steps_is_sent_back_and_never_shown(tusk, fake_llm):
    """DeepSeek's rule: reasoning_content of a tool-call step goes back in every later request; a plain
    reply's reasoning is neither stored nor shown."""
    fake_llm.script(Reply(tool_calls=[("c", "current_time", {})], text=None, reasoning="I should check the clock"),
                    Reply(text="It is noon.", reasoning="Now answer briefly"))
    assert await tusk.say("think", "time?") == ["It is noon."]
    await tusk.say("think", "thanks")
    sent = fake_llm.requests[-1]["messages"]
    steps = [m for m in sent if m.get("tool_calls")]
    assert steps[0]["reasoning_content"] == "I should check the clock"
    assert "Now answer briefly" not in json.dumps(sent)
    saved = reload(tusk, "think").unconsolidated
    assert saved[1].reasoning == "I should check the clock" and saved[1].tokens > 0
    assert all(m.reasoning is None for m in saved if not m.tool_calls)
    assert_all_legal(fake_llm)


async def test_anthropic_thinking_blocks_come_back_with_their_tool_call(tusk, fake_llm):
    """Signed thinking blocks stored with a tool step are sent back unmodified."""
    block = {"type": "thinking", "thinking": "use the clock", "signature": "sig-123"}
    fake_llm.script(Reply(message={"role": "assistant", "content": None, "thinking_blocks": [block],
                                   "tool_calls": [call("current_time", "{}", "toolu_01")]}), Reply(text="noon"))
    await tusk.say("blocks", "time?")
    assert reload(tusk, "blocks").unconsolidated[1].thinking_blocks == (block,)
    await tusk.say("blocks", "ok")
    step = next(m for m in fake_llm.requests[-1]["messages"] if m.get("tool_calls"))
    assert step["thinking_blocks"] == [block]


async def test_think_blocks_leave_the_reply(tusk, fake_llm):
    """`<think>` in the content, closed or not, never reaches the user or the session."""
    fake_llm.script(Reply(text="<think>the user wants a greeting</think>Hello!"),
                    Reply(text="Sure.<think>unfinished thoughts"))
    assert await tusk.say("tb", "hi") == ["Hello!"]
    assert await tusk.say("tb", "more") == ["Sure."]
    assert "thoughts" not in reload(tusk, "tb").files.session.read_text() and "greeting" not in \
        reload(tusk, "tb").files.session.read_text()


async def test_content_as_a_list_of_parts_is_read_as_text(tusk, fake_llm):
    """Content given as parts (thinking and text) is answered with its text, not 'unavailable'."""
    fake_llm.script(Reply(message={"role": "assistant", "content": [
        {"type": "thinking", "thinking": [{"type": "text", "text": "plan"}]},
        {"type": "text", "text": "Part one, "}, {"type": "text", "text": "part two."}]}))
    assert await tusk.say("parts", "hi") == ["Part one, part two."]
    assert "plan" not in reload(tusk, "parts").files.session.read_text()


async def test_a_reply_cut_by_length_says_so_and_is_saved_so(tusk, fake_llm):
    """finish_reason length: the text arrives with a visible note, and the session holds what the user saw."""
    fake_llm.script(Reply(text="The first three steps are", finish_reason="length"))
    (reply,) = await tusk.say("cut", "explain")
    assert reply.startswith("The first three steps are") and "cut off" in reply
    assert reload(tusk, "cut").unconsolidated[-1].content == reply


async def test_a_tool_call_cut_inside_its_arguments_is_asked_again_once(tusk, fake_llm):
    """Cut inside the arguments: that step is dropped and the request repeated once."""
    fake_llm.script(Reply(tool_calls=[("c", "current_time", '{"timez')], text=None, finish_reason="length"),
                    Reply(tool_calls=[("c", "current_time", {})], text=None), Reply(text="noon"))
    assert await tusk.say("cutcall", "time?") == ["noon"]
    assert len(fake_llm.requests) == 3 and fake_llm.requests[0]["messages"] == fake_llm.requests[1]["messages"]
    assert [m.role for m in reload(tusk, "cutcall").unconsolidated] == ["user", "assistant", "tool", "assistant"]
    assert_all_legal(fake_llm)


@pytest.mark.parametrize("reply", [Reply(choices=[]), Reply(text=None, finish_reason="content_filter")])
async def test_filtered_replies_say_so(tusk, fake_llm, reply):
    """No choices, or a content-filter stop with nothing said: the user hears it was the filter (a stream with
    no choices is asked again whole, and the provider filters that too)."""
    await tusk.say("filt", "first")
    before = reload(tusk, "filt").files.session.read_bytes()
    fake_llm.script(reply, reply)
    assert await tusk.say("filt", "something") == [LLMFiltered.user_message]
    assert reload(tusk, "filt").files.session.read_bytes() == before


async def test_an_error_object_in_a_200_is_an_error(tusk, fake_llm):
    """A 200 whose body is an error is not a reply: the user hears the model is unavailable (streamed, the broken
    stream is asked again whole, and the proxy answers that with the same error)."""
    error = Reply(raw_body=json.dumps({"error": {"message": "upstream overloaded", "code": 502}}))
    fake_llm.script(error, error)
    assert await tusk.say("err200", "hi") == [LLMError("").owner_message]  # the console hears the doctor hint too


async def test_a_trickling_body_cannot_hold_the_turn_past_the_timeout(make_settings, fake_llm):
    """TUSK_LLM_TIMEOUT bounds the whole request, body included."""
    from bot.llm import LLM

    fake_llm.script(Reply(text="x" * 400, trickle=0.2))
    async with LLM(make_settings(TUSK_LLM_TIMEOUT=1).llm_settings()) as llm:
        started = time.monotonic()
        with pytest.raises(LLMError):
            await llm.complete([{"role": "user", "content": "hi"}])
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("vendor", sorted(OVERFLOW_BODIES))
async def test_context_overflow_teaches_the_window_and_the_turn_is_answered(make_settings, fake_llm, vendor):
    """Each server's 'prompt too long': Tusk learns a smaller window, keeps it in models.json, trims or
    consolidates, and answers the same turn."""
    from tests.conftest import running

    async with running(make_settings()) as tusk:
        before = tusk.consolidator.budget.window
        fake_llm.script(overflow_body(vendor, 4096, 9000))
        (reply,) = await tusk.say("big", "hello")
        assert reply.startswith("echo: ") and reply.endswith("hello") and len(fake_llm.requests) == 2
        window = tusk.consolidator.budget.window
        named = vendor != "ollama"  # Ollama says by how much, not the window: a step down
        assert window == (4096 if named else int(before * 0.75))
        learned = json.loads((tusk.settings.home / "models.json").read_text())
        assert learned["openai/fake-model"]["window"] == window
        assert "learned" in (await tusk.say("big", "/status"))[0]
        assert_all_legal(fake_llm)


async def test_a_learned_window_survives_a_restart(make_settings, fake_llm):
    """The next start budgets for the learned window without a new overflow."""
    from tests.conftest import running

    settings = make_settings()
    async with running(settings) as tusk:
        fake_llm.script(overflow_body("vllm", 3000, 9000))
        await tusk.say("r", "hi")
    async with running(settings) as tusk:
        assert tusk.consolidator.budget.window == 3000 and tusk.consolidator.budget.source == "learned"


async def test_an_unknown_model_asks_its_server_for_the_window(make_settings, fake_llm):
    """vLLM's /v1/models max_model_len is used when litellm does not know the model."""
    from tests.conftest import running

    fake_llm.models = [{"id": "fake-model", "object": "model", "max_model_len": 8192}]
    async with running(make_settings()) as tusk:
        assert tusk.consolidator.budget.window == 8192 and "max_model_len" not in tusk.consolidator.budget.source
        assert "/v1/models" in tusk.consolidator.budget.source
        assert "8,192" in (await tusk.say("s", "/status"))[0]


async def test_overflow_with_nothing_left_to_cut_is_a_clear_error(make_settings, fake_llm):
    """A server that always says 'too long' ends in one clear sentence, not a stuck loop."""
    from tests.conftest import running

    async with running(make_settings()) as tusk:
        fake_llm.responder = lambda body: overflow_body("openai", 1024, 5000)
        (reply,) = await tusk.say("stuck", "hello")
        assert reply == ContextOverflow.user_message or "does not fit in the model's window" in reply
        assert len(fake_llm.requests) <= 8


def test_impossible_pointers_hide_nothing(tmp_path):
    """A pointer past the end or not an integer is skipped; the last valid one wins."""
    from memory.session import Message, SessionStore

    store = SessionStore(tmp_path)
    s = store.get("http", "p")
    store.append(s, [Message("user", "a"), Message("assistant", "b")])
    store.set_pointer(s, 2)
    store.append(s, [Message("user", "c"), Message("assistant", "d")])
    with open(s.files.session, "a") as fh:
        for bad in (99, "3", 2.5, True, -1):
            fh.write(json.dumps({"record": "pointer", "last_consolidated": bad}) + "\n")
    loaded = load(s.files, "http", "p")
    assert [m.content for m in loaded.unconsolidated] == ["c", "d"] and loaded.last_consolidated == 2


async def test_provider_quirks_through_tusk_run(fake_llm, tmp_path):
    """A real `tusk run` process: parts content, reused ids with reasoning, and an overflow are each answered,
    the window is learned into models.json, and every request the fake saw is legal."""
    import asyncio
    import signal
    import sys

    import aiohttp

    from tests.test_cli import env_for

    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TUSK_HTTP_TOKEN="t" * 32)
    fake_llm.script(
        Reply(message={"role": "assistant", "content": [{"type": "text", "text": "from parts"}]}),
        Reply(message={"role": "assistant", "content": None, "reasoning_content": "clock first",
                       "tool_calls": [call("current_time", {}, "call_0")]}), Reply(text="noon"),
        overflow_body("vllm", 5000, 9000), Reply(text="still here"))
    proc = await procs.start_tusk("run", env=env, cwd=tmp_path,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        url = "http://" + line.split("http://", 1)[1].split()[0]
        replies = []
        async with aiohttp.ClientSession(headers={"Authorization": "Bearer " + "t" * 32, "Origin": url}) as client:
            for text in ("hi", "time?", "more"):
                async with client.post(f"{url}/v1/chats/q/messages", json={"text": text}) as resp:
                    replies += (await resp.json())["replies"]
        assert replies == ["from parts", "noon", "still here"]
        assert json.loads((tmp_path / "data" / "models.json").read_text())["openai/fake-model"]["window"] == 5000
        assert_all_legal(fake_llm)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
