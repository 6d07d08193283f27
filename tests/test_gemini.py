"""Google's Gemini API end to end: real litellm against the fake's strict generateContent (gemini_wire)."""

import base64
import json

import aiohttp
import pytest

from memory import files as memfiles
from tests.conftest import running
from tests.fakes import gemini_wire
from tests.fakes.fake_llm import Reply, overflow_body
from tests.media_files import image_bytes
from tests.test_streaming import streamed_text
from tests import kept

MODEL = "gemini/gemini-3-pro-preview"
KEY = "AIza-test-secret-key"
LONG = " ".join(f"word{i}" for i in range(60)) + "."


@pytest.fixture
def gemini(make_settings, fake_llm):
    """Settings for a gemini/ model whose API base is the fake (as a user points it at a proxy)."""
    fake_llm.api_keys = {KEY}
    return lambda **env: make_settings(**{"TUSK_MODEL": MODEL, "TUSK_API_BASE": fake_llm.root_url + "/v1beta",
                                          "TUSK_API_KEY": KEY, **env})


def reload(tusk, chat):
    """The chat's unconsolidated messages read back from disk, as after a restart."""
    session = kept.on_disk(tusk, "http", chat)
    return kept.on_disk(tusk, "http", chat).unconsolidated


def parts_of(body, role):
    return [p for c in body["contents"] if c.get("role") == role for p in c["parts"]]


def calls_of(body):
    return [p for p in parts_of(body, "model") if "function_call" in p or "functionCall" in p]


def clock(**kw):
    return Reply(text=None, tool_calls=[("x", "current_time", {})], **kw)


async def test_a_plain_reply_and_what_litellm_sends(gemini, fake_llm):
    """A reply comes back; the request has the key header, a systemInstruction and function declarations."""
    async with running(gemini()) as tusk:
        fake_llm.script(Reply(text="Hello from Gemini."))
        assert await tusk.say("g1", "hi there") == ["Hello from Gemini."]
    body, headers = fake_llm.requests[-1], fake_llm.headers[-1]
    assert headers["x-goog-api-key"] == KEY and "authorization" not in headers
    system = body.get("system_instruction") or body.get("systemInstruction")
    assert "Tusk" in system["parts"][0]["text"]
    assert all(c["role"] in ("user", "model") for c in body["contents"])
    assert fake_llm.refusals == []


async def test_a_tool_step_keeps_its_thought_signature_across_a_restart(gemini, fake_llm):
    """functionCall -> functionResponse -> answer: the signed call goes back with its signature, next turns too."""
    settings = gemini()
    async with running(settings) as tusk:
        fake_llm.script(clock(), Reply(text="It is noon."))
        assert await tusk.say("g2", "what time is it?") == ["It is noon."]
        fake_llm.script(Reply(text="You're welcome."))
        assert await tusk.say("g2", "thanks") == ["You're welcome."]
    async with running(settings) as tusk:
        fake_llm.script(Reply(text="Still here."))
        assert await tusk.say("g2", "and now?") == ["Still here."]
    assert fake_llm.refusals == [] and len(fake_llm.requests) == 4 and fake_llm.gemini_placeholders == 0
    for body in fake_llm.requests[1:]:
        (call,) = calls_of(body)
        assert call["thoughtSignature"] == gemini_wire.sign("current_time", {})


@pytest.mark.parametrize("stream", ["auto", "off"])
async def test_parallel_calls_and_sequential_steps_keep_each_signature(gemini, fake_llm, stream):
    """Two steps in one turn (the second with two parallel calls): each step's first call keeps its signature."""
    settings = gemini(TUSK_STREAM=stream)
    async with running(settings) as tusk:
        fake_llm.script(clock(), Reply(text=None, tool_calls=[("a", "search_history", {"query": "tea"}),
                                                              ("b", "current_time", {})]), Reply(text="Done."))
        assert await tusk.say("g3", "time and tea?") == ["Done."]
        steps = [m for m in reload(tusk, "g3") if m.tool_calls]
        assert [len(m.tool_calls) for m in steps] == [1, 2]
    async with running(settings) as tusk:
        fake_llm.script(Reply(text="Again."))
        assert await tusk.say("g3", "more?") == ["Again."]
    assert fake_llm.refusals == [] and fake_llm.gemini_placeholders == 0
    first, second, third = calls_of(fake_llm.requests[-1])
    assert first["thoughtSignature"] == gemini_wire.sign("current_time", {})
    assert second["thoughtSignature"] == gemini_wire.sign("search_history", {"query": "tea"})
    assert "thoughtSignature" not in third


async def test_the_signature_goes_to_gemini_only(gemini, fake_llm):
    """After a switch to an OpenAI-compatible model the stored signature is not sent (no provider_specific_fields)."""
    async with running(gemini()) as tusk:
        fake_llm.script(clock(), Reply(text="It is noon."))
        await tusk.say("g4", "time?")
    async with running(gemini(TUSK_MODEL="openai/fake-model", TUSK_API_BASE=fake_llm.base_url)) as tusk:
        fake_llm.script(Reply(text="Switched."))
        assert await tusk.say("g4", "hello") == ["Switched."]
    sent = json.dumps(fake_llm.requests[-1])
    assert "tool_calls" in sent and "provider_specific_fields" not in sent and "thought" not in sent


async def test_a_streamed_reply_shows_text_and_keeps_the_signature(gemini, fake_llm):
    """TUSK_STREAM=auto: streamGenerateContent?alt=sse text reaches the client; the call's signature is kept."""
    async with running(gemini()) as tusk:
        fake_llm.script(Reply(text=None, tool_calls=[("s", "search_history", {"query": "blue tea pots"})]),
                        Reply(text=LONG, token_delay=0.002))
        events, name = [], None
        async with tusk.client.post(f"{tusk.url}/v1/chats/g5/messages", json={"text": "tell me", "stream": True}) as r:
            async for raw in r.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    events.append((name, json.loads(line[6:]), 0))
    assert fake_llm.streams == 2 and fake_llm.refusals == [] and fake_llm.gemini_placeholders == 0
    assert streamed_text(events) == LONG and events[-1][1] == {"replies": [LONG], "formats": ["markdown"]}
    (call,) = calls_of(fake_llm.requests[1])
    assert call["thoughtSignature"] == gemini_wire.sign("search_history", {"query": "blue tea pots"})


@pytest.mark.parametrize("stream", ["auto", "off"])
async def test_safety_and_a_blocked_prompt_are_answered_plainly(gemini, fake_llm, stream):
    """finishReason SAFETY / RECITATION and promptFeedback.blockReason: the content-filter sentence, no error."""
    async with running(gemini(TUSK_STREAM=stream)) as tusk:
        fake_llm.script(Reply(text=None, finish_reason="SAFETY"), Reply(block_reason="SAFETY"),
                        Reply(text=None, finish_reason="RECITATION"))
        for i in range(3):
            (reply,) = await tusk.say("g6", f"something {i}")
            assert "content filter" in reply
        fake_llm.script(Reply(text="Fine again."))
        assert await tusk.say("g6", "hello") == ["Fine again."]
    assert fake_llm.refusals == []


@pytest.mark.parametrize("stream", ["auto", "off"])
async def test_a_malformed_function_call_is_asked_again_then_explained(gemini, fake_llm, stream):
    """MALFORMED_FUNCTION_CALL: the request is made once more; twice in a row gets a clear sentence."""
    async with running(gemini(TUSK_STREAM=stream)) as tusk:
        fake_llm.script(Reply(text=None, finish_reason="MALFORMED_FUNCTION_CALL"), Reply(text="Recovered."))
        assert await tusk.say("g7", "hello") == ["Recovered."]
        fake_llm.script(*[Reply(text=None, finish_reason="MALFORMED_FUNCTION_CALL")] * 2)
        (reply,) = await tusk.say("g7", "again")
    assert len(fake_llm.requests) == 4 and "tool call" in reply and "empty" not in reply


async def test_unavailable_and_quota_are_retried_then_answered(gemini, fake_llm):
    """503 UNAVAILABLE and 429 RESOURCE_EXHAUSTED are retried; past TUSK_LLM_RETRIES one clear sentence."""
    async with running(gemini(TUSK_LLM_RETRIES="2", TUSK_LLM_BACKOFF="0.01")) as tusk:
        quota = json.dumps(gemini_wire.error_body(429, None, "0s"))
        fake_llm.script(Reply(status=503), Reply(status=429, raw_body=quota), Reply(text="Back again."))
        assert await tusk.say("g8", "hello") == ["Back again."]
        fake_llm.script(*[Reply(status=503)] * 3)
        (reply,) = await tusk.say("g8", "again")
    assert len(fake_llm.requests) == 6 and "unavailable" in reply and "overloaded" not in reply.lower()


async def test_quota_retry_waits_as_retry_info_says(gemini, fake_llm):
    """A 429's RetryInfo retryDelay ("0.2s") sets the wait, not TUSK_LLM_BACKOFF (5 s here)."""
    async with running(gemini(TUSK_LLM_RETRIES="1", TUSK_LLM_BACKOFF="5")) as tusk:
        body = json.dumps(gemini_wire.error_body(429, None, "0.2s"))
        fake_llm.script(Reply(status=429, raw_body=body), Reply(text="Fine."))
        assert await tusk.say("g9", "hello") == ["Fine."]
    assert 0.2 <= fake_llm.arrivals[1] - fake_llm.arrivals[0] < 2


async def test_a_wrong_key_is_named_not_leaked(gemini, fake_llm):
    """400 "API key not valid" (API_KEY_INVALID): the user is told the key was refused; no key in the reply."""
    async with running(gemini(TUSK_API_KEY="AIza-wrong-key-1234")) as tusk:
        (reply,) = await tusk.say("g10", "hello")
    assert "API key" in reply and "AIza" not in reply and fake_llm.refusals == [gemini_wire.KEY_INVALID]


async def test_the_input_token_limit_teaches_the_window(gemini, fake_llm):
    """'The input token count (N) exceeds the maximum number of tokens allowed (M).': M is learned, turn answered."""
    async with running(gemini()) as tusk:
        fake_llm.script(overflow_body("gemini", 8192, 9000), Reply(text="Answered."))
        assert await tusk.say("g11", "hello") == ["Answered."]
        assert tusk.consolidator.budget.window == 8192
    learned = json.loads((tusk.settings.home / "models.json").read_text())
    assert learned[MODEL]["window"] == 8192


async def test_a_bare_server_root_gets_v1beta(gemini, fake_llm):
    """TUSK_API_BASE=<server> (no version path) reaches <server>/v1beta/models/<model>:generateContent."""
    async with running(gemini(TUSK_API_BASE=fake_llm.root_url)) as tusk:
        fake_llm.script(Reply(text="Reached."))
        assert await tusk.say("g12", "hi") == ["Reached."]


async def test_consolidation_over_the_gemini_wire(gemini, fake_llm):
    """A consolidation round's save_memory call over generateContent fills MEMORY.md and HISTORY.md."""
    def respond(body):
        if any(t["function"]["name"] == "save_memory" for t in body["tools"]):
            return Reply(text=None, tool_calls=[("s", "save_memory", {
                "history_entry": "They talked about tea.", "memory_update": "- likes green tea"})])
        return Reply(text="noted " + LONG)
    fake_llm.responder = respond
    async with running(gemini(TUSK_CONTEXT_WINDOW="2560")) as tusk:
        for i in range(10):
            await tusk.say("g13", f"message {i}: {LONG}")
        await tusk.agent.until_idle()
        files = kept.files(tusk, "http", "g13")
        assert memfiles.read_memory(files) == "- likes green tea\n"
        assert "tea" in files.history.read_text()
    rounds = [b for b in fake_llm.requests if "save_memory" in json.dumps(b.get("tools"))
              and "current_time" not in json.dumps(b.get("tools"))]
    assert rounds and fake_llm.refusals == []


async def post(fake_llm, body, model="gemini-3-pro-preview", key=KEY):
    url = f"{fake_llm.root_url}/v1beta/models/{model}:generateContent"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=body, headers={"x-goog-api-key": key}) as resp:
            return resp.status, await resp.json()


USER = {"role": "user", "parts": [{"text": "time?"}]}
SIGNED = {"functionCall": {"name": "current_time", "args": {}},
          "thoughtSignature": gemini_wire.sign("current_time", {})}
CALL = {"role": "model", "parts": [SIGNED]}
ANSWER = {"role": "user", "parts": [{"functionResponse": {"name": "current_time", "response": {"content": "noon"}}}]}
UNSIGNED = {"role": "model", "parts": [{"functionCall": {"name": "current_time", "args": {}}}]}


@pytest.mark.parametrize("change, words", [
    ({"contents": []}, "contents is not specified"),
    ({"contents": [{"role": "assistant", "parts": [{"text": "hi"}]}]}, "valid role: user, model"),
    ({"contents": [{"role": "user", "parts": []}]}, "must not be empty"),
    ({"contents": [CALL, ANSWER]}, "function call turn comes immediately after"),
    ({"contents": [USER, ANSWER]}, "function response turn comes immediately after"),
    ({"contents": [USER, {"role": "model", "parts": [SIGNED, SIGNED]}, ANSWER]}, "number of function response"),
    ({"contents": [USER, UNSIGNED, ANSWER]}, "missing a thought_signature"),
    ({"contents": [USER, {"role": "model", "parts": [{**SIGNED, "thoughtSignature": "c2lnOmJhZA=="}]}, ANSWER]},
     "Corrupted thought signature"),
    ({"contents": [USER, {"role": "model", "parts": [{**SIGNED, "thoughtSignature": "not base64!"}]}, ANSWER]},
     "Base64 decoding failed"),
    ({"tools": [{"function_declarations": [{"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}}]}]},
     'Unknown name "additionalProperties"'),
    ({"tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "object", "properties": {}}}]}]},
     "should be non-empty for OBJECT type"),
    ({"tools": [{"functionDeclarations": [{"name": "9f"}]}]}, "Invalid function name"),
    ({"messages": []}, 'Unknown name "messages"'),
])
async def test_the_fake_refuses_what_gemini_refuses(fake_llm, change, words):
    """Each rule of the real API gets its 400 INVALID_ARGUMENT, and takes nothing from the script."""
    fake_llm.script(Reply(text="scripted"))
    status, answer = await post(fake_llm, {"contents": [USER], **change})
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT" and words in answer["error"]["message"]
    status, answer = await post(fake_llm, {"contents": [USER, CALL, ANSWER]})
    assert status == 200 and answer["candidates"][0]["content"]["parts"][0]["text"] == "scripted"
    assert answer["candidates"][0]["finishReason"] == "STOP" and answer["usageMetadata"]["promptTokenCount"] > 0


async def test_older_turns_are_not_checked_and_gemini_2_5_not_at_all(fake_llm):
    """Only the current turn needs signatures (Gemini 3); gemini-2.5 takes an unsigned call anywhere."""
    fake_llm.script(Reply(text="one"), Reply(text="two"))
    old_turn = [USER, UNSIGNED, ANSWER, {"role": "model", "parts": [{"text": "noon"}]}, USER]
    assert (await post(fake_llm, {"contents": old_turn}))[0] == 200
    assert (await post(fake_llm, {"contents": [USER, UNSIGNED, ANSWER]}, model="gemini-2.5-flash"))[0] == 200


async def test_thoughts_count_in_the_output_bound_so_it_leaves_room(gemini, fake_llm):
    """Gemini's thoughts count in maxOutputTokens: the reply bound is sent with room to think, so a reply comes."""
    async with running(gemini()) as tusk:
        fake_llm.script(Reply(text="Thought it through."))
        assert await tusk.say("g14", "hard question") == ["Thought it through."]
        reserve = tusk.consolidator.budget.reserve
    sent = fake_llm.requests[-1]["generationConfig"]["max_output_tokens"]
    assert sent == reserve + 8192 > gemini_wire.THOUGHTS + reserve
    assert "thinkingConfig" not in json.dumps(fake_llm.requests)


async def test_a_thinking_budget_goes_to_gemini_2_5_as_thinking_budget(gemini, fake_llm):
    """TUSK_THINKING_BUDGET: gemini-2.5 gets thinkingBudget and the bound grows by it; thoughts stay private."""
    async with running(gemini(TUSK_MODEL="gemini/gemini-2.5-flash", TUSK_THINKING_BUDGET="4096",
                                  TUSK_MAX_REPLY_TOKENS="2000")) as tusk:
        fake_llm.script(Reply(text="Done.", reasoning="My private thoughts."))
        assert await tusk.say("g15", "think") == ["Done."]
        reserve = tusk.consolidator.budget.reserve
        assert "private" not in json.dumps([m.to_record() for m in reload(tusk, "g15")])
    config = fake_llm.requests[-1]["generationConfig"]
    assert config["thinkingConfig"]["thinkingBudget"] == 4096 and config["max_output_tokens"] == reserve + 4096


async def test_the_fake_spends_a_small_bound_on_thinking(fake_llm):
    """A bound below what a thinking model thinks gets no parts and MAX_TOKENS, as the real models answer."""
    fake_llm.script(Reply(text="never seen"))
    status, answer = await post(fake_llm, {"contents": [USER], "generationConfig": {"maxOutputTokens": 1024}})
    assert status == 200 and answer["candidates"][0] == {"finishReason": "MAX_TOKENS", "index": 0}


async def test_an_unknown_gemini_model_is_named(gemini, fake_llm):
    """Gemini's 404 "models/x is not found for API version v1beta" says the model is unknown, not 'refused'."""
    fake_llm.gemini_models = {"gemini-3-pro-preview"}
    async with running(gemini(TUSK_MODEL="gemini/gemini-9-nonexistent")) as tusk:
        (reply,) = await tusk.say("g16", "hello")
    assert "does not know the model 'gemini-9-nonexistent'" in reply and "TUSK_MODEL" in reply


async def test_a_signature_gemini_no_longer_takes_is_swapped_by_litellm(gemini, fake_llm, monkeypatch):
    """A stored signature the server now calls corrupted (another backend or key minted it): litellm sends
    Google's skip-validator placeholder instead, and the turn is answered."""
    settings = gemini()
    async with running(settings) as tusk:
        fake_llm.script(clock(), Reply(text="It is noon."))
        await tusk.say("g17", "time?")
    monkeypatch.setattr(gemini_wire, "_KEY", b"another-backend")
    async with running(settings) as tusk:
        fake_llm.script(Reply(text="Still fine."))
        assert await tusk.say("g17", "hello") == ["Still fine."]
    assert fake_llm.refusals == ["Corrupted thought signature."] and fake_llm.gemini_placeholders == 1


async def test_a_background_task_keeps_its_signatures(gemini, fake_llm):
    """A start_task helper's own tool loop sends each step's signed call back (Gemini 3 checks the current turn)."""
    def respond(body):
        helper, last = body["messages"][0]["content"].startswith("You are a background helper"), body["messages"][-1]
        if helper:
            return clock() if last["role"] == "user" else Reply(text="Report: it is noon.")
        if last["role"] == "user" and "look it up" in last["content"]:
            return Reply(text=None, tool_calls=[("t", "start_task", {"instructions": "Find the time."})])
        return Reply(text="On it." if last["role"] == "tool" else "Done.")
    fake_llm.responder = respond
    async with running(gemini()) as tusk:
        assert await tusk.say("g18", "please look it up") == ["On it."]
        await fake_llm.wait_for_requests(5)  # the turn, its helper's two requests, the turn with the report
    helper_steps = [b for b in fake_llm.requests if "background helper" in json.dumps(b.get("system_instruction"))]
    assert len(helper_steps) == 2 and fake_llm.refusals == [] and fake_llm.gemini_placeholders == 0
    (call,) = calls_of(helper_steps[1])
    assert call["thoughtSignature"] == gemini_wire.sign("current_time", {})


async def test_a_photo_goes_as_inline_data_gemini_takes(gemini, fake_llm):
    """A photo reaches Gemini as inline_data of a type it takes (a GIF sent as is would be refused), once."""
    from tests.test_media_turn import upload

    async with running(gemini(TUSK_VISION="true")) as tusk:
        fake_llm.script(Reply(text="A red square."), Reply(text="Yes."))
        photo = image_bytes(300, 200, "GIF")
        assert await upload(tusk, "g19", ("sq.gif", photo, "image/gif"), text="what is this?") == ["A red square."]
        assert await tusk.say("g19", "is it red?") == ["Yes."]
    inline = [p.get("inline_data") or p.get("inlineData") for p in parts_of(fake_llm.requests[0], "user")]
    (image,) = [i for i in inline if i]
    assert image["mime_type"] in ("image/jpeg", "image/png") and fake_llm.refusals == []
    assert not [p for p in parts_of(fake_llm.requests[1], "user") if "inline_data" in p or "inlineData" in p]


async def test_the_fake_refuses_a_gif_and_an_image_that_is_not_its_type(fake_llm):
    """Gemini takes PNG, JPEG, WEBP, HEIC, HEIF: a GIF is an unsupported MIME type; PNG bytes called JPEG unreadable."""
    def photo(kind, mime):
        data = base64.b64encode(image_bytes(20, 20, kind)).decode()
        return {"contents": [{"role": "user", "parts": [{"text": "what?"}, {"inline_data": {"mime_type": mime,
                                                                                          "data": data}}]}]}
    gif = (await post(fake_llm, photo("GIF", "image/gif")))[1]
    assert gif["error"]["message"] == "Unsupported MIME type: image/gif"
    assert (await post(fake_llm, photo("PNG", "image/jpeg")))[1]["error"]["message"] == gemini_wire.UNREADABLE_IMAGE
    fake_llm.script(Reply(text="A square."))
    assert (await post(fake_llm, photo("PNG", "image/png")))[0] == 200
