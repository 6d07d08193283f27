"""The fake Telegram server, exercised through real python-telegram-bot."""

import asyncio
import time

import aiohttp
import pytest
from telegram import Bot, BotCommand, ReplyParameters, Update
from telegram.error import BadRequest, Conflict, EndPointNotFound, InvalidToken, RetryAfter
from telegram.ext import ApplicationBuilder, CommandHandler, MessageHandler, filters

from tests.fakes.fake_telegram import FakeTelegram, parse_html


@pytest.fixture
async def tg():
    async with FakeTelegram(token="123:ABC", username="tusk_bot") as fake:
        yield fake


def make_bot(tg: FakeTelegram, token: str | None = None) -> Bot:
    return Bot(token or tg.token, base_url=tg.base_url + "/bot", base_file_url=tg.base_url + "/file/bot")


@pytest.fixture
async def ptb(tg):
    async with make_bot(tg) as bot:
        yield bot


async def test_get_me(ptb, tg):
    """Bot.initialize() learns the bot's id and username from getMe."""
    assert (ptb.bot.id, ptb.bot.username, ptb.bot.is_bot) == (123, "tusk_bot", True)
    assert tg.calls[0][0] == "getMe"


async def test_wrong_token_is_invalid_token(tg):
    """A token the fake does not know is answered 401, which PTB raises as InvalidToken."""
    with pytest.raises(InvalidToken, match="rejected"):
        async with make_bot(tg, token="999:WRONG"):
            pass


async def test_unknown_method(ptb):
    """An unknown method is a 404, which PTB reports as EndPointNotFound."""
    with pytest.raises(EndPointNotFound):
        await ptb.do_api_request("noSuchMethod")


async def test_wire_format(tg):
    """JSON bodies are accepted too, and errors have Telegram's shape."""
    api = f"{tg.base_url}/bot{tg.token}"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{api}/sendMessage", json={"chat_id": "42", "text": "hi", "reply_parameters":
                                                         '{"message_id": 1}'}) as resp:
            assert (await resp.json())["result"]["chat"]["id"] == 42
        tg.fail_next("sendMessage", status=429, retry_after=7)
        async with http.post(f"{api}/sendMessage", data={"chat_id": "42", "text": "hi"}) as resp:
            assert (resp.status, await resp.json()) == (429, {
                "ok": False, "error_code": 429, "description": "Too Many Requests: retry after 7",
                "parameters": {"retry_after": 7}})
        async with http.post(f"{api}/noSuchMethod") as resp:
            assert (resp.status, await resp.json()) == (404, {
                "ok": False, "error_code": 404, "description": "Not Found: method not found"})
        async with http.post(f"{tg.base_url}/bot1:WRONG/getMe") as resp:
            assert (resp.status, (await resp.json())["description"]) == (401, "Unauthorized")
    assert tg.sent[0]["chat_id"] == 42 and tg.sent[0]["reply_parameters"] == {"message_id": 1}


async def test_send_message_round_trip(ptb, tg):
    """sendMessage answers a full Message and records the decoded parameters."""
    pushed = tg.push_message(chat_id=-100, text="question", chat_type="supergroup", thread_id=5)
    asked = pushed["message"]["message_id"]
    msg = await ptb.send_message(-100, "<b>bold</b> &amp; <a href='https://x.y/?a=1&amp;b=2'>link</a>",
                                 parse_mode="HTML", message_thread_id=5,
                                 reply_parameters=ReplyParameters(message_id=asked))
    assert msg.text == "bold & link"
    assert (msg.chat.id, msg.chat.type, msg.from_user.id, msg.message_thread_id) == (-100, "supergroup", 123, 5)
    assert msg.reply_to_message.message_id == asked
    [sent] = tg.sent
    assert sent["chat_id"] == -100 and sent["message_thread_id"] == 5
    assert sent["reply_parameters"] == {"message_id": asked}
    assert sent["plain"] == "bold & link" and sent["message_id"] == msg.message_id


async def test_html_parse_error(ptb, tg):
    """Unclosed HTML is refused like Telegram does, and nothing counts as sent."""
    with pytest.raises(BadRequest, match="(?i)can't parse entities"):
        await ptb.send_message(42, "<b>open", parse_mode="HTML")
    assert tg.sent == [] and tg.calls[-1][0] == "sendMessage"


async def test_text_without_a_parse_mode_is_shown_as_sent_and_an_unknown_mode_is_refused(ptb, tg):
    """No parse mode: `<persona>` and `*x*` are the text itself; a parse mode Telegram has not got is a 400."""
    await ptb.send_message(42, "3. a <persona> & *x*\n5. b")
    assert tg.sent[0]["plain"] == "3. a <persona> & *x*\n5. b" and "parse_mode" not in tg.sent[0]
    with pytest.raises(BadRequest, match="(?i)unsupported parse_mode"):
        await ptb.send_message(42, "hi", parse_mode="Textile")
    assert len(tg.sent) == 1


@pytest.mark.parametrize("text", ["a < b", "<div>x</div>", "<b><i>x</b></i>", "</b>", "fish & chips",
                                  "&nbsp;", "<span>x</span>", "&#xD800;"])
def test_parse_html_refuses(text):
    """Stray '<', unknown tags, bad nesting and unsupported entities are refused."""
    with pytest.raises(ValueError):
        parse_html(text)


@pytest.mark.parametrize(("text", "plain"), [
    ("<b>a</b> <STRONG>b</STRONG> <tg-spoiler>c</tg-spoiler>", "a b c"),
    ('<span class="tg-spoiler">s</span> <pre><code class="language-py">x = 1</code></pre>', "s x = 1"),
    ("1 &lt; 2 &gt; 0 &quot;q&quot; &#65;&#x42; a > b", '1 < 2 > 0 "q" AB a > b'),
])
def test_parse_html_accepts(text, plain):
    """Allowed tags, named and numeric entities give the visible text."""
    assert parse_html(text) == plain


async def test_message_too_long(ptb, tg):
    """The 4096 limit counts UTF-16 units of the visible text, after entity parsing."""
    await ptb.send_message(42, "&amp;" * 4096, parse_mode="HTML")
    await ptb.send_message(42, "\N{GRINNING FACE}" * 2048)
    with pytest.raises(BadRequest, match="(?i)message is too long"):
        await ptb.send_message(42, "\N{GRINNING FACE}" * 2048 + "x")
    assert len(tg.sent) == 2


async def test_flood_wait_is_retry_after(ptb, tg):
    """A scripted 429 surfaces as RetryAfter with its retry_after; the next call succeeds."""
    tg.fail_next("sendMessage", status=429, retry_after=3)
    with pytest.raises(RetryAfter) as caught:
        await ptb.send_message(42, "hi")
    assert caught.value.retry_after == 3
    await ptb.send_message(42, "hi again")
    assert [s["text"] for s in tg.sent] == ["hi again"]


async def test_scripted_bad_request(ptb, tg):
    """A scripted 400 carries its description into BadRequest."""
    tg.fail_next("sendMessage", status=400, description="Bad Request: can't parse entities: nope")
    with pytest.raises(BadRequest, match="nope"):
        await ptb.send_message(42, "hi")


async def test_edit_message_text(ptb, tg):
    """editMessageText changes a bot message; an identical edit is 'message is not modified'."""
    msg = await ptb.send_message(42, "draft")
    edited = await ptb.edit_message_text("final", chat_id=42, message_id=msg.message_id)
    assert (edited.text, edited.message_id) == ("final", msg.message_id) and edited.edit_date
    with pytest.raises(BadRequest, match="(?i)message is not modified"):
        await ptb.edit_message_text("final", chat_id=42, message_id=msg.message_id)
    with pytest.raises(BadRequest, match="(?i)message to edit not found"):
        await ptb.edit_message_text("x", chat_id=42, message_id=9999)
    assert [(s["method"], s["plain"]) for s in tg.sent] == [("sendMessage", "draft"), ("editMessageText", "final")]


async def test_get_updates_offset_confirms(ptb, tg):
    """Updates repeat until confirmed with offset; limit caps the batch."""
    first, second = tg.push_message(text="one"), tg.push_message(text="two")
    assert [u.update_id for u in await ptb.get_updates()] == [first["update_id"], second["update_id"]]
    assert [u.message.text for u in await ptb.get_updates(limit=1)] == ["one"]
    assert [u.message.text for u in await ptb.get_updates(offset=second["update_id"])] == ["two"]
    assert await ptb.get_updates(offset=second["update_id"] + 1) == ()


async def test_long_poll_returns_when_pushed(ptb, tg):
    """A long poll waits for an update and returns as soon as one is pushed."""
    started = time.monotonic()
    poll = asyncio.create_task(ptb.get_updates(timeout=5))
    await tg.wait_for(lambda: any(m == "getUpdates" for m, _ in tg.calls))
    tg.push_message(text="wake up")
    [update] = await poll
    assert update.message.text == "wake up" and time.monotonic() - started < 2


async def test_long_poll_times_out_empty(ptb):
    """With nothing queued, a long poll answers an empty list after `timeout` seconds."""
    started = time.monotonic()
    assert await ptb.get_updates(timeout=1) == ()
    assert 0.9 < time.monotonic() - started < 2


async def test_allowed_updates_filter(ptb, tg):
    """allowed_updates=['message'] hides edited messages."""
    tg.push_message(text="new")
    tg.push_message(text="changed", edited=True)
    [update] = await ptb.get_updates(allowed_updates=["message"])
    assert update.message.text == "new"


async def test_webhook_blocks_get_updates(ptb, tg):
    """While a webhook is set, getUpdates is a Conflict; deleteWebhook lifts it."""
    await ptb.set_webhook("https://example.org/hook", secret_token="s3cret")
    assert tg.webhook == {"url": "https://example.org/hook", "secret_token": "s3cret"}
    assert (await ptb.get_webhook_info()).url == "https://example.org/hook"
    with pytest.raises(Conflict):
        await ptb.get_updates()
    await ptb.delete_webhook()
    assert tg.webhook is None and await ptb.get_updates() == ()


async def test_commands(ptb, tg):
    """setMyCommands is recorded and read back; deleteMyCommands clears it."""
    await ptb.set_my_commands([BotCommand("start", "Say hello"), BotCommand("forget", "Clear memory")])
    assert tg.commands == [{"command": "start", "description": "Say hello"},
                           {"command": "forget", "description": "Clear memory"}]
    assert [c.command for c in await ptb.get_my_commands()] == ["start", "forget"]
    await ptb.delete_my_commands()
    assert tg.commands == []


async def test_get_chat_member(ptb, tg):
    """getChatMember answers the scripted status, 'member' by default."""
    tg.push_message(chat_id=-100, chat_type="group", user_id=7, username="alice")
    tg.members[(-100, 7)] = "administrator"
    tg.members[(-100, 8)] = "creator"
    admin = await ptb.get_chat_member(-100, 7)
    assert (admin.status, admin.user.username) == ("administrator", "alice")
    assert (await ptb.get_chat_member(-100, 8)).status == "creator"
    assert (await ptb.get_chat_member(-100, 9)).status == "member"


async def test_pushed_messages_parse_as_ptb_updates(tg):
    """push_message builds updates PTB parses: entities in UTF-16 units, replies, topics, media, edits."""
    first = tg.push_message(chat_id=42, text="hi")
    raw = tg.push_message(chat_id=-100, chat_type="supergroup", text="\N{GRINNING FACE} /x @tusk_bot look",
                          reply_to_bot=True, thread_id=3)
    message = Update.de_json(raw, None).message
    assert [(e.type, e.offset, e.length) for e in message.entities] == [("bot_command", 3, 2), ("mention", 6, 9)]
    assert list(message.parse_entities().values()) == ["/x", "@tusk_bot"]
    assert message.reply_to_message.from_user.id == tg.bot_id
    assert (message.message_thread_id, message.is_topic_message, message.chat.is_forum) == (3, True, True)
    command = Update.de_json(tg.push_message(text="/start@tusk_bot now"), None).message
    assert command.parse_entities() == {command.entities[0]: "/start@tusk_bot"}
    photo = Update.de_json(tg.push_message(photo=True, caption="look @alice_b"), None).message
    assert photo.text is None and photo.caption == "look @alice_b" and len(photo.photo) == 2
    assert photo.parse_caption_entities() == {photo.caption_entities[0]: "@alice_b"}
    assert Update.de_json(tg.push_message(sticker=True), None).message.sticker.emoji
    assert Update.de_json(tg.push_message(voice=True), None).message.voice.duration == 3
    assert Update.de_json(tg.push_message(document=True), None).message.document.file_name == "notes.txt"
    edited = tg.push_message(text="fixed", edited=True)
    parsed = Update.de_json(edited, None)
    assert parsed.edited_message.text == "fixed" and parsed.message is None
    assert edited["update_id"] == first["update_id"] + 7


async def test_application_polling_runs_handlers(tg):
    """A polling Application routes pushed updates to its CommandHandler and MessageHandler."""
    app = ApplicationBuilder().token(tg.token).base_url(tg.base_url + "/bot").base_file_url(
        tg.base_url + "/file/bot").build()

    async def start(update, context):
        await update.message.reply_text(f"hello {update.effective_user.username}")

    async def echo(update, context):
        await update.message.reply_text(f"echo: {update.message.text}", do_quote=True)

    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    async with app:
        await app.start()
        await app.updater.start_polling(poll_interval=0, timeout=1)
        tg.push_message(chat_id=42, text="/start@tusk_bot")
        said = tg.push_message(chat_id=42, text="how are you")
        await tg.wait_for(lambda: len(tg.sent) >= 2)
        await app.updater.stop()
        await app.stop()
    assert sorted(s["text"] for s in tg.sent) == ["echo: how are you", "hello alice"]
    echoed = next(s for s in tg.sent if s["text"].startswith("echo"))
    assert echoed["reply_parameters"]["message_id"] == said["message"]["message_id"]
    assert tg.calls[-1][0] == "getUpdates" and tg.calls[-1][1]["offset"] == said["update_id"] + 1


async def test_inline_keyboards_callback_queries_and_draft_stops_as_telegram(ptb, tg):
    """Keyboards are checked (callback_data 1-64 bytes), an edit without one takes it away, an unchanged markup
    edit is "not modified", a callback query is answered once, and a draft's stop needs can_stop."""
    from telegram import InlineKeyboardButton, InlineKeyboardMarkup

    good = InlineKeyboardMarkup([[InlineKeyboardButton("Stop", callback_data="stop")]])
    with pytest.raises(BadRequest, match="(?i)button_data_invalid"):
        await ptb.send_message(42, "x", reply_markup=InlineKeyboardMarkup(
            [[InlineKeyboardButton("Stop", callback_data="s" * 65)]]))
    sent = await ptb.send_message(42, "draft", reply_markup=good)
    assert sent.reply_markup == good and tg.markup(42, sent.message_id) == good.to_dict()
    with pytest.raises(BadRequest, match="(?i)not modified"):
        await ptb.edit_message_reply_markup(42, sent.message_id, reply_markup=good)
    tg.press(42, sent.message_id, "stop")
    await ptb.edit_message_text("more", chat_id=42, message_id=sent.message_id)
    assert tg.markup(42, sent.message_id) is None
    with pytest.raises(AssertionError):
        tg.press(42, sent.message_id, "stop")  # no button any more
    (update,) = await ptb.get_updates()
    assert update.callback_query.data == "stop" and update.callback_query.message.message_id == sent.message_id
    assert await ptb.answer_callback_query(update.callback_query.id, text="Stopped.")
    with pytest.raises(BadRequest, match="(?i)query is too old"):
        await ptb.answer_callback_query(update.callback_query.id)
    await ptb.do_api_request("sendMessageDraft", api_kwargs={"chat_id": 42, "draft_id": 5, "text": "a"})
    with pytest.raises(AssertionError):
        tg.stop_draft(42, 5)  # sent without can_stop: the user had no stop button
    await ptb.do_api_request("sendMessageDraft", api_kwargs={"chat_id": 42, "draft_id": 6, "text": "a",
                                                             "can_stop": True})
    update = tg.stop_draft(42, 6)
    assert update["stopped_message_generation"] == {"chat": tg._chat(42), "draft_id": 6}
