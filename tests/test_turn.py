"""End to end: HTTP channel -> bus -> agent -> real litellm -> fake LLM -> reply."""

import asyncio
import json
import time

import pytest

from bot.events import ChatKey
from tests.fakes.fake_llm import Reply
from tests.outbox import attach
from tests.legality import violations
from tests import kept

pytestmark = pytest.mark.both_stores


async def test_message_gets_the_model_reply_and_is_saved(tusk, fake_llm):
    """A posted message is answered by the model and both sides land in the chat's session file."""
    replies = await tusk.say("alice", "hello there")
    assert replies == ["echo: " + fake_llm.requests[0]["messages"][-1]["content"]]
    session = await kept.session(tusk, "http", "alice")
    assert [(m.role, m.content) for m in session.unconsolidated][0] == ("user", "hello there")
    assert session.unconsolidated[1].role == "assistant"


async def test_prompt_layout_and_runtime_context_not_saved(tusk, fake_llm):
    """System prompt first and stable across turns; the runtime block rides on the user message only."""
    await tusk.say("bob", "one")
    await tusk.say("bob", "two")
    first, second = fake_llm.requests
    assert first["messages"][0] == second["messages"][0]  # byte-identical system prompt
    assert first["messages"][0]["role"] == "system" and "Memory of this chat" in first["messages"][0]["content"]
    last = second["messages"][-1]["content"]
    assert last.startswith("[context: ") and "http direct chat" in last and last.endswith("\n\ntwo")
    assert second["messages"][1] == {"role": "user", "content": "one"}  # saved without the block
    assert not violations(second["messages"])
    assert second["tools"][0]["function"]["name"] == "current_time"


async def test_tool_call_round_trip(tusk, fake_llm):
    """The model calls a tool, gets its result, and answers; the whole turn is saved legally."""
    fake_llm.script(Reply(text=None, tool_calls=[("call_1", "current_time", {"timezone": "Asia/Tokyo"})]),
                    Reply(text="It is late in Tokyo."))
    assert await tusk.say("carol", "time in Tokyo?") == ["It is late in Tokyo."]
    step, tool_msg = fake_llm.requests[1]["messages"][-2:]
    assert tool_msg["role"] == "tool" and "JST" in tool_msg["content"]
    assert tool_msg["tool_call_id"] == step["tool_calls"][0]["id"] != "call_1"  # Tusk's own id, not the provider's
    roles = [m.role for m in (await kept.session(tusk, "http", "carol")).unconsolidated]
    assert roles == ["user", "assistant", "tool", "assistant"]
    await tusk.say("carol", "thanks")
    assert not violations(fake_llm.requests[2]["messages"])


async def test_bad_tool_arguments_become_an_error_result(tusk, fake_llm):
    """Invalid arguments or an unknown tool are reported to the model; the turn still completes."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", "{not json"), ("c2", "rm_rf", {})]),
                    Reply(text="sorry"))
    assert await tusk.say("dan", "x") == ["sorry"]
    results = [m["content"] for m in fake_llm.requests[1]["messages"][-2:]]
    assert results[0].startswith("Error: ToolArgumentError") and "no tool named 'rm_rf'" in results[1]


async def test_tool_loop_is_bounded(make_settings, fake_llm):
    """A model that calls tools forever is stopped after the configured number of steps."""
    from bot.app import TuskApp
    from bot.events import InboundMessage

    fake_llm.responder = lambda body: Reply(text=None, tool_calls=[(f"c{len(fake_llm.requests)}", "current_time", {})])
    app = TuskApp(make_settings(TUSK_MAX_TOOL_ITERATIONS=3))
    box = attach(app)
    async with app:
        await app.bus.publish(InboundMessage(ChatKey("http", "loop"), "go", sender_id="u"))
        assert len(fake_llm.requests) == 3 and "3 tool steps" in box.sent[0].text
        saved = (await kept.session(app, "http", "loop")).unconsolidated
    assert not violations([{"role": "system", "content": ""}, *(m.to_llm() for m in saved)])


async def test_twenty_chats_in_parallel(tusk, fake_llm):
    """With a model that takes 1 s per call, 20 chats are answered together: far sooner than the 20 s one after
    another would take."""
    fake_llm.responder = lambda body: Reply(text="slow", delay=1.0)
    start = time.monotonic()
    replies = await asyncio.gather(*(tusk.say(f"p{i}", "hi") for i in range(20)))
    assert time.monotonic() - start < 8.0 and replies == [["slow"]] * 20


async def test_one_chat_answered_in_order(tusk, fake_llm):
    """Messages sent at once to one chat are answered in the order they were sent."""
    fake_llm.responder = lambda body: Reply(text=body["messages"][-1]["content"].split("\n\n")[-1], delay=0.05)
    tasks = []
    for i in range(5):
        tasks.append(asyncio.create_task(tusk.say("ordered", f"m{i}")))
        await asyncio.sleep(0.01)
    assert [r[0] for r in await asyncio.gather(*tasks)] == [f"m{i}" for i in range(5)]
    saved = [m.content for m in (await kept.session(tusk, "http", "ordered")).unconsolidated if m.role == "user"]
    assert saved == [f"m{i}" for i in range(5)]


async def test_commands_are_answered_locally(tusk, fake_llm):
    """/help and /status never reach the LLM and are not saved."""
    help_text = (await tusk.say("cmd", "/help"))[0]
    assert "/status" in help_text and "/new" in help_text
    await tusk.say("cmd", "remember me")
    status = (await tusk.say("cmd", "/status@tusk"))[0]
    assert "openai/fake-model" in status and "Messages in this chat: 2" in status
    assert len(fake_llm.requests) == 1
    assert "unknown" not in help_text and "I don't know /nope" in (await tusk.say("cmd", "/nope"))[0]


async def test_new_starts_an_empty_conversation(tusk, fake_llm):
    """/new moves the earlier messages out of the prompt; they stay on disk."""
    await tusk.say("fresh", "old topic")
    assert "Started a new conversation" in (await tusk.say("fresh", "/new"))[0]
    await tusk.say("fresh", "new topic")
    texts = json.dumps(fake_llm.requests[-1]["messages"])
    assert "old topic" not in texts and "new topic" in texts


async def test_oversize_message_gets_a_clear_answer(tusk, fake_llm):
    """A message over the limit is refused politely, never sent to the model, never saved."""
    reply = (await tusk.say("big", "x" * 40_000))[0]
    assert "40,000 characters" in reply and fake_llm.requests == []
    assert (await kept.session(tusk, "http", "big")).total == 0


async def test_workspace_files_and_own_memory_in_system_prompt(tusk, fake_llm):
    """AGENTS.md/SOUL.md reach every chat; a chat's MEMORY.md reaches only that chat."""
    home = tusk.settings.home
    (home / "AGENTS.md").write_text("Always answer in haiku.")
    await tusk.chats.handle(ChatKey("http", "a")).write_memory("- Alice's cat is called Miso.")
    await tusk.say("a", "hi")
    await tusk.say("b", "hi")
    sys_a, sys_b = (r["messages"][0]["content"] for r in fake_llm.requests)
    assert "Always answer in haiku." in sys_a and "Always answer in haiku." in sys_b
    assert "Miso" in sys_a and "Miso" not in json.dumps(fake_llm.requests[1])


async def test_system_prompt_follows_every_change_of_its_files(tmp_path):
    """The prompt is kept between turns but rebuilt when MEMORY.md or AGENTS.md changes, even to the same size."""
    from bot.context import ContextBuilder
    from memory import files as memfiles
    from memory.paths import ChatFiles
    from store import open_files

    builder, chats = ContextBuilder(tmp_path, "Tusk", []), open_files(tmp_path).chats
    files = ChatFiles.locate(tmp_path, "http", "a")

    async def prompt():  # as a turn builds it: from the chat as the store loads it
        return builder.system_prompt(await chats.open(ChatKey("http", "a")))

    assert "nothing remembered yet" in await prompt()
    memfiles.write_memory(files, "- likes tea")
    assert "- likes tea" in await prompt()
    files.memory.write_text("- likes tee")  # edited in place, same size
    assert "- likes tee" in await prompt()
    (tmp_path / "AGENTS.md").write_text("Be brief.")
    assert "Be brief." in await prompt()
