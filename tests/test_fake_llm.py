"""The fake LLM speaks the OpenAI wire format well enough for real litellm, streaming included."""

import json

from bot.llm import litellm
from tests.fakes.fake_llm import Reply


async def test_streaming_text_and_tool_calls(fake_llm):
    """Streamed chunks assemble into the scripted text and tool call."""
    fake_llm.script(Reply(text="hello world", tool_calls=[("c1", "f", {"x": 1})]))
    stream = await litellm().acompletion(model="openai/fake", api_base=fake_llm.base_url, api_key="sk-t",
                                         messages=[{"role": "user", "content": "hi"}], stream=True)
    text, args = "", ""
    async for chunk in stream:
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for call in delta.tool_calls or []:
            args += call.function.arguments or ""
    assert text == "hello world" and json.loads(args) == {"x": 1}
    assert fake_llm.requests[0]["stream"] is True
