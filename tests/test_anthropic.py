"""Anthropic's Messages API end to end: real litellm against the fake's strict /v1/messages (anthropic_wire)."""

import base64
import json

import aiohttp
import pytest

from memory import files as memfiles
from tests.conftest import running
from tests.fakes import anthropic_wire
from tests.fakes.fake_llm import Reply, overflow_body
from tests.media_files import image_bytes
from tests.test_streaming import streamed_text
from tests import kept

MODEL = "anthropic/claude-sonnet-4-5"
KEY = "sk-ant-test-secret-key"
LONG = " ".join(f"word{i}" for i in range(60)) + "."


@pytest.fixture
def claude(make_settings, fake_llm):
    """Settings for an anthropic/ model whose API base is the fake (as a user points it at a proxy)."""
    fake_llm.api_keys = {KEY}
    return lambda **env: make_settings(**{"TUSK_MODEL": MODEL, "TUSK_API_BASE": fake_llm.root_url,
                                          "TUSK_API_KEY": KEY, **env})


def reload(tusk, chat):
    """The chat's unconsolidated messages read back from disk, as after a restart."""
    session = kept.on_disk(tusk, "http", chat)
    return kept.on_disk(tusk, "http", chat).unconsolidated


def blocks_of(body, role):
    return [b for m in body["messages"] if m["role"] == role and isinstance(m["content"], list) for b in m["content"]]


def clock(cid="toolu_01", **kw):
    return Reply(text=None, tool_calls=[(cid, "current_time", {})], **kw)


async def test_a_plain_reply_and_what_litellm_sends(claude, fake_llm):
    """A reply comes back; the request has Anthropic's headers, a top-level system, tools with input_schema."""
    async with running(claude()) as tusk:
        fake_llm.script(Reply(text="Hello from Claude."))
        assert await tusk.say("a1", "hi there") == ["Hello from Claude."]
    body, headers = fake_llm.requests[-1], fake_llm.headers[-1]
    assert headers["x-api-key"] == KEY and headers["anthropic-version"] == anthropic_wire.VERSION
    assert "authorization" not in headers
    system = body["system"] if isinstance(body["system"], str) else "".join(b["text"] for b in body["system"])
    assert "Tusk" in system and all(m["role"] in ("user", "assistant") for m in body["messages"])
    assert body["model"] == "claude-sonnet-4-5" and isinstance(body["max_tokens"], int)
    assert body["tools"] and all("input_schema" in t and "function" not in t for t in body["tools"])
    assert fake_llm.refusals == []


async def test_a_tool_step_and_the_next_turns_are_legal_after_a_restart(claude, fake_llm):
    """tool_use -> tool_result -> answer; the next turn, and one after a restart, are taken by the strict fake."""
    settings = claude()
    async with running(settings) as tusk:
        fake_llm.script(clock(), Reply(text="It is noon."))
        assert await tusk.say("a2", "what time is it?") == ["It is noon."]
        follow_up = fake_llm.requests[-1]
        (use,) = [b for b in blocks_of(follow_up, "assistant") if b["type"] == "tool_use"]
        (result,) = [b for b in blocks_of(follow_up, "user") if b["type"] == "tool_result"]
        assert use["input"] == {} and result["tool_use_id"] == use["id"]
        fake_llm.script(Reply(text="You're welcome."))
        assert await tusk.say("a2", "thanks") == ["You're welcome."]
        assert [m.role for m in reload(tusk, "a2")] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    async with running(settings) as tusk:
        fake_llm.script(Reply(text="Still here."))
        assert await tusk.say("a2", "and now?") == ["Still here."]
    assert fake_llm.refusals == [] and len(fake_llm.requests) == 4
    assert any(b["type"] == "tool_use" for b in blocks_of(fake_llm.requests[-1], "assistant"))


@pytest.mark.parametrize("stream", ["auto", "off"])
async def test_thinking_blocks_and_signatures_come_back_unchanged(claude, fake_llm, stream):
    """With TUSK_THINKING_BUDGET the signed thinking (and redacted) blocks go back with their tool step."""
    settings = claude(TUSK_THINKING_BUDGET="2048", TUSK_STREAM=stream)
    async with running(settings) as tusk:
        fake_llm.script(clock(reasoning="I should check the clock.", redacted="hidden plan"),
                        Reply(text="It is noon.", reasoning="Now answer."))
        assert await tusk.say_streamed("a3", "time?") == ["It is noon."]
        first = fake_llm.requests[0]
        assert first.get("stream", False) is (stream == "auto")
        assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048} and first["max_tokens"] > 2048
        step = next(m for m in reload(tusk, "a3") if m.tool_calls)
        assert [b["type"] for b in step.thinking_blocks] == ["thinking", "redacted_thinking"]
        assert step.thinking_blocks[0]["signature"] == anthropic_wire.sign("I should check the clock.")
        fake_llm.script(Reply(text="Bye."))
        await tusk.say("a3", "thanks")
    async with running(settings) as tusk:
        fake_llm.script(Reply(text="Hi again."))
        assert await tusk.say("a3", "hello") == ["Hi again."]
    assert fake_llm.refusals == [] and len(fake_llm.requests) == 4
    for body in fake_llm.requests[1:]:
        turn = next(m["content"] for m in body["messages"] if m["role"] == "assistant")
        assert [b["type"] for b in turn[:3]] == ["thinking", "redacted_thinking", "tool_use"]
        assert turn[0]["signature"] == anthropic_wire.sign(turn[0]["thinking"])
    assert "Now answer." not in json.dumps(fake_llm.requests[-1])


async def test_a_streamed_reply_shows_text_and_rebuilds_tool_calls(claude, fake_llm):
    """TUSK_STREAM=auto: text_delta reaches the HTTP client; input_json_delta pieces make the tool's arguments."""
    async with running(claude(TUSK_THINKING_BUDGET="1024")) as tusk:
        fake_llm.script(Reply(text=None, tool_calls=[("toolu_9", "search_history", {"query": "blue tea pots"})],
                              reasoning="Look it up."),
                        Reply(text=LONG, reasoning="Answer at length.", token_delay=0.002))
        url = f"{tusk.url}/v1/chats/a4/messages"
        events, name = [], None
        async with tusk.client.post(url, json={"text": "tell me", "stream": True}) as resp:
            async for raw in resp.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    events.append((name, json.loads(line[6:]), 0))
    assert all(b.get("stream") is True for b in fake_llm.requests) and fake_llm.refusals == []
    assert streamed_text(events) == LONG and events[-1][0] == "done"
    assert events[-1][1] == {"replies": [LONG], "formats": ["markdown"]}
    (use,) = [b for b in blocks_of(fake_llm.requests[1], "assistant") if b["type"] == "tool_use"]
    assert use["name"] == "search_history" and use["input"] == {"query": "blue tea pots"}
    thinking = blocks_of(fake_llm.requests[1], "assistant")[0]
    assert thinking == {"type": "thinking", "thinking": "Look it up.", "signature": anthropic_wire.sign("Look it up.")}


async def test_a_photo_goes_as_an_image_block_anthropic_takes(claude, fake_llm):
    """A photo reaches Claude as a base64 image block whose bytes match its media type (checked by the fake)."""
    from tests.test_media_turn import upload

    async with running(claude(TUSK_VISION="true")) as tusk:
        fake_llm.script(Reply(text="A red square."), Reply(text="Yes."))
        photo = image_bytes(3000, 2000, "PNG")
        assert await upload(tusk, "a14", ("sq.png", photo, "image/png"), text="what is this?") == ["A red square."]
        assert await tusk.say("a14", "is it red?") == ["Yes."]
    (image,) = [b for b in blocks_of(fake_llm.requests[0], "user") if b["type"] == "image"]
    assert image["source"]["type"] == "base64" and image["source"]["media_type"] in ("image/jpeg", "image/png")
    assert not [b for b in blocks_of(fake_llm.requests[1], "user") if b["type"] == "image"]
    assert fake_llm.refusals == []


async def test_stop_reasons_refusal_and_max_tokens(claude, fake_llm):
    """stop_reason "refusal" reads as the provider's filter; "max_tokens" keeps the text with the cut note."""
    async with running(claude()) as tusk:
        fake_llm.script(Reply(text=None, finish_reason="refusal"), Reply(text="The first half", finish_reason="length"))
        assert "content filter" in (await tusk.say("a15", "something"))[0]
        (cut,) = await tusk.say("a15", "go on")
    assert cut.startswith("The first half") and "cut off" in cut and fake_llm.refusals == []


async def test_overloaded_is_retried_then_answered(claude, fake_llm):
    """529 overloaded_error is retried per TUSK_LLM_RETRIES; past them the user gets one clear sentence."""
    async with running(claude(TUSK_LLM_RETRIES="2", TUSK_LLM_BACKOFF="0.01")) as tusk:
        fake_llm.script(Reply(status=529), Reply(status=529), Reply(text="Back again."))
        assert await tusk.say("a5", "hello") == ["Back again."]
        assert len(fake_llm.requests) == 3
        fake_llm.script(*[Reply(status=529)] * 3)
        (reply,) = await tusk.say("a5", "again")
    assert len(fake_llm.requests) == 6 and "unavailable" in reply and "overloaded" not in reply.lower()


async def test_overloaded_inside_a_stream_before_any_text_is_retried(claude, fake_llm):
    """An `error` event (overloaded_error) in the SSE before any text showed: the request is made again, whole;
    the next turn streams again (an outage says nothing of what the server can stream)."""
    async with running(claude(TUSK_LLM_RETRIES="1")) as tusk:
        fake_llm.script(Reply(text=LONG, error_after=2), Reply(text=LONG), Reply(text=LONG))
        assert await tusk.say_streamed("a12", "hello") == [LONG]
        assert await tusk.say_streamed("a12", "again") == [LONG]
    assert [b.get("stream", False) for b in fake_llm.requests] == [True, False, True]


async def test_rate_limited_honours_retry_after(claude, fake_llm):
    """429 rate_limit_error with retry-after: one retry after the server's pause, then the answer."""
    async with running(claude(TUSK_LLM_RETRIES="1", TUSK_LLM_BACKOFF="5")) as tusk:
        fake_llm.script(Reply(status=429, headers={"retry-after": "0"}), Reply(text="Fine."))
        assert await tusk.say("a6", "hello") == ["Fine."]
    assert fake_llm.arrivals[1] - fake_llm.arrivals[0] < 2


async def test_a_wrong_key_is_named_not_leaked(claude, fake_llm):
    """401 authentication_error: the user is told the key was refused; the key is in no reply."""
    async with running(claude(TUSK_API_KEY="sk-ant-wrong-key-1234")) as tusk:
        (reply,) = await tusk.say("a7", "hello")
    assert "API key" in reply and "sk-ant" not in reply and fake_llm.refusals == ["invalid x-api-key"]


async def test_an_unknown_claude_model_is_named(claude, fake_llm):
    """Anthropic's 404 not_found_error "model: x" tells the user the model is not known, not 'refused'."""
    fake_llm.claude_models = {"claude-sonnet-4-5"}
    async with running(claude(TUSK_MODEL="anthropic/claude-nonexistent-9")) as tusk:
        (reply,) = await tusk.say("a13", "hello")
    assert "does not know the model 'claude-nonexistent-9'" in reply and "TUSK_MODEL" in reply


async def test_prompt_too_long_teaches_the_window(claude, fake_llm):
    """Anthropic's 'prompt is too long: N tokens > M maximum': M is learned and the same turn answered."""
    async with running(claude()) as tusk:
        fake_llm.script(overflow_body("anthropic", 4096, 9000), Reply(text="Answered."))
        assert await tusk.say("a8", "hello") == ["Answered."]
        assert tusk.consolidator.budget.window == 4096
    learned = json.loads((tusk.settings.home / "models.json").read_text())
    assert learned[MODEL]["window"] == 4096


async def test_a_base_url_ending_in_v1_reaches_the_messages_api(claude, fake_llm):
    """TUSK_API_BASE=<server>/v1 (as other providers write it) still posts to /v1/messages, not /v1/v1/."""
    async with running(claude(TUSK_API_BASE=fake_llm.root_url + "/v1/")) as tusk:
        fake_llm.script(Reply(text="Reached."))
        assert await tusk.say("a9", "hi") == ["Reached."]


async def test_consolidation_over_the_anthropic_wire(claude, fake_llm):
    """A consolidation round forces save_memory (tool_choice tool), without thinking, and fills the files."""
    def respond(body):
        if any(t["function"]["name"] == "save_memory" for t in body["tools"]):
            return Reply(text=None, tool_calls=[("toolu_s", "save_memory", {
                "history_entry": "They talked about tea.", "memory_update": "- likes green tea"})])
        return Reply(text="noted " + LONG)
    fake_llm.responder = respond
    async with running(claude(TUSK_CONTEXT_WINDOW="2560", TUSK_THINKING_BUDGET="1024")) as tusk:
        for i in range(10):
            await tusk.say("a10", f"message {i}: {LONG}")
        await tusk.agent.until_idle()
        files = kept.files(tusk, "http", "a10")
        rounds = [b for b in fake_llm.requests if b.get("tool_choice", {}).get("type") == "tool"]
        assert rounds and rounds[0]["tool_choice"]["name"] == "save_memory" and "thinking" not in rounds[0]
        assert memfiles.read_memory(files) == "- likes green tea\n"
        assert "tea" in files.history.read_text()
    chat_turns = [b for b in fake_llm.requests if b.get("tool_choice", {}).get("type") != "tool"]  # rounds after, too
    assert chat_turns and all(b["thinking"]["type"] == "enabled" for b in chat_turns) and fake_llm.refusals == []


async def test_a_background_task_keeps_its_thinking(claude, fake_llm):
    """A start_task helper's own tool loop sends its signed thinking back with each step (a 400 otherwise)."""
    def respond(body):
        helper, last = body["messages"][0]["content"].startswith("You are a background helper"), body["messages"][-1]
        if helper:
            if last["role"] == "user":
                return clock("toolu_h", reasoning="Check the clock first.")
            return Reply(text="Report: it is noon.", reasoning="Report it.")
        if last["role"] == "user" and "look it up" in last["content"]:
            return Reply(text=None, tool_calls=[("toolu_t", "start_task", {"instructions": "Find the time."})],
                         reasoning="Delegate it.")
        return Reply(text="On it." if last["role"] == "tool" else "Done.", reasoning="Say so.")
    fake_llm.responder = respond
    async with running(claude(TUSK_THINKING_BUDGET="1024")) as tusk:
        assert await tusk.say("a11", "please look it up") == ["On it."]
        await fake_llm.wait_for_requests(5)  # the turn, its helper's two requests, the turn with the report
    helper_steps = [b for b in fake_llm.requests if b["system"] and "background helper" in json.dumps(b["system"])]
    assert len(helper_steps) == 2 and fake_llm.refusals == []
    assert blocks_of(helper_steps[1], "assistant")[0]["thinking"] == "Check the clock first."


def test_the_thinking_budget_setting(make_settings):
    """TUSK_THINKING_BUDGET: blank is off; under Anthropic's least budget is refused naming the variable."""
    from bot.errors import ConfigError

    assert make_settings(TUSK_THINKING_BUDGET=" ").llm_settings().thinking_budget is None
    assert make_settings(TUSK_THINKING_BUDGET="4096").llm_settings().thinking_budget == 4096
    with pytest.raises(ConfigError, match="TUSK_THINKING_BUDGET"):
        make_settings(TUSK_THINKING_BUDGET="500")


async def post(fake_llm, body, key=KEY):
    headers = {"x-api-key": key, "anthropic-version": anthropic_wire.VERSION}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{fake_llm.root_url}/v1/messages", json=body, headers=headers) as resp:
            return resp.status, await resp.json()


USE = {"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "noon"}
THOUGHT = {"type": "thinking", "thinking": "check", "signature": anthropic_wire.sign("check")}


@pytest.mark.parametrize("change, words", [
    ({"max_tokens": None}, "max_tokens: Field required"),
    ({"messages": [{"role": "assistant", "content": "hi"}]}, "first message"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}, "alternate"),
    ({"messages": [{"role": "user", "content": [RESULT]}]}, "unexpected `tool_use_id`"),
    ({"messages": [{"role": "user", "content": "t"}, {"role": "assistant", "content": [USE]},
                   {"role": "user", "content": "no result"}]}, "without `tool_result`"),
    ({"messages": [{"role": "user", "content": "t"}, {"role": "assistant", "content": [{**USE, "input": "{}"}]},
                   {"role": "user", "content": [RESULT]}]}, "valid dictionary"),
    ({"thinking": {"type": "enabled", "budget_tokens": 2048},
      "messages": [{"role": "user", "content": "t"}, {"role": "assistant", "content": [USE]},
                   {"role": "user", "content": [RESULT]}]}, "must start with a thinking block"),
    ({"thinking": {"type": "enabled", "budget_tokens": 2048},
      "messages": [{"role": "user", "content": "t"},
                   {"role": "assistant", "content": [{**THOUGHT, "thinking": "changed"}, USE]},
                   {"role": "user", "content": [RESULT]}]}, "Invalid `signature`"),
    ({"thinking": {"type": "enabled", "budget_tokens": 2048}, "tool_choice": {"type": "tool", "name": "x"}},
     "forces tool use"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/png",
        "data": base64.b64encode(image_bytes(20, 20, "JPEG")).decode()}}]}]},
     "does not match the provided media type image/png"),
])
async def test_the_fake_refuses_what_anthropic_refuses(fake_llm, change, words):
    """Each rule of the real API gets its 400 invalid_request_error, and takes nothing from the script."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}
    body = {k: v for k, v in {**body, **change}.items() if v is not None}
    fake_llm.script(Reply(text="scripted"))
    status, answer = await post(fake_llm, body)
    assert status == 400 and answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error"
    assert words in answer["error"]["message"]
    ok = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048},
          "messages": [{"role": "user", "content": "t"}, {"role": "assistant", "content": [THOUGHT, USE]},
                       {"role": "user", "content": [RESULT]}]}
    status, answer = await post(fake_llm, ok)
    assert status == 200 and answer["content"] == [{"type": "text", "text": "scripted"}]
    assert answer["stop_reason"] == "end_turn" and answer["usage"]["input_tokens"] > 0
