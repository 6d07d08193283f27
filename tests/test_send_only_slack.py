"""A send-only Slack channel (`receive=False`, a cluster's worker): replies, streamed replies, slash command answers
and voice from the message's chat key and ReplyRef alone, with no Socket Mode connection or events route."""

import asyncio
import socket

import pytest

from bot.errors import ConfigError
from bot.events import OutboundMessage, OutboundVoice
from bot.speech.encode import encode
from channels.slack import SlackChannel, SlackSettings
from channels.slack.events import command_to_inbound, to_inbound
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.fake_speech import audio_file

LONG = " ".join(f"word{i}" for i in range(40))


@pytest.fixture
async def slack():
    async with FakeSlack(bot_user_id="U0TUSK") as fake:
        fake.add_user("U0ANN", "ann")
        yield fake


def nothing_published(msg):
    raise AssertionError(f"a send-only channel published {msg}")


@pytest.fixture
async def sender(slack):
    """A started send-only channel on the fake, set up for Socket Mode as a receiving one would be; stopped after."""
    channel = SlackChannel(SlackSettings(slack.bot_token, app_token=slack.app_token, api_url=slack.api_url),
                           nothing_published, receive=False)
    await channel.start()
    yield channel
    await channel.stop()


def taken(slack, event):
    """The InboundMessage the receiving process made of `event` (channels/slack/events.py, pure)."""
    msg = to_inbound(event, bot_user_id=slack.bot_user_id, thread_sessions=True)
    assert msg is not None
    return msg


def methods(slack):
    return [method for method, _ in slack.calls]


async def test_start_signs_in_and_opens_no_socket(sender, slack):
    """Starting is auth.test alone: no apps.connections.open, no Socket Mode connection."""
    assert methods(slack) == ["auth.test"] and slack.connections == 0 and sender.team_id == slack.team_id


async def test_http_event_settings_take_no_port(slack):
    """With a signing secret and a port already in use, a send-only channel starts: it serves no events route."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        settings = SlackSettings(slack.bot_token, signing_secret="secret", api_url=slack.api_url,
                                 http_port=busy.getsockname()[1])
        channel = SlackChannel(settings, nothing_published, receive=False)
        await channel.start()
        try:
            await channel.send(OutboundMessage(taken(slack, slack.dm("hi")).key, "hello"))
        finally:
            await channel.stop()
    assert channel.port is None and [p["text"] for p in slack.posted] == ["hello"]


async def test_replies_in_a_dm_and_in_a_mentions_thread(sender, slack):
    """A DM's reply goes to the DM; a channel mention's reply goes to its thread, from the ReplyRef alone."""
    dm, mention = slack.dm("hi"), slack.mention("tell me")
    await sender.send(OutboundMessage.answer(taken(slack, dm), "Hello **Ann**"))
    await sender.send(OutboundMessage.answer(taken(slack, mention), "Here you are"))
    first, second = slack.posted
    assert (first["channel"], first.get("thread_ts"), first["text"]) == ("D0ANN", None, "Hello *Ann*")
    assert (second["channel"], second["thread_ts"], second["text"]) == ("C0GENERAL", mention["ts"], "Here you are")
    assert slack.connections == 0


async def test_a_streamed_thread_reply_uses_chat_streaming_with_the_asker(sender, slack):
    """A draft in a mention's thread streams (start, appends, stop) to the asker in the sender's team, and the
    message ends on the final text."""
    mention = slack.mention("tell me a lot")
    draft = sender.draft(taken(slack, mention))
    await draft.show("Here")
    await draft.show(f"Here {LONG}")
    await draft.finish(f"Here {LONG}.")
    calls = slack.stream_calls
    assert [c["method"] for c in calls][0] == "chat.startStream" and calls[-1]["method"] == "chat.stopStream"
    assert (calls[0]["thread_ts"], calls[0]["recipient_user_id"], calls[0]["recipient_team_id"]) == (
        mention["ts"], "U0ANN", slack.team_id)
    assert slack.texts("C0GENERAL") == [f"Here {LONG}."] and slack.posted == [] and slack.connections == 0


async def test_a_streamed_dm_reply_is_posted_then_updated(sender, slack):
    """In a DM the draft posts one message and updates it in place, ending on the final mrkdwn."""
    draft = sender.draft(taken(slack, slack.dm("tell me")))
    await draft.show("Once")
    await draft.show("Once upon")
    await draft.finish("Once upon a **time**.")
    assert len(slack.posted) == 1 and [u["method"] for u in slack.updates] == ["chat.update", "chat.update"]
    assert slack.texts("D0ANN") == ["Once upon a *time*."] and slack.stream_calls == []


async def test_a_slash_commands_answer_goes_through_its_response_url(sender, slack):
    """A command taken elsewhere is answered to its asker alone, through the response_url in its ReplyRef."""
    command = command_to_inbound(slack.command_payload("/status", channel="C0GENERAL"), frozenset({"status"}))
    assert command is not None
    await sender.send(OutboundMessage.answer(command, "All well", verbatim=True))
    (response,) = slack.responses
    assert (response["text"], response["response_type"]) == ("All well", "ephemeral") and slack.posted == []


async def test_a_voice_reply_is_uploaded_into_the_thread(sender, slack):
    """A reply read out is uploaded where the mention's reply goes: its channel and thread."""
    mention = slack.mention("say it")
    msg = taken(slack, mention)
    await sender.voice.send_voice(OutboundVoice(msg.key, encode(audio_file(2.0, "mp3")), caption="Sunny",
                                                reply_to=msg.id, ref=msg.ref))
    (upload,) = slack.uploads
    assert (upload["channel_id"], upload["thread_ts"]) == ("C0GENERAL", mention["ts"])


async def test_pause_keeps_sending_and_stop_closes_the_client(slack):
    """Paused, a send-only channel still sends; stopped, it is closed, and a second stop does nothing."""
    channel = SlackChannel(SlackSettings(slack.bot_token, app_token=slack.app_token, api_url=slack.api_url),
                           nothing_published, receive=False)
    await channel.start()
    await channel.pause()
    await channel.send(OutboundMessage(taken(slack, slack.dm("hi")).key, "still here"))
    await channel.stop()
    await channel.stop()
    assert [p["text"] for p in slack.posted] == ["still here"] and slack.connections == 0
    assert channel.draft(taken(slack, slack.dm("more"))) is None


async def test_the_thinking_marker_shows_until_the_turn_is_done(sender, slack):
    """A worker marks the question with the hourglass while the turn runs, and takes it off when it is done."""
    mention = slack.mention("think")
    done = asyncio.get_running_loop().create_future()
    typing = asyncio.create_task(sender.typing(taken(slack, mention), done))
    await slack.wait_for(lambda: slack.reacted)
    done.set_result(None)
    await typing
    assert [(method, params["timestamp"]) for method, params in slack.reactions] == [
        ("reactions.add", mention["ts"]), ("reactions.remove", mention["ts"])] and not slack.reacted


async def test_a_refused_token_stops_the_start_with_the_fix(slack):
    """A token Slack refuses is a ConfigError naming SLACK_BOT_TOKEN, and no socket is opened."""
    channel = SlackChannel(SlackSettings("xoxb-wrong", app_token=slack.app_token, api_url=slack.api_url),
                           nothing_published, receive=False)
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        await channel.start()
    assert methods(slack) == ["auth.test"] and slack.connections == 0
