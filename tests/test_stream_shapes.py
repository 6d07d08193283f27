"""Streams as servers really break them: each is read in the one place that reads streams (bot/llm/client.py,
bot/llm/streams.py, bot/llm/readable.py) and every turn is answered. Each test watches the reply over SSE,
so the model is asked to stream."""

import asyncio
import json

import pytest

from bot.errors import NotAModelServer
from bot.llm.learned import FILE, ModelBook
from memory import files as memfiles
from tests.conftest import running
from tests.fakes.fake_llm import Reply, attributing_responder
from tests.fakes.loopback import wait_until
from tests.legality import violations
from tests import kept

TEXT = ("Let me tell you about my garden: the tomatoes split after the rain, the beans climb the fence, and I "
        "want to plant garlic in October. ")


def book(tusk):
    return ModelBook(tusk.settings.home)


async def test_a_stream_closed_before_its_first_chunk_teaches_the_window(make_settings, fake_llm):
    """llama.cpp over its window: 200, then nothing. Asked again whole, its 400 teaches the window; every
    turn of a long chat is answered and memory is written; streaming stays on (it was not the server's fault)."""
    fake_llm.quirk, fake_llm.window, fake_llm.responder = "llamacpp", 2048, attributing_responder
    async with running(make_settings(TUSK_MODEL="openai/tiny")) as tusk:
        for i in range(14):
            (reply,) = await tusk.say_streamed("w", f"{i}. {TEXT * 3}")
            assert reply.startswith("echo:"), reply
        await tusk.agent.aclose()
        assert tusk.consolidator.budget.window == 2048 and "learned" in tusk.consolidator.budget.source
        assert book(tusk).get("openai/tiny").no_stream is None
        assert memfiles.history_entries(kept.files(tusk, "http", "w"))
    assert any(b.get("stream") for b in fake_llm.requests[-3:])


async def test_a_stream_the_server_ends_for_another_request_is_asked_again_whole(make_settings, fake_llm):
    """llama-cpp-python ends a stream in progress with [DONE] and no finish reason when another request waits
    for its one slot (here, another chat's). Each cut reply is asked again whole and delivered in full;
    streaming stays on, since the server streams fine (it was cut, not refused)."""
    fake_llm.one_slot = True
    words = " ".join(f"w{i}" for i in range(40))
    fake_llm.responder = lambda body: Reply(text=words, token_delay=0.02)
    async with running(make_settings(TUSK_MODEL="openai/tiny")) as tusk:
        first = asyncio.create_task(tusk.say_streamed("a", "one"))
        await wait_until(lambda: fake_llm.streams >= 1, 30)
        second = await tusk.say_streamed("b", "two")
        assert await first == [words] and second == [words]
        assert fake_llm.interrupted >= 1 and tusk.llm.no_stream == {}
        assert book(tusk).get("openai/tiny").no_stream is None


async def test_a_server_that_drops_streamed_tool_calls_is_asked_whole_and_remembered(make_settings, fake_llm):
    """Ollama's /v1 with tools streams empty content and `stop`: asked whole, the call runs; from then on (also
    after a restart) requests with tools go unstreamed and /status says so."""
    fake_llm.quirk = "drops_streamed_calls"
    settings = make_settings()
    async with running(settings) as tusk:
        fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})]), Reply(text="It is noon."))
        assert await tusk.say_streamed("o", "time?") == ["It is noon."]
        assert [b.get("stream", False) for b in fake_llm.requests] == [True, False, False]
        assert book(tusk).get("openai/fake-model").no_stream == "tools"
        assert "Streaming: off for replies that may use tools" in (await tusk.say("o", "/status"))[0]
    async with running(settings) as tusk:
        fake_llm.script(Reply(text="Hello again."))
        assert await tusk.say_streamed("o", "hi") == ["Hello again."]
    assert "stream" not in fake_llm.requests[-1]
    assert violations(fake_llm.requests[-1]["messages"]) == []


async def test_a_server_that_ignores_stream_is_read_in_one_request(tusk, fake_llm):
    """One whole JSON body to a streamed request: the reply, its calls and usage, from that one request."""
    fake_llm.quirk = "ignores_stream"
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})]), Reply(text="Noon, whole."))
    assert await tusk.say_streamed("ig", "time?") == ["Noon, whole."]
    assert len(fake_llm.requests) == 2 and all(b["stream"] for b in fake_llm.requests)


async def test_list_content_in_deltas_is_streamed_as_text(tusk, fake_llm):
    """Mistral streams `delta.content` as a list of parts: their text is the reply, shown as it comes."""
    fake_llm.quirk = "parts_in_deltas"
    long = " ".join(f"part{i}" for i in range(60)) + "."
    fake_llm.script(Reply(text=long))
    assert await tusk.say_streamed("mp", "hi") == [long]
    assert len(fake_llm.requests) == 1


async def test_a_whole_reply_in_one_chunk_with_a_tool_call_runs_the_call(tusk, fake_llm):
    """Ollama with tools sends everything in a single chunk: the call is rebuilt and runs."""
    fake_llm.quirk = "one_chunk"
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {"timezone": "Asia/Tokyo"})]),
                    Reply(text="Late in Tokyo."))
    assert await tusk.say_streamed("oc", "time in Tokyo?") == ["Late in Tokyo."]
    assert "JST" in fake_llm.requests[1]["messages"][-1]["content"]
    assert len(fake_llm.requests) == 2


@pytest.mark.parametrize("error", [
    {"message": "This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 "
                "tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"},
])
async def test_an_error_object_in_a_stream_is_the_same_error_as_unstreamed(make_settings, fake_llm, error):
    """A proxy's `error` object inside a 200 stream is read as the server's error: here the window is learned
    from it and the same turn is answered."""
    fake_llm.quirk = "error_in_stream"
    async with running(make_settings()) as tusk:
        fake_llm.script(Reply(raw_body=json.dumps({"error": error})), Reply(text="Answered."))
        assert await tusk.say_streamed("eo", "hello") == ["Answered."]
        assert tusk.consolidator.budget.window == 4096


async def test_a_rate_limit_inside_a_stream_is_retried(make_settings, fake_llm):
    """An error object that says 429 inside the stream: retried after the backoff, as an unstreamed 429 is."""
    fake_llm.quirk = "error_in_stream"
    async with running(make_settings(TUSK_LLM_RETRIES="1")) as tusk:
        fake_llm.script(Reply(raw_body=json.dumps({"error": {"message": "Rate limit exceeded", "code": 429}})),
                        Reply(text="Fine now."))
        assert await tusk.say_streamed("rl", "hello") == ["Fine now."]
    assert len(fake_llm.requests) == 2


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_web_page_where_the_api_should_be_reads_as_a_misconfigured_server(tusk, fake_llm, streamed):
    """A base URL that answers 200 with HTML: the owner hears of a misconfigured server and TUSK_API_BASE,
    not "the model sent an empty reply"; nothing is saved."""
    fake_llm.quirk = "html"
    (reply,) = await (tusk.say_streamed if streamed else tusk.say)("html", "hello")
    assert "misconfigured" in reply and "TUSK_API_BASE" in reply and "empty" not in reply
    assert len(fake_llm.requests) == 1
    assert NotAModelServer.user_message != reply and "TUSK_API_BASE" not in NotAModelServer.user_message
    assert kept.on_disk(tusk, "http", "html").unconsolidated == []


async def test_a_turn_nobody_watches_makes_no_streaming_request(tusk, fake_llm):
    """An HTTP request without `stream` (nobody watches the reply being written) is one plain request."""
    fake_llm.script(Reply(text="Plain.", token_delay=0.01))
    assert await tusk.say("plain", "hi") == ["Plain."]
    assert "stream" not in fake_llm.requests[-1] and fake_llm.streams == 0


def test_models_json_keeps_what_cannot_stream(tmp_path):
    """The book reads back "tools"/"all" and ignores anything else."""
    b = ModelBook(tmp_path)
    b.note("a", "why", no_stream="tools")
    b.note("b", "why", no_stream="all")
    b.note("c", "why", no_stream="sometimes")
    assert b.unstreamed() == {"a": "tools", "b": "all"}
    assert json.loads((tmp_path / FILE).read_text())["a"]["no_stream"] == "tools"
