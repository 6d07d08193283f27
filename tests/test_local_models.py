"""Local servers (llama.cpp, Ollama, LM Studio, vLLM) as users run them: their shapes, through the fake LLM.

The real llama.cpp server is exercised by tests/test_local_llm_real.py and bench/local_llm.py.
"""

import asyncio
import json

import pytest

from memory import files as memfiles
from memory.session import Message
from tests.conftest import running
from tests.fakes.fake_llm import Reply
from tests.fakes.loopback import wait_until
from tests.legality import violations
from tests import kept

FILLER = "tell me more about the garden and the weather and the plans we made " * 6


def is_consolidation(body):
    return "long-term memory of one chat" in (body["messages"][0].get("content") or "")


async def preload(tusk, chat, n):
    await kept.append(tusk, "http", chat, [Message("user" if i % 2 == 0 else "assistant", f"m{i} {FILLER}")
                                           for i in range(n)])


@pytest.mark.parametrize("raw", ['{"history_entry": "Talked.\tAbout tea.", "memory_update": "- likes\ttea"}',
                                 '```json\n{"history_entry": "Talked.", "memory_update": "- likes tea",}\n```',
                                 '  {"history_entry": "Talked.", "memory_update": "- likes tea"} \n'])
async def test_save_memory_as_local_servers_write_it_is_read(make_settings, fake_llm, raw):
    """A raw tab in a string, a fence with a trailing comma, surrounding whitespace: MEMORY.md is written."""
    fake_llm.responder = lambda body: Reply(text=None, tool_calls=[("c", "save_memory", raw)]) \
        if is_consolidation(body) else Reply(text="sure")
    async with running(make_settings(TUSK_CONTEXT_WINDOW=2048)) as tusk:
        await preload(tusk, "tab", 12)
        await tusk.say("tab", "hello")
        await tusk.agent.aclose()
        assert "likes" in memfiles.read_memory(kept.files(tusk, "http", "tab"))


async def test_every_request_carries_max_tokens(make_settings, fake_llm):
    """Replies are bounded by the reply reserve, consolidation by what a summary and the memory need;
    TUSK_MAX_REPLY_TOKENS overrides the first."""
    async with running(make_settings(TUSK_CONTEXT_WINDOW=4096)) as tusk:
        await tusk.say("mt", "hi")
        await tusk.say("mt", "/new")
        chat, consolidation = fake_llm.requests[0], fake_llm.requests[1]
        assert chat["max_tokens"] == tusk.consolidator.budget.reserve == 1024
        assert consolidation["max_tokens"] == tusk.consolidator.max_memory_tokens + 600
    async with running(make_settings(TUSK_MAX_REPLY_TOKENS=300)) as tusk:
        await tusk.say("mt2", "hi")
        assert fake_llm.requests[-1]["max_tokens"] == 300


async def test_a_reply_waits_behind_at_most_one_round(make_settings, fake_llm):
    """On a slow server, background consolidation rounds wait while a turn runs: the next message's
    request is not queued behind further rounds."""
    def respond(body):
        if is_consolidation(body):
            return Reply(text=None, delay=0.4, tool_calls=[("c", "save_memory", {
                "history_entry": "Talked about the garden.", "memory_update": "- has a garden"})])
        return Reply(text="ok")
    fake_llm.responder = respond
    async with running(make_settings(TUSK_CONTEXT_WINDOW=2048)) as tusk:
        await preload(tusk, "slow", 30)
        await tusk.say("slow", "first")  # over budget: rounds continue in the background after the reply
        replied = len(fake_llm.requests)
        await wait_until(lambda: any(is_consolidation(b) for b in fake_llm.requests[replied:]))  # one under way
        sent = asyncio.get_running_loop().time()
        await tusk.say("slow", "second")
        kinds = ["c" if is_consolidation(b) else "t" for b in fake_llm.requests]
        second = max(i for i, k in enumerate(kinds) if k == "t")
        between = [k for k, t in zip(kinds[:second], fake_llm.arrivals[:second]) if t >= sent and k == "c"]
        assert between == [] and kinds.count("c") >= 2
        await tusk.agent.aclose()


async def test_a_model_without_tools_still_answers_and_remembers(make_settings, fake_llm):
    """Ollama's 400 "does not support tools": the turn is asked again without tools, the model is told,
    it is remembered per model, and consolidation writes MEMORY.md from the plain-text form."""
    refusal = Reply(status=400, raw_body=json.dumps({"error": {
        "message": "registry.ollama.ai/library/gemma:2b does not support tools", "type": "api_error"}}))

    def respond(body):
        if body.get("tools"):
            return refusal
        if is_consolidation(body):
            return Reply(text="HISTORY ENTRY:\nAlice talked about her garden.\n\nMEMORY:\n- Alice grows tomatoes")
        return Reply(text="Lovely!")
    fake_llm.responder = respond
    settings = make_settings(TUSK_CONTEXT_WINDOW=4096)
    async with running(settings) as tusk:
        assert await tusk.say("nt", "I grow tomatoes") == ["Lovely!"]
        last = fake_llm.requests[-1]
        assert "tools" not in last and "takes no tools" in last["messages"][0]["content"]
        assert "Tools: unavailable" in (await tusk.say("nt", "/status"))[0]
        assert "summarised" in (await tusk.say("nt", "/new"))[0]
        assert "Alice grows tomatoes" in memfiles.read_memory(kept.files(tusk, "http", "nt"))
    assert json.loads((settings.home / "models.json").read_text())["openai/fake-model"]["no_tools"] is True
    async with running(settings) as tusk:
        before = len(fake_llm.requests)
        await tusk.say("nt", "hello again")
        assert len(fake_llm.requests) == before + 1 and "tools" not in fake_llm.requests[-1]


async def test_text_summary_is_accepted_from_a_tool_capable_model(make_settings, fake_llm):
    """A model offered save_memory that answers in the labelled text form still writes memory."""
    fake_llm.responder = lambda body: Reply(text="**History entry:** Talked about tea.\n**Memory:**\n- likes tea") \
        if is_consolidation(body) else Reply(text="ok")
    async with running(make_settings()) as tusk:
        await tusk.say("txt", "I like tea")
        await tusk.say("txt", "/new")
        assert memfiles.read_memory(kept.files(tusk, "http", "txt")) == "- likes tea\n"


async def test_ollama_native_route_sends_the_budgeted_window_as_num_ctx(make_settings, fake_llm):
    """ollama_chat/: the window comes from /api/show (capped), and every request carries it as num_ctx."""
    fake_llm.models = [{"id": "llama3.1", "object": "model"}]
    fake_llm.ollama_context = 8192
    base = fake_llm.base_url.removesuffix("/v1")
    async with running(make_settings(TUSK_MODEL="ollama_chat/llama3.1", TUSK_API_BASE=base)) as tusk:
        assert tusk.consolidator.budget.window == 8192 and "/api/show" in tusk.consolidator.budget.source
        (reply,) = await tusk.say("ol", "hello")
        assert reply.startswith("echo:")
        body = fake_llm.requests[-1]
        assert body["options"]["num_ctx"] == 8192 and body["options"]["num_predict"] == 2048
        assert violations(body["messages"]) == []
    fake_llm.ollama_context = 131072
    async with running(make_settings(TUSK_MODEL="ollama_chat/llama3.1", TUSK_API_BASE=base)) as tusk:
        assert tusk.consolidator.budget.window == 16384  # capped: Ollama reserves memory for all of num_ctx


async def test_ollama_behind_its_openai_endpoint_is_budgeted_at_its_default_context(make_settings, fake_llm):
    """openai/ pointed at Ollama: num_ctx cannot be sent there, so the window is Ollama's default context."""
    fake_llm.ollama_context = 131072
    async with running(make_settings()) as tusk:
        assert tusk.consolidator.budget.window == 4096 and "/api/show" in tusk.consolidator.budget.source


async def test_a_server_that_cuts_prompts_is_named_once(make_settings, fake_llm, caplog):
    """usage.prompt_tokens far below Tusk's estimate: one warning with the fix, and /status shows it."""
    fake_llm.responder = lambda body: Reply(text="ok", usage={"prompt_tokens": 300, "completion_tokens": 1,
                                                             "total_tokens": 301})
    async with running(make_settings(TUSK_CONTEXT_WINDOW=16384)) as tusk:
        await preload(tusk, "trunc", 20)
        await tusk.say("trunc", "hi")
        await tusk.say("trunc", "again")
        warnings = [r for r in caplog.records if "cuts long prompts" in r.getMessage()]
        assert len(warnings) == 1 and "ollama_chat/" in warnings[0].getMessage()
        assert "cuts long prompts" in (await tusk.say("trunc", "/status"))[0]


async def test_a_server_that_is_not_running_is_named(make_settings, fake_llm):
    """Connection refused: the user hears which server to start, not 'unavailable'."""
    async with running(make_settings(TUSK_API_BASE="http://127.0.0.1:9/v1")) as tusk:
        (reply,) = await tusk.say("down", "hi")
        assert "is the model server running at http://127.0.0.1:9/v1?" in reply


async def test_an_unknown_model_lists_what_the_server_serves(make_settings, fake_llm):
    """A 404 'model not found' names the model and the server's models."""
    fake_llm.models = [{"id": "qwen2.5:7b", "object": "model"}, {"id": "llama3.1", "object": "model"}]
    fake_llm.script(Reply(status=404, raw_body=json.dumps({"error": {
        "message": 'model "fake-model" not found, try pulling it first', "type": "api_error"}})))
    async with running(make_settings()) as tusk:
        (reply,) = await tusk.say("nm", "hi")
        assert "'fake-model'" in reply and "qwen2.5:7b, llama3.1" in reply and "TUSK_MODEL" in reply
