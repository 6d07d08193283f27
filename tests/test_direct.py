"""The direct client (bot/llm/direct.py) against litellm's path: the same request on the wire, the same reply
read, the same Tusk error, for each shape the fake OpenAI-compatible server sends as real servers do."""

import dataclasses
import json
import socket
import sqlite3

import pytest

from bot.errors import (ContextOverflow, LLMAuthFailed, LLMError, LLMFiltered, LLMRejected, LLMUnavailable,
                        LLMUnreachable, ModelNotFound, ToolsUnsupported)
from bot.llm import LLM, LLMSettings, load_litellm
from bot.llm.direct import route
from bot.stream import Live
from tests.fakes.fake_llm import OVERFLOW_BODIES, Reply, overflow_body

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "hi", "name": "bob"},
    {"role": "assistant", "content": None, "reasoning_content": "they greet",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "current_time", "arguments": "{}"},
                     "provider_specific_fields": {"thought_signature": "x"}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "current_time", "content": "noon"},
    {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
]
TOOLS = [{"type": "function", "function": {"name": "current_time", "description": "The time.",
                                           "parameters": {"type": "object", "properties": {}}}}]

REPLIES = {
    "text": Reply(text="hello there, friend"),
    "tool calls": Reply(text=None, tool_calls=[("a", "current_time", {}), ("b", "remember", {"fact": "x"})]),
    "arguments as an object": Reply(message={"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "remember", "arguments": {"fact": "tea"}}}]}),
    "reasoning_content": Reply(text="42", reasoning="thinking hard"),
    "reasoning (OpenRouter's name)": Reply(message={"role": "assistant", "content": "42", "reasoning": "hmm"}),
    "think block": Reply(text="<think>let me see</think>The answer is 4."),
    "content as parts": Reply(message={"role": "assistant", "content": [
        {"type": "thinking", "thinking": "first"}, {"type": "text", "text": "part one, "},
        {"type": "text", "text": "part two"}]}),
    "thinking blocks": Reply(message={"role": "assistant", "content": None, "thinking_blocks": [
        {"type": "thinking", "thinking": "use the clock", "signature": "sig-1"}], "tool_calls": [
        {"id": "t", "type": "function", "function": {"name": "current_time", "arguments": "{}"}}]}),
    "cut at the limit": Reply(text="a long", finish_reason="length"),
    "eos finish": Reply(text="done", finish_reason="eos"),
    "cached tokens": Reply(text="ok", usage={"prompt_tokens": 90, "completion_tokens": 3, "total_tokens": 93,
                                             "prompt_tokens_details": {"cached_tokens": 64}}),
}


def llm_for(fake, direct: bool, **settings) -> LLM:
    load_litellm().result()  # litellm's path needs it loaded (until then every path is the direct one)
    llm = LLM(LLMSettings(model="openai/fake-model", api_base=fake.base_url, api_key="sk-test", retries=0,
                          **settings))
    llm.direct = direct
    return llm


def same(reply):
    """A reply's fields but the tool call ids (Tusk's own, new each time)."""
    fields = dataclasses.asdict(reply)
    fields["tool_calls"] = [{k: v for k, v in c.items() if k != "id"} for c in fields["tool_calls"]]
    return fields


async def both(fake, reply_or_script, stream=False, **options):
    """(litellm's outcome, the direct client's outcome, the two request bodies): a reply or the error raised."""
    outcomes = []
    for direct in (False, True):
        fake.script(*(reply_or_script if isinstance(reply_or_script, list) else [reply_or_script]))
        fake.requests.clear()
        async with llm_for(fake, direct) as llm:
            try:
                got = await llm.complete(MESSAGES, TOOLS, live=Live(None) if stream else None, **options)
                outcomes.append(same(got))
            except LLMError as exc:
                outcomes.append(exc)
        outcomes.append(list(fake.requests))
    return outcomes[0], outcomes[2], (outcomes[1], outcomes[3])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("name", list(REPLIES))
async def test_the_same_reply_on_both_paths(fake_llm, name, stream):
    """Each reply shape comes out of the direct client as it does out of litellm, sent as the same request."""
    through_litellm, direct, (sent_litellm, sent_direct) = await both(fake_llm, REPLIES[name], stream,
                                                                      temperature=0, max_tokens=300)
    assert not isinstance(through_litellm, LLMError), through_litellm
    assert direct == through_litellm
    assert sent_direct == sent_litellm and len(sent_direct) == 1


async def test_a_forced_tool_choice_is_sent_alike(fake_llm):
    """A consolidation-style request (one tool forced, temperature 0) is the same body on both paths."""
    forced = {"type": "function", "function": {"name": "current_time"}}
    through_litellm, direct, (sent_litellm, sent_direct) = await both(
        fake_llm, Reply(text=None, tool_calls=[("a", "current_time", {})]), tool_choice=forced, temperature=0)
    assert direct == through_litellm and sent_direct == sent_litellm
    assert sent_direct[0]["tool_choice"] == forced and sent_direct[0]["temperature"] == 0


ERRORS = {  # name: (what the server sends, the Tusk error it must be)
    **{f"overflow ({vendor})": (overflow_body(vendor, 2048, 3000), ContextOverflow) for vendor in OVERFLOW_BODIES
       if vendor not in ("anthropic", "gemini")},
    "bad key": (Reply(status=401, raw_body=json.dumps({"error": {"message": "Incorrect API key provided",
                                                                 "type": "invalid_request_error",
                                                                 "code": "invalid_api_key"}})), LLMAuthFailed),
    "rate limited": (Reply(status=429, headers={"Retry-After": "7"}), LLMUnavailable),
    "server error": (Reply(status=500), LLMUnavailable),
    "unknown model": (Reply(status=404, raw_body=json.dumps({"error": {
        "message": "The model `nope` does not exist or you do not have access to it.",
        "type": "invalid_request_error", "code": "model_not_found"}})), ModelNotFound),
    "tools refused": (Reply(status=400, raw_body=json.dumps({"error": {
        "message": "registry.ollama.ai/library/gemma:2b does not support tools", "type": "api_error"}})),
        ToolsUnsupported),
    "content policy": (Reply(status=400, raw_body=json.dumps({"error": {
        "message": "Your request was rejected as a result of our safety system.",
        "type": "invalid_request_error", "code": "content_policy_violation"}})), LLMRejected),
    "bad request": (Reply(status=400, raw_body=json.dumps({"error": {"message": "messages: bad role",
                                                                     "type": "invalid_request_error"}})), LLMRejected),
    "filtered, no choices": (Reply(choices=[]), LLMFiltered),
    "filtered, content_filter": (Reply(text=None, finish_reason="content_filter"), LLMFiltered),
    "error object in a 200": (Reply(raw_body=json.dumps({"error": {"message": "upstream failed", "code": 502}})),
                              LLMUnavailable),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("name", list(ERRORS))
async def test_the_same_error_on_both_paths(fake_llm, name, stream):
    """Each failure a server sends becomes the same Tusk error (kind, retry delay, window named) on both paths."""
    reply, kind = ERRORS[name]
    script = [reply, dataclasses.replace(reply)] if stream else [reply]  # a stream that failed is asked again whole
    through_litellm, direct, _ = await both(fake_llm, script, stream)
    assert isinstance(through_litellm, kind), through_litellm
    assert type(direct) is type(through_litellm)
    for attribute in ("window", "retry_after", "status"):
        assert getattr(direct, attribute, None) == getattr(through_litellm, attribute, None), attribute
    fake_llm._script.clear()


@pytest.mark.parametrize("quirk", ["llamacpp", "drops_streamed_calls", "ignores_stream", "html", "parts_in_deltas",
                                   "one_chunk", "error_in_stream"])
async def test_a_servers_stream_quirks_are_read_alike(fake_llm, quirk):
    """The ways real servers break streams (tests/fakes/fake_llm.py's quirks) end the same on both paths."""
    fake_llm.quirk, fake_llm.window = quirk, 40
    reply = Reply(text="word " * 30, tool_calls=[("a", "current_time", {})]) if quirk != "error_in_stream" else \
        Reply(raw_body=json.dumps({"error": {"message": "boom", "code": 500}}), status=500)
    outcomes = []
    for direct in (False, True):
        fake_llm.script(reply, dataclasses.replace(reply))
        async with llm_for(fake_llm, direct) as llm:
            try:
                outcomes.append(same(await llm.complete(MESSAGES, TOOLS, live=Live(None))))
            except LLMError as exc:
                outcomes.append((type(exc), getattr(exc, "window", None)))
            outcomes.append(dict(llm.no_stream))
        fake_llm._script.clear()
    assert outcomes[2:] == outcomes[:2]


async def test_no_connection_is_unreachable_on_both_paths():
    """Nothing listening at the base URL: LLMUnreachable, "connection refused", with the address, on both."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    errors = []
    load_litellm().result()
    for direct in (False, True):
        llm = LLM(LLMSettings(model="openai/m", api_base=f"http://127.0.0.1:{port}/v1", retries=0))
        llm.direct = direct
        with pytest.raises(LLMUnreachable) as caught:
            await llm.complete(MESSAGES)
        await llm.aclose()
        errors.append((caught.value.reason, caught.value.where, caught.value.user_message))
    assert errors[0] == errors[1] and errors[1][0] == "connection refused"


async def test_retries_and_the_ledger_are_the_same_on_the_direct_path(fake_llm, tmp_path):
    """The direct path is retried as litellm's is (a 503 then an answer) and metered once, with the server's count."""
    from bot.usage.ledger import Ledger
    from bot.usage.meter import Meter

    fake_llm.script(Reply(status=503), Reply(text="fine", usage={"prompt_tokens": 11, "completion_tokens": 2,
                                                                 "total_tokens": 13}))
    ledger = Ledger(tmp_path)
    llm = llm_for(fake_llm, True, backoff=0.01)
    llm.settings = dataclasses.replace(llm.settings, retries=1)
    llm.meter = Meter(ledger)
    reply = await llm.complete(MESSAGES)
    await llm.aclose()
    assert reply.content == "fine" and len(fake_llm.requests) == 2 and fake_llm.agents == ["tusk-direct"] * 2
    ledger.close()
    with sqlite3.connect(tmp_path / "usage.sqlite") as db:
        rows = db.execute("SELECT model, input_tokens, output_tokens, estimated FROM calls").fetchall()
    assert rows == [("openai/fake-model", 11, 2, 0)]


def test_which_models_go_direct(monkeypatch):
    """The openai/ route goes direct (its base URL, else OPENAI_BASE_URL, else OpenAI's); the o-series and gpt-5,
    which litellm rewrites (max_completion_tokens, no temperature), and other routes wait for litellm."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    assert route("openai/tiny", "http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    assert route("openai/gpt-4o-mini", None) == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy:4000/v1")
    assert route("openai/gpt-4o-mini", None) == "http://proxy:4000/v1"
    for model in ("openai/o3-mini", "openai/o1", "openai/gpt-5-mini", "anthropic/claude-sonnet-4-5",
                  "gemini/gemini-2.5-flash", "ollama_chat/llama3.1", "gpt-4o"):
        assert route(model, "http://127.0.0.1:8080/v1") is None, model


async def test_the_catalog_agrees_with_litellm():
    """The window, largest reply and price read from litellm's file before its import are litellm's own."""
    from bot.llm import catalog, litellm

    lib = litellm()
    for model in ("openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash",
                  "deepseek/deepseek-chat", "ollama/llama3", "mistral/mistral-large-latest", "openai/fake-model"):
        try:
            info = lib.get_model_info(model)
        except Exception:
            info = {}
        assert catalog.window(model) == (info.get("max_input_tokens") or info.get("max_tokens")), model
        assert catalog.max_output(model) == info.get("max_output_tokens"), model
        try:
            expected = sum(lib.cost_per_token(model=model, prompt_tokens=1000, completion_tokens=100,
                                              cache_read_input_tokens=200))
        except Exception:
            expected = None
        assert catalog.cost(model, 1000, 100, 200) == pytest.approx(expected) if expected is not None else \
            catalog.cost(model, 1000, 100, 200) is None, model


async def test_a_real_llama_cpp_server_reads_alike():
    """The real llama.cpp server: a reply, and a prompt over its 2,048 window (a 400 whole; streamed, a stream
    closed with no chunk, then asked again whole), come out of both paths alike. One test, its requests one
    after the other: this server cuts a stream short when another request waits."""
    from tests.test_local_llm_real import DIRECT, server

    base = server(DIRECT)  # its own: a request of another test would cut this one's streams short
    long = [{"role": "user", "content": "word " * 3000}]
    load_litellm().result()
    for stream in (False, True):
        outcomes = []
        for direct in (False, True):
            llm = LLM(LLMSettings(model="openai/tiny", api_base=base, api_key="sk-local", retries=0, timeout=120))
            llm.direct = direct
            reply = await llm.complete([{"role": "user", "content": "hello"}], max_tokens=16, temperature=0,
                                       live=Live(None) if stream else None)
            with pytest.raises(ContextOverflow) as caught:
                await llm.complete(long, max_tokens=16, live=Live(None) if stream else None)
            await llm.aclose()
            outcomes.append((reply.content, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens,
                             caught.value.window))
        assert outcomes[0] == outcomes[1] and outcomes[1][4] == 2048 and outcomes[1][0], stream
