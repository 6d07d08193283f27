"""Streaming replies on Slack: chat streaming in threads, chat.update in DMs and where streaming is refused."""

import contextlib

import pytest

from bot.app import TuskApp
from bot.stream import CUT_NOTE
from channels.slack import stream as slack_stream
from channels.slack.format import to_mrkdwn
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_slack import FakeSlack, shown
from tests.legality import violations
from tests import kept

WORDS = " ".join(f"word{i}" for i in range(150)) + "."
FAST = 0.25


@pytest.fixture
async def slack():
    async with FakeSlack(bot_user_id="U0TUSK") as fake:
        fake.add_user("U0ANN", "ann")
        yield fake


@pytest.fixture
async def tusk_slack(make_settings, slack, monkeypatch):
    monkeypatch.setattr(slack_stream, "INTERVAL", FAST)
    settings = make_settings(SLACK_BOT_TOKEN=slack.bot_token, SLACK_APP_TOKEN=slack.app_token,
                             SLACK_API_URL=slack.api_url)
    async with contextlib.AsyncExitStack() as stack:
        app = TuskApp(settings)
        app.add_http()
        app.add_platforms()
        yield await stack.enter_async_context(app)
        await slack.wait_connected()


def saved_reply(app, chat):
    session = kept.on_disk(app, "slack", chat)
    return kept.on_disk(app, "slack", chat).unconsolidated[-1].content


def gaps(calls):
    return [b["at"] - a["at"] for a, b in zip(calls, calls[1:])]


def test_the_default_pace_is_one_update_a_second():
    """chat.update and the stream methods are rate-tiered per minute: one a second stays within them."""
    assert slack_stream.INTERVAL >= 1.0


async def test_a_thread_reply_streams_with_the_asker_as_recipient(tusk_slack, slack, fake_llm):
    """A channel mention is answered by chat streaming in its thread: start, appends at the pace, stop; the
    message ends as the saved reply."""
    await slack.wait_connected()
    fake_llm.script(Reply(text=f"**Here** {WORDS}", token_delay=0.01))
    event = slack.mention("tell me a lot")
    await slack.send_event(event)
    await slack.wait_for(lambda: any(c["method"] == "chat.stopStream" for c in slack.stream_calls), timeout=10)
    calls = slack.stream_calls
    assert [c["method"] for c in calls][0] == "chat.startStream" and calls[-1]["method"] == "chat.stopStream"
    start = calls[0]
    assert start["thread_ts"] == event["ts"] and start["recipient_user_id"] == "U0ANN"
    assert start["recipient_team_id"] == slack.team_id
    assert calls[-1]["at"] - start["at"] > 0.8 and all(g >= FAST - 0.02 for g in gaps(calls[:-1]))
    chat = f"C0GENERAL-{event['ts']}"
    assert slack.texts("C0GENERAL") == [f"**Here** {WORDS}"] == [saved_reply(tusk_slack, chat)]
    assert slack.posted == []


async def test_a_dm_reply_is_posted_then_updated(tusk_slack, slack, fake_llm):
    """In a DM (no thread to stream into) the reply is posted, then updated in place as mrkdwn."""
    await slack.wait_connected()
    fake_llm.script(Reply(text=f"**Here** {WORDS}", token_delay=0.01))
    await slack.send_event(slack.dm("tell me a lot"))
    await slack.wait_for(lambda: slack.texts() == [to_mrkdwn(f"**Here** {WORDS}")] and slack.reactions[-1][0]
                         == "reactions.remove", timeout=10)
    updates = [u for u in slack.updates if u["method"] == "chat.update"]
    assert len(slack.posted) == 1 and len(updates) >= 2 and slack.stream_calls == []
    assert all(g >= FAST - 0.02 for g in gaps(slack.posted + updates))
    assert saved_reply(tusk_slack, "D0ANN") == f"**Here** {WORDS}"


async def test_a_workspace_without_streaming_gets_updates(tusk_slack, slack, fake_llm):
    """chat.startStream refused: the reply falls back to chat.postMessage and chat.update, in the thread."""
    await slack.wait_connected()
    slack.streaming = False
    fake_llm.script(Reply(text=WORDS, token_delay=0.01))
    event = slack.mention("tell me")
    await slack.send_event(event)
    await slack.wait_for(lambda: slack.texts() == [WORDS], timeout=10)
    assert slack.posted[0]["thread_ts"] == event["ts"] and any(u["method"] == "chat.update" for u in slack.updates)


async def test_a_tool_step_in_a_thread_restarts_the_stream(tusk_slack, slack, fake_llm):
    """Text, then a tool call: the streamed text that is not the answer is taken away; the answer stays alone."""
    await slack.wait_connected()
    intro = "Let me check the clock for you, and then I will write a long and careful answer about it all. " * 2
    fake_llm.script(Reply(text=intro, tool_calls=[("c1", "current_time", {})], token_delay=0.005),
                    Reply(text=WORDS, token_delay=0.005))
    await slack.send_event(slack.mention("what time, at length"))
    await slack.wait_for(lambda: slack.texts() == [WORDS], timeout=10)
    assert [u["method"] for u in slack.updates] == ["chat.delete"]


async def test_tusks_own_sentence_replaces_a_tool_status_as_written(tusk_slack, slack, fake_llm):
    """A failure after a tool step in a DM: the status message goes and the sentence is posted as `send` posts
    Tusk's own words (escaped, mrkdwn off), so its backticks show."""
    await slack.wait_connected()
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})]), Reply(status=401, delay=0.6))
    await slack.send_event(slack.dm("what time is it?"))
    sentence = "The model provider refused Tusk's API key; the operator can run `tusk doctor`."
    await slack.wait_for(lambda: slack.texts() == [sentence], timeout=10)
    assert [shown(p["text"]) for p in slack.posted[:1]] == ["checking the time…"]
    assert [u["method"] for u in slack.updates] == ["chat.delete"] and slack.seen()[-1] == sentence


async def test_a_cut_stream_in_a_thread_ends_with_the_note(tusk_slack, slack, fake_llm):
    """Cut mid-reply: the streamed message ends with the note, which the session keeps; the next request is legal."""
    await slack.wait_connected()
    fake_llm.script(Reply(text=WORDS, token_delay=0.005, cut_after=80))
    event = slack.mention("tell me")
    await slack.send_event(event)
    await slack.wait_for(lambda: any(c["method"] == "chat.stopStream" for c in slack.stream_calls), timeout=10)
    (text,) = slack.texts()
    assert text.endswith(CUT_NOTE) and text == saved_reply(tusk_slack, f"C0GENERAL-{event['ts']}")
    await slack.send_event(slack.mention("go on", thread_ts=event["ts"]))
    await fake_llm.wait_for_requests(2)
    assert violations(fake_llm.requests[-1]["messages"]) == []
