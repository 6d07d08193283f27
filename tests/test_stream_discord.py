"""Streaming replies on Discord: one message sent, then edited in place; a new one past 2,000 characters."""

import contextlib

import pytest

from bot.app import TuskApp
from bot.stream import CUT_NOTE
from channels.discord_bot import stream as discord_stream
from tests.fakes.fake_discord import FakeDiscord, shown, snowflake
from tests.fakes.fake_llm import Reply
from tests.legality import violations
from tests import kept

WORDS = " ".join(f"word{i}" for i in range(150)) + "."
FAST = 0.25


@pytest.fixture
async def dc():
    async with FakeDiscord(token="fake-discord-token-123") as fake:
        fake.guild = guild = fake.add_guild()
        fake.channel = guild.add_channel()
        fake.alice = fake.add_user("alice")
        fake.dm = snowflake()
        yield fake


@pytest.fixture
async def tusk_dc(make_settings, dc, monkeypatch):
    monkeypatch.setattr(discord_stream, "INTERVAL", FAST)
    async with contextlib.AsyncExitStack() as stack:
        app = TuskApp(make_settings(DISCORD_BOT_TOKEN=dc.token, DISCORD_API_BASE=dc.api_base,
                                    DISCORD_GATEWAY_URL=dc.gateway_url))
        app.add_http()
        app.add_platforms()
        yield await stack.enter_async_context(app)


def saved_reply(app, chat):
    session = kept.on_disk(app, "discord", chat)
    return kept.on_disk(app, "discord", chat).unconsolidated[-1].content


def final_texts(dc):
    """Each message's last content, in the order they were created."""
    texts = {m["id"]: m["content"] for m in dc.sent}
    texts.update({e["id"]: e["content"] for e in dc.edits})
    return [texts[m["id"]] for m in dc.sent if m["id"] not in dc.deleted]


def test_the_default_pace_is_within_discords_limits():
    """About five message changes per five seconds in a channel: one a second."""
    assert discord_stream.INTERVAL >= 1.0


async def test_a_dm_reply_is_sent_then_edited_and_ends_on_the_saved_text(tusk_dc, dc, fake_llm):
    """The first text is visible long before the end; edits keep the pace; the last edit is the saved reply."""
    fake_llm.script(Reply(text=WORDS, token_delay=0.01))
    await dc.message(dc.dm, dc.alice, "tell me a lot")
    await dc.wait_for(lambda: dc.edits and dc.edits[-1]["content"] == WORDS and not tusk_dc.bus.active_chats,
                      timeout=10)
    assert len(dc.sent) == 1 and len(dc.edits) >= 2
    assert dc.edits[-1]["at"] - dc.sent[0]["at"] > 0.8
    times = [dc.sent[0]["at"]] + [e["at"] for e in dc.edits]
    assert all(b - a >= FAST - 0.02 for a, b in zip(times, times[1:]))
    assert saved_reply(tusk_dc, dc.dm) == WORDS


async def test_a_guild_reply_quotes_the_question_and_shows_tool_status(tusk_dc, dc, fake_llm):
    """In a guild the streamed message replies to the question; a tool step's status is replaced by the answer."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})]), Reply(text=WORDS, token_delay=0.005))
    await dc.message(dc.channel, dc.alice, f"{dc.mention} what time, at length", guild=dc.guild)
    await dc.wait_for(lambda: dc.edits and dc.edits[-1]["content"] == WORDS, timeout=10)
    assert dc.sent[0]["content"] == "_checking the time…_" and "message_reference" in dc.sent[0]
    assert final_texts(dc) == [WORDS]


async def test_tusks_own_sentence_replaces_a_tool_status_as_written(tusk_dc, dc, fake_llm):
    """A failure after a tool step: the status message is edited into the sentence, escaped, so Discord shows its
    backticks instead of a code span."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})]), Reply(status=401, delay=0.6))
    await dc.message(dc.channel, dc.alice, f"{dc.mention} what time is it?", guild=dc.guild)
    sentence = "The model provider refused Tusk's API key; the operator can run `tusk doctor`."
    await dc.wait_for(lambda: dc.edits and shown(dc.edits[-1]["content"]) == sentence, timeout=10)
    assert [shown(t) for t in final_texts(dc)] == [sentence] and len(dc.sent) == 1


async def test_a_long_reply_continues_in_new_messages_within_2000(tusk_dc, dc, fake_llm):
    """Past 2,000 characters the reply goes on in a new message; fences are balanced in each."""
    code = "```python\n" + "\n".join(f"print('line {i} of a long program')" for i in range(120)) + "\n```"
    text = f"Intro.\n\n{code}\n\nDone."
    fake_llm.script(Reply(text=text))
    await dc.message(dc.dm, dc.alice, "code please")
    await dc.wait_for(lambda: final_texts(dc) and final_texts(dc)[-1].endswith("Done."), timeout=15)
    finals = final_texts(dc)
    assert len(finals) >= 2 and all(len(t) <= 2000 for t in finals)
    assert all(t.count("```") % 2 == 0 for t in finals)
    assert all(len(b["content"]) <= 2000 for b in dc.sent + dc.edits)


async def test_a_cut_stream_ends_on_the_text_and_a_note(tusk_dc, dc, fake_llm):
    """Cut mid-reply: the message ends with the text so far and the note, which is what the session keeps."""
    fake_llm.script(Reply(text=WORDS, token_delay=0.005, cut_after=80))
    await dc.message(dc.dm, dc.alice, "tell me")
    await dc.wait_for(lambda: dc.edits and dc.edits[-1]["content"].endswith(CUT_NOTE), timeout=10)
    assert saved_reply(tusk_dc, dc.dm) == dc.edits[-1]["content"]
    await dc.message(dc.dm, dc.alice, "go on")
    await fake_llm.wait_for_requests(2)
    assert violations(fake_llm.requests[-1]["messages"]) == []
