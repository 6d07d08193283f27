"""A send-only Telegram channel (`receive=False`, a cluster's worker): replies, drafts and voice from the message's
chat key and ReplyRef alone, with no polling, webhook or command menu of its own."""

import asyncio

import pytest

from bot.errors import ConfigError
from bot.events import ChatKey, InboundMessage, OutboundMessage, OutboundVoice, ReplyRef
from bot.speech.encode import encode
from channels.telegram import TelegramChannel, TelegramSettings
from tests.fakes.fake_speech import audio_file
from tests.fakes.fake_telegram import FakeTelegram

MENU = [("help", "what I can do")]
RECEIVING = {"getUpdates", "setWebhook", "deleteWebhook", "setMyCommands", "getWebhookInfo", "answerCallbackQuery"}
LONG = " ".join(f"word{i}" for i in range(40))


@pytest.fixture
async def tg():
    async with FakeTelegram(token="123:ABC", username="tusk_bot") as fake:
        yield fake


def nothing_published(msg):
    raise AssertionError(f"a send-only channel published {msg}")


@pytest.fixture
async def sender(tg):
    """A started send-only channel on the fake (set up as a receiving one would be: polling); stopped after."""
    channel = TelegramChannel(TelegramSettings(tg.token, api_base=tg.base_url, poll_timeout=1), nothing_published,
                              MENU, receive=False)
    await channel.start()
    yield channel
    await channel.stop()


def topic_question(tg, text="@tusk_bot tell me"):
    """A question in a forum topic, taken by another process (it stays queued here: nobody polls this fake's
    queue), and the InboundMessage that process would hand a worker."""
    update = tg.push_message(-1001, text, chat_type="supergroup", thread_id=7)
    message_id = update["message"]["message_id"]
    msg = InboundMessage(ChatKey("telegram", "-1001.7"), text, "7", "Alice", is_group=True,
                         ref=ReplyRef(message=str(message_id)))
    return msg, message_id


def methods(tg):
    return [method for method, _ in tg.calls]


async def test_start_checks_the_token_and_opens_nothing_else(sender, tg):
    """Starting is getMe alone: no getUpdates, no webhook set or deleted, no command menu."""
    assert methods(tg) == ["getMe"] and sender.app is None and tg.webhook is None and tg.commands == []


async def test_a_webhook_setting_opens_no_server_and_sets_no_webhook(tg):
    """With TELEGRAM_WEBHOOK_URL set, a send-only channel neither listens nor tells Telegram a webhook."""
    settings = TelegramSettings(tg.token, api_base=tg.base_url, webhook_url="https://example.org/tg",
                                webhook_port=0)
    channel = TelegramChannel(settings, nothing_published, MENU, receive=False)
    await channel.start()
    try:
        await channel.send(OutboundMessage(ChatKey("telegram", "42"), "hello"))
    finally:
        await channel.stop()
    assert methods(tg) == ["getMe", "sendMessage"] and tg.webhook is None


async def test_replies_in_a_private_chat_and_in_a_topic_quoting_the_question(sender, tg):
    """A DM reply goes to the user's chat; a topic's reply goes to its thread quoting the question, from the
    ReplyRef alone; nothing was polled."""
    dm = InboundMessage(ChatKey("telegram", "42"), "hi", "42", "Bob")
    question, message_id = topic_question(tg)
    await sender.send(OutboundMessage.answer(dm, "Hello **Bob**"))
    await sender.send(OutboundMessage.answer(question, "Here you are"))
    first, second = tg.sent
    assert (first["chat_id"], first["plain"], first.get("reply_parameters")) == (42, "Hello Bob", None)
    assert (second["chat_id"], second["message_thread_id"], second["plain"]) == (-1001, 7, "Here you are")
    assert second["reply_parameters"]["message_id"] == message_id
    assert "getUpdates" not in methods(tg)


async def test_a_streamed_group_reply_is_sent_then_edited_in_place(sender, tg):
    """A draft in a topic: one message quoting the question, edited as the text grows, ending on the formatted
    final text; it carries no Stop button (the press would reach the receiving process, not this one)."""
    question, message_id = topic_question(tg)
    draft = sender.draft(question)
    await draft.show("Here")
    await draft.show(f"Here {LONG}")
    await draft.finish(f"**Here** {LONG}")
    sent = [m for m in tg.sent if m["method"] == "sendMessage"]
    edits = [m for m in tg.sent if m["method"] == "editMessageText"]
    assert len(sent) == 1 and sent[0]["reply_parameters"]["message_id"] == message_id
    assert (sent[0]["message_thread_id"], sent[0].get("reply_markup")) == (7, None)
    assert [e["plain"] for e in edits] == [f"Here {LONG}", f"Here {LONG}"]
    assert edits[-1]["parse_mode"] == "HTML" and edits[-1]["text"].startswith("<b>Here</b>")
    assert tg.markup(-1001, sent[0]["message_id"]) is None
    assert not RECEIVING & set(methods(tg))


async def test_a_streamed_private_reply_is_a_draft_then_the_message(sender, tg):
    """In a DM the text grows in sendMessageDraft (without can_stop), then the final message is sent."""
    dm = InboundMessage(ChatKey("telegram", "42"), "tell me", "42", "Bob")
    draft = sender.draft(dm)
    await draft.show("Once")
    await draft.show("Once upon")
    await draft.finish("Once upon a time.")
    assert [d["plain"] for d in tg.drafts] == ["Once", "Once upon"]
    assert not any("can_stop" in d for d in tg.drafts) and len({d["draft_id"] for d in tg.drafts}) == 1
    assert [m["plain"] for m in tg.sent] == ["Once upon a time."]
    assert not RECEIVING & set(methods(tg))


async def test_a_voice_reply_goes_to_the_topic_quoting_the_question(sender, tg):
    """sendVoice from the ReplyRef: the topic's thread, the question quoted, the caption formatted."""
    question, message_id = topic_question(tg)
    audio = encode(audio_file(2.0, "mp3"))
    await sender.voice.send_voice(OutboundVoice(question.key, audio, caption="It is **sunny**",
                                                reply_to=question.id, ref=question.ref))
    (voice,) = tg.voices
    assert (voice["chat_id"], voice["message_thread_id"], voice["caption_plain"]) == (-1001, 7, "It is sunny")
    assert voice["reply_parameters"]["message_id"] == message_id and voice["audio"] == audio.data
    assert "getUpdates" not in methods(tg)


async def test_pause_keeps_sending_and_stop_closes_the_bot(tg):
    """Paused, a send-only channel still sends; stopped, it is closed and a second stop does nothing."""
    channel = TelegramChannel(TelegramSettings(tg.token, api_base=tg.base_url), nothing_published, MENU,
                              receive=False)
    await channel.start()
    await channel.pause()
    await channel.send(OutboundMessage(ChatKey("telegram", "42"), "still here"))
    await channel.stop()
    await channel.stop()
    assert [m["plain"] for m in tg.sent] == ["still here"] and channel.bot is None and channel.draft(
        InboundMessage(ChatKey("telegram", "42"), "x", "42")) is None


async def test_typing_shows_in_the_topic_until_the_turn_is_done(sender, tg):
    """A worker shows "typing" in the topic while the turn runs (sendChatAction), and stops when it is done."""
    question, _ = topic_question(tg)
    done = asyncio.get_running_loop().create_future()
    typing = asyncio.create_task(sender.typing(question, done))
    await tg.wait_for(lambda: "sendChatAction" in methods(tg))
    done.set_result(None)
    await typing
    (action,) = [p for m, p in tg.calls if m == "sendChatAction"]
    assert (action["chat_id"], action["message_thread_id"], action["action"]) == (-1001, 7, "typing")


async def test_a_refused_token_stops_the_start_with_the_fix(tg):
    """A token the Bot API refuses is a ConfigError naming TELEGRAM_BOT_TOKEN, and nothing is polled."""
    channel = TelegramChannel(TelegramSettings("123:WRONG", api_base=tg.base_url), nothing_published, MENU,
                              receive=False)
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN"):
        await channel.start()
    assert methods(tg) == ["getMe"] and channel.bot is None


async def test_a_reply_to_an_upgraded_group_goes_to_its_supergroup(sender, tg):
    """A worker that never saw the upgrade's service messages learns it from Telegram's refusal: every piece of
    the reply goes to the supergroup, and later replies go there at once."""
    tg.migrate(-4001, -1004001)
    group = InboundMessage(ChatKey("telegram", "-4001"), "hi", "7", is_group=True)
    await sender.send(OutboundMessage.answer(group, "x" * 5000))
    await sender.send(OutboundMessage.answer(group, "and more"))
    assert [(m["chat_id"], len(m["plain"])) for m in tg.sent] == [(-1004001, 4096), (-1004001, 904),
                                                                  (-1004001, 8)]
    assert [p["chat_id"] for m, p in tg.calls if m == "sendMessage"] == [-4001, -1004001, -1004001, -1004001]
