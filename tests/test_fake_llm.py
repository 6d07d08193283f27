"""The fake LLM server, driven through real litellm over 127.0.0.1."""

import asyncio
import json
import os
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import aiohttp
import litellm
import pytest

from tests.fakes.fake_llm import FakeLLM, Reply

litellm.suppress_debug_info = True
ONE_SHOT = {"num_retries": 0, "max_retries": 0}  # exactly one HTTP request per call


@pytest.fixture
async def llm():
    async with FakeLLM() as server:
        yield server


async def ask(llm: FakeLLM, text: str = "hello", **kwargs):
    return await litellm.acompletion(model="openai/fake-model", api_base=llm.base_url, api_key="sk-test",
                                     messages=[{"role": "user", "content": text}], **{**ONE_SHOT, **kwargs})


async def test_default_reply_echoes_last_user_text(llm):
    """With nothing scripted the fake echoes the last user message, string or text parts."""
    resp = await ask(llm, "hi there")
    assert resp.choices[0].message.content == "echo: hi there"
    assert resp.choices[0].finish_reason == "stop" and resp.usage.total_tokens > 0
    parts = [{"type": "text", "text": "from parts"}]
    resp = await litellm.acompletion(model="openai/fake-model", api_base=llm.base_url, api_key="sk-test",
                                     messages=[{"role": "user", "content": parts}], **ONE_SHOT)
    assert resp.choices[0].message.content == "echo: from parts"


async def test_scripted_text_then_responder(llm):
    """Scripted replies are used FIFO, then the responder, and every body is recorded in order."""
    llm.script(Reply(text="first"), Reply(text="second"))
    llm.responder = lambda body: Reply(text=f"model={body['model']}")
    got = [(await ask(llm, f"q{i}")).choices[0].message.content for i in range(3)]
    assert got == ["first", "second", "model=fake-model"]
    assert [r["messages"][-1]["content"] for r in llm.requests] == ["q0", "q1", "q2"]
    assert llm.requests[0]["model"] == "fake-model"


async def test_tool_call_arguments_round_trip(llm):
    """A scripted tool call arrives in OpenAI format with the arguments parsed back to the dict."""
    llm.script(Reply(text=None, tool_calls=[("call_1", "current_time", {"timezone": "Asia/Tokyo"}),
                                            ("call_2", "broken", "{not json")]))
    tools = [{"type": "function", "function": {"name": "current_time", "parameters": {"type": "object"}}}]
    resp = await ask(llm, tools=tools)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    first, second = choice.message.tool_calls
    assert (first.id, first.function.name) == ("call_1", "current_time")
    assert json.loads(first.function.arguments) == {"timezone": "Asia/Tokyo"}
    assert second.function.arguments == "{not json"
    assert llm.requests[0]["tools"] == tools


async def test_streaming_text_and_tool_calls(llm):
    """Streamed text assembles from several chunks; streamed tool calls rebuild into full calls."""
    llm.script(Reply(text="Hello streaming world"), Reply(text=None, tool_calls=[("c9", "lookup", {"q": 1})]))
    chunks = [c async for c in await ask(llm, stream=True)]
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) >= 2 and "".join(pieces) == "Hello streaming world"
    chunks = [c async for c in await ask(llm, stream=True)]
    full = litellm.stream_chunk_builder(chunks)
    call = full.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("c9", "lookup", {"q": 1})


async def test_errors_surface_as_litellm_exceptions(llm):
    """A 500 and a 429 (with Retry-After) raise litellm's exceptions after exactly one request each."""
    llm.script(Reply(status=500), Reply(status=429, headers={"Retry-After": "3"}))
    with pytest.raises(litellm.InternalServerError):
        await ask(llm)
    with pytest.raises(litellm.RateLimitError) as info:
        await ask(llm)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "3"
    assert info.value.litellm_response_headers["retry-after"] == "3"
    assert len(llm.requests) == 2


async def test_timeout_and_broken_body(llm):
    """A slow reply trips the caller's timeout; a non-JSON 200 body is an error, not a crash."""
    llm.script(Reply(delay=2), Reply(raw_body="not json"))
    with pytest.raises(litellm.Timeout):
        await ask(llm, timeout=0.5)
    with pytest.raises(litellm.InternalServerError):
        await ask(llm)
    assert len(llm.requests) == 2


async def test_concurrent_delayed_requests(llm):
    """Twenty parallel calls with a 1 s delay each finish together: far sooner than the 20 s in a row."""
    llm.responder = lambda body: Reply(text="slow", delay=1.0)
    start = time.monotonic()
    results = await asyncio.gather(*(ask(llm, f"n{i}") for i in range(20)))
    assert time.monotonic() - start < 8
    assert [r.choices[0].message.content for r in results] == ["slow"] * 20
    await llm.wait_for_requests(20, timeout=0.1)


async def test_wait_for_requests_and_other_routes(llm):
    """wait_for_requests times out when short; /v1/models lists a model; unknown paths are 404."""
    with pytest.raises(TimeoutError):
        await llm.wait_for_requests(1, timeout=0.05)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{llm.base_url}/models") as resp:
            assert resp.status == 200 and (await resp.json())["data"][0]["id"] == "fake-model"
        async with http.post(f"{llm.base_url}/embeddings", json={}) as resp:
            assert resp.status == 404
        async with http.get(f"{llm.base_url}/chat/completions") as resp:
            assert resp.status == 405  # the route exists, for POST only
    assert llm.base_url.startswith("http://127.0.0.1:") and llm.base_url.endswith("/v1")
