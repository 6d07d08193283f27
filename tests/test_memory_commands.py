"""/memory, /forget, /new and /status as a user sees them."""

import time

import pytest

from bot.events import ChatKey
from store.base import Entry
from tests.fakes.fake_llm import Reply
from tests import kept

pytestmark = pytest.mark.both_stores


def save_memory_responder(memory):
    def respond(body):
        if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
            return Reply(text=None, tool_calls=[("s", "save_memory", {"history_entry": "Talked about tea.",
                                                                      "memory_update": memory})])
        return Reply(text="sure")
    return respond


async def test_memory_when_empty_is_friendly(tusk, fake_llm):
    """/memory in a fresh chat says nothing is remembered yet, without calling the model."""
    reply = (await tusk.say("m", "/memory"))[0]
    assert "don't remember anything" in reply and fake_llm.requests == []


async def test_new_consolidates_then_memory_shows_it(tusk, fake_llm):
    """/new summarises the conversation into memory; /memory and /memory history show it."""
    fake_llm.responder = save_memory_responder("- Bob drinks green tea")
    await tusk.say("m", "I only drink green tea")
    reply = (await tusk.say("m", "/new"))[0]
    assert "summarised into memory" in reply
    shown = (await tusk.say("m", "/memory"))[0]
    assert "Bob drinks green tea" in shown and "1 history entry;" in shown
    assert "Talked about tea." in (await tusk.say("m", "/memory history"))[0]
    await tusk.say("m", "what do I drink?")
    last = fake_llm.requests[-1]["messages"]
    assert "Bob drinks green tea" in last[0]["content"] and "I only drink green tea" not in str(last[1:])


async def test_memory_undo_restores_previous_version(tusk, fake_llm):
    """/memory undo puts the previous MEMORY.md back."""
    handle = tusk.chats.handle(ChatKey("http", "u"))
    await handle.write_memory("- first\n")
    await handle.write_memory("- second\n")
    assert "- first" in (await tusk.say("u", "/memory undo"))[0]
    assert (await handle.memory()).text == "- first\n"
    assert "no earlier version" in (await tusk.say("u", "/memory undo"))[0]


async def test_forget_lists_then_deletes_and_reports(tusk, fake_llm):
    """/forget lists exactly what would go; /forget confirm deletes it all and says what it deleted."""
    fake_llm.responder = save_memory_responder("- secret fact")
    await tusk.say("f", "remember this")
    await tusk.say("f", "/new")
    await tusk.say("f", "and this")
    handle = tusk.chats.handle(ChatKey("http", "f"))
    listing = (await tusk.say("f", "/forget"))[0]
    assert "MEMORY.md" in listing and "1 history entry (HISTORY.md)" in listing and "session messages" in listing
    assert "/forget confirm" in listing and len(await handle.messages()) == 4
    report = (await tusk.say("f", "/forget confirm"))[0]
    assert report.count("- deleted") == 5 and "FAILED" not in report and "provenance.json" in report
    assert "- deleted 3 usage records of this chat" in report  # two replies and the /new consolidation
    assert not await handle.exists()
    assert "nothing to forget" in (await tusk.say("f", "/forget"))[0]
    await tusk.say("f", "hello again")
    assert "secret fact" not in str(fake_llm.requests[-1]["messages"])


async def test_status_reports_budget(tusk, fake_llm):
    """/status shows the prompt estimate against the budget and the window."""
    await tusk.say("s", "hi")
    status = (await tusk.say("s", "/status"))[0]
    assert "Prompt: ~" in status and "window 65,536" in status and "Consolidations since start: 0" in status


async def test_forget_counts_in_words_and_names_only_what_the_settings_hold(tusk, fake_llm):
    """/forget's list says "1 history entry", "1 session message", "1 earlier memory version"; a chat whose
    settings.json sets no time zone names none (never "time zone None"), one that sets it names it."""
    from memory import chat_settings

    await tusk.say("p", "hello")
    handle = tusk.chats.handle(ChatKey("http", "p"))
    await handle.append_history(Entry(time.time(), "Said hello."))
    await handle.write_memory("- one\n")
    await handle.write_memory("- two\n")
    await tusk.chats.put_settings(await kept.chat(tusk, "http", "p"), chat_settings.ChatSettings(model="fast"))
    listing = (await tusk.say("p", "/forget"))[0]
    assert "- 1 history entry (HISTORY.md)" in listing and "- 1 earlier memory version" in listing
    assert "- 2 session messages (session.jsonl)" in listing
    assert "- chat settings (settings.json: model fast)" in listing and "None" not in listing
    await tusk.say("q", "/timezone Europe/Paris")
    listing = (await tusk.say("q", "/forget"))[0]
    assert "- chat settings (settings.json: time zone Europe/Paris)" in listing
