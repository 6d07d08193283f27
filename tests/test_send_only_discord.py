"""A send-only Discord channel (`receive=False`, a cluster's worker): replies, drafts, slash command answers and voice
from the message's chat key and ReplyRef alone, through discord.py's HTTP client, with no gateway connection."""

import asyncio

import pytest

from bot.errors import ConfigError
from bot.events import ChatKey, InboundMessage, OutboundMessage, OutboundVoice, ReplyRef
from bot.speech.encode import encode
from channels.discord_bot import DiscordChannel, DiscordSettings
from tests.fakes.fake_discord import FakeDiscord, snowflake
from tests.fakes.fake_speech import audio_file
from tests.published import Published

MENU = [("status", "how I am")]
LONG = " ".join(f"word{i}" for i in range(40))
LOGIN = [("GET", "/api/v10/users/@me"), ("GET", "/api/v10/oauth2/applications/@me")]


@pytest.fixture
async def dc():
    async with FakeDiscord(token="fake-discord-token-123") as fake:
        fake.guild = fake.add_guild()
        fake.channel = fake.guild.add_channel()
        fake.thread = fake.guild.add_thread(fake.channel)
        fake.alice = fake.add_user("alice")
        fake.dm = snowflake()
        yield fake


def nothing_published(msg):
    raise AssertionError(f"a send-only channel published {msg}")


@pytest.fixture
async def start(dc):
    """Starts Discord channels on the fake (`receive=False`: a worker; else an ingress with what it published);
    all stopped after."""
    started = []

    async def start(receive=False):
        published = Published()
        channel = DiscordChannel(DiscordSettings(dc.token, api_base=dc.api_base, gateway_url=dc.gateway_url),
                                 published if receive else nothing_published, MENU, receive=receive)
        await channel.start()
        started.append(channel)
        return (channel, published) if receive else channel

    yield start
    for channel in started:
        await channel.stop()


def thread_question(dc):
    """A question in a guild thread, as the ingress hands it to a worker (its ReplyRef quotes it)."""
    question_id = snowflake()
    return InboundMessage(ChatKey("discord", dc.thread), "tell me", dc.alice["id"], "alice", is_group=True,
                          ref=ReplyRef(message=question_id)), question_id


async def test_start_logs_in_and_opens_no_gateway(start, dc):
    """Starting is the token's login over REST (the bot user, the application): no gateway, no command sync."""
    worker = await start()
    assert dc.requests == LOGIN and dc.connections == 0 and dc.identify is None and dc.commands == {}
    assert worker.client is not None and worker.client.application_id == int(dc.application_id)


async def test_replies_in_a_dm_and_in_a_thread_quoting_the_question(start, dc):
    """A DM's reply goes to the DM unquoted; a thread's reply goes to the thread quoting the question, each with
    an enforced nonce, from the ReplyRef alone; the gateway is never opened."""
    worker = await start()
    dm = InboundMessage(ChatKey("discord", dc.dm), "hi", dc.alice["id"], "alice",
                        ref=ReplyRef(message=snowflake(), quote=False))
    question, question_id = thread_question(dc)
    await worker.send(OutboundMessage.answer(dm, "Hello"))
    await worker.send(OutboundMessage.answer(question, "Here you are"))
    first, second = dc.sent
    assert (first["channel_id"], first["content"], "message_reference" in first) == (dc.dm, "Hello", False)
    assert (second["channel_id"], second["content"]) == (dc.thread, "Here you are")
    assert str(second["message_reference"]["message_id"]) == question_id
    assert all(m["enforce_nonce"] is True and m["nonce"] for m in dc.sent) and dc.connections == 0


async def test_a_streamed_reply_is_sent_then_edited_without_a_stop_button(start, dc):
    """A draft in a thread: one message quoting the question, edited as the text grows, ending on the final text;
    no Stop button (a press would reach the process on the gateway, which does not know this reply)."""
    worker = await start()
    question, question_id = thread_question(dc)
    draft = worker.draft(question)
    await draft.show("Here")
    await draft.show(f"Here {LONG}")
    await draft.finish(f"**Here** {LONG}.")
    (sent,) = dc.sent
    assert sent["channel_id"] == dc.thread and str(sent["message_reference"]["message_id"]) == question_id
    assert [e["content"] for e in dc.edits] == [f"Here {LONG}", f"**Here** {LONG}."]
    assert not sent.get("components") and dc.components(sent["id"]) == [] and dc.connections == 0


async def test_a_slash_command_taken_by_the_ingress_is_answered_by_a_worker(start, dc):
    """/status reaches the ingress, which defers it; the worker answers through the interaction's webhook, from
    the token in the ReplyRef and the application id its login learnt."""
    ingress, published = await start(receive=True)
    worker = await start()
    await dc.wait_connected()
    interaction = await dc.command("status", dc.channel, dc.alice, guild=dc.guild)
    await dc.wait_for(lambda: published and dc.callbacks)
    (command,) = published
    assert command.ref is not None and command.ref.interaction == interaction["token"]
    await worker.send(OutboundMessage.answer(command, "All well", verbatim=True))
    (followup,) = dc.followups
    assert (followup["token"], followup["content"]) == (interaction["token"], "All well")
    assert dc.connections == 1 and dc.sent == []  # the ingress's gateway only; no channel message


async def test_a_voice_reply_quotes_the_question(start, dc):
    """A reply read out is a voice message in the thread, quoting the question, with an enforced nonce."""
    worker = await start()
    question, question_id = thread_question(dc)
    audio = encode(audio_file(2.0, "mp3"))
    await worker.voice.send_voice(OutboundVoice(question.key, audio, reply_to=question.id, ref=question.ref))
    (voice,) = dc.voices
    assert voice["channel_id"] == dc.thread and voice["audio"] == audio.data
    assert str(voice["message_reference"]["message_id"]) == question_id and voice["enforce_nonce"] is True


async def test_a_reply_sent_again_by_another_worker_shows_once(start, dc):
    """A DM taken by the ingress; one worker streams and sends the reply and stops (as if it died before its
    commit); another does the same turn again: the chat shows each message once, ending on the second's text."""
    ingress, published = await start(receive=True)
    await dc.wait_connected()
    await dc.message(dc.dm, dc.alice, "tell me")
    await dc.wait_for(lambda: published)
    (msg,) = published
    for attempt in ("first", "second"):
        worker = await start()
        draft = worker.draft(msg)
        await draft.show(f"The {attempt}")
        await draft.finish(f"The {attempt} {LONG}.")
        await worker.send(OutboundMessage.answer(msg, "And a note."))
        await worker.stop()
    assert [m["content"] for m in dc.created] == [f"The second {LONG}.", "And a note."]
    assert len(dc.sent) == 2 and len(dc.repeats) == 2 and dc.connections == 1


async def test_pause_keeps_sending_and_stop_closes_the_client(start, dc):
    """Paused, a send-only channel still sends; stopped, it is closed, and a second stop does nothing."""
    worker = await start()
    await worker.pause()
    await worker.send(OutboundMessage(ChatKey("discord", dc.dm), "still here"))
    await worker.stop()
    await worker.stop()
    assert [m["content"] for m in dc.sent] == ["still here"] and worker.client is None
    assert worker.draft(InboundMessage(ChatKey("discord", dc.dm), "x", "1")) is None and dc.connections == 0


async def test_typing_shows_in_the_thread_until_the_turn_is_done(start, dc):
    """A worker shows typing in the thread while the turn runs, and stops when it is done."""
    worker = await start()
    question, _ = thread_question(dc)
    done = asyncio.get_running_loop().create_future()
    typing = asyncio.create_task(worker.typing(question, done))
    await dc.wait_for(lambda: dc.typing)
    done.set_result(None)
    await typing
    assert dc.typing == [dc.thread] and dc.connections == 0


async def test_a_refused_token_stops_the_start_with_the_fix(dc):
    """A token Discord refuses is a ConfigError naming DISCORD_BOT_TOKEN, and no gateway is opened."""
    worker = DiscordChannel(DiscordSettings("wrong-token", api_base=dc.api_base, gateway_url=dc.gateway_url),
                            nothing_published, MENU, receive=False)
    with pytest.raises(ConfigError, match="DISCORD_BOT_TOKEN"):
        await worker.start()
    assert dc.requests == LOGIN[:1] and dc.connections == 0 and worker.client is None
