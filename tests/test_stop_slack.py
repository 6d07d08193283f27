"""/stop on Slack: a mention in the reply's thread, `/tusk stop` in the channel, and in a DM."""

import contextlib

import pytest

from bot.app import TuskApp
from bot.stop import NOTHING_TO_STOP, stopped_note
from channels.slack import stream as slack_stream
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_slack import FakeSlack
from tests.legality import violations
from tests import kept

LONG = " ".join(f"word{i}" for i in range(600)) + "."


@pytest.fixture
async def slack():
    async with FakeSlack(bot_user_id="U0TUSK") as fake:
        fake.add_user("U0ANN", "ann")
        fake.add_user("U0BOB", "bob")
        yield fake


@pytest.fixture
async def tusk_slack(make_settings, slack, monkeypatch):
    monkeypatch.setattr(slack_stream, "INTERVAL", 0.2)
    settings = make_settings(SLACK_BOT_TOKEN=slack.bot_token, SLACK_APP_TOKEN=slack.app_token,
                             SLACK_API_URL=slack.api_url)
    async with contextlib.AsyncExitStack() as stack:
        app = TuskApp(settings)
        app.add_platforms()
        yield await stack.enter_async_context(app)


def saved(app, chat):
    session = kept.on_disk(app, "slack", chat)
    return kept.on_disk(app, "slack", chat).unconsolidated


def streamed(slack):
    return [c for c in slack.stream_calls if c["method"] == "chat.appendStream"]


async def test_a_mention_in_the_thread_stops_the_streamed_reply(tusk_slack, slack, fake_llm):
    """Bob mentions Tusk with /stop in the thread being answered: the stream ends on the text so far and the
    note naming him, which the session keeps; the thread's next message is answered as usual."""
    await slack.wait_connected()
    fake_llm.script(Reply(text=LONG, token_delay=0.02), Reply(text="next one"))
    question = slack.mention("tell me a lot")
    await slack.send_event(question)
    await slack.wait_for(lambda: len(streamed(slack)) >= 2, timeout=10)
    await slack.send_event(slack.mention("/stop", user="U0BOB", thread_ts=question["ts"]))
    await slack.wait_for(lambda: any(c["method"] == "chat.stopStream" for c in slack.stream_calls), timeout=10)
    chat = f"C0GENERAL-{question['ts']}"
    reply = saved(tusk_slack, chat)[-1].content
    assert reply.endswith(stopped_note("bob")) and slack.texts("C0GENERAL") == [reply]
    await slack.send_event(slack.mention("and then?", thread_ts=question["ts"]))
    await slack.wait_for(lambda: "next one" in slack.texts("C0GENERAL"), timeout=10)
    assert violations(fake_llm.requests[-1]["messages"]) == [] and len(fake_llm.requests) == 2


async def test_the_slash_command_in_the_channel_stops_the_senders_thread_reply(tusk_slack, slack, fake_llm):
    """`/tusk stop` typed in the channel (Slack gives it no thread) stops the reply Ann asked for in a thread
    there; with nothing running, it answers her alone that there is nothing to stop."""
    await slack.wait_connected()
    fake_llm.script(Reply(text=LONG, token_delay=0.02))
    question = slack.mention("tell me a lot")
    await slack.send_event(question)
    await slack.wait_for(lambda: len(streamed(slack)) >= 2, timeout=10)
    await slack.send_command("/tusk", "stop", channel="C0GENERAL")
    await slack.wait_for(lambda: any(c["method"] == "chat.stopStream" for c in slack.stream_calls), timeout=10)
    assert saved(tusk_slack, f"C0GENERAL-{question['ts']}")[-1].content.endswith(stopped_note("ann"))
    await slack.send_command("/tusk", "stop", channel="C0GENERAL")
    await slack.wait_for(lambda: slack.responses, timeout=10)
    assert [r["text"] for r in slack.responses] == [NOTHING_TO_STOP]
    assert slack.responses[0]["response_type"] == "ephemeral"


async def test_a_stop_in_a_dm_ends_the_updated_reply(tusk_slack, slack, fake_llm):
    """In a DM (posted, then updated) `/tusk stop` ends the reply: its last update is the text so far, noted."""
    await slack.wait_connected()
    fake_llm.script(Reply(text=LONG, token_delay=0.02))
    await slack.send_event(slack.dm("tell me a lot"))
    await slack.wait_for(lambda: slack.posted and slack.updates, timeout=10)
    await slack.send_command("/tusk", "stop", channel="D0ANN")
    await slack.wait_for(lambda: not tusk_slack.bus.active_chats and slack.texts("D0ANN")[-1].endswith("(stopped)_"),
                         timeout=10)
    assert saved(tusk_slack, "D0ANN")[-1].content.endswith(stopped_note(""))
