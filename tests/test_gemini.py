"""Google's Gemini API end to end: real litellm against the fake's strict generateContent (gemini_wire)."""

import json

import aiohttp
import pytest

from memory import files as memfiles
from tests.conftest import running
from tests.fakes import gemini_wire
from tests.fakes.fake_llm import Reply, overflow_body

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
    session = tusk.store.get("http", chat)
    tusk.store.forget(session.files)
    return tusk.store.get("http", chat).unconsolidated


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
