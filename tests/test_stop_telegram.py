"""/stop on Telegram: the Stop button under a draft (a group's inline keyboard, a private draft's own), and typed."""

import pytest

from bot.stop import NOTHING_TO_STOP, stopped_note
from channels.telegram import STOPPED_ALREADY
from tests.fakes.fake_llm import Reply
from tests.legality import violations
from tests.telegram_drafts import drafting_tusks, saved, sent

LONG = " ".join(f"word{i}" for i in range(600)) + "."
FAST = 0.2


@pytest.fixture
async def start(make_settings, tg, monkeypatch):
    async with drafting_tusks(make_settings, tg, monkeypatch, FAST) as start:
        yield start


def button_message(tg, chat):
    """The id of the bot's message in `chat` that carries the Stop button now, if any."""
    ids = {m["message_id"] for m in tg.sent if m["chat_id"] == chat and "message_id" in m}
    return next((i for i in sorted(ids) if tg.markup(chat, i)), None)


async def test_the_group_stop_button_stops_the_reply_and_goes_away(start, tg, fake_llm):
    """In a group the draft carries a Stop button; pressing it ends the reply on its text so far and a note
    naming who stopped it, answers the press, takes the button away, and saves exactly that reply."""
    app = await start()
    fake_llm.script(Reply(text=LONG, token_delay=0.02), Reply(text="next one"))
    tg.push_message(-100, "@tusk_bot tell me a lot", chat_type="supergroup")
    await tg.wait_for(lambda: button_message(tg, -100), timeout=10)
    message_id = button_message(tg, -100)
    assert tg.markup(-100, message_id)["inline_keyboard"][0][0]["callback_data"] == "stop"
    tg.press(-100, message_id, "stop", user_id=8, username="bob")
    await tg.wait_for(lambda: tg.answers, timeout=10)
    await tg.wait_for(lambda: any(m.get("parse_mode") == "HTML" for m in tg.sent), timeout=10)
    final = [m for m in tg.sent if m.get("parse_mode") == "HTML"][-1]
    assert final["plain"].endswith("(stopped by Bob)") and final["message_id"] == message_id
    assert [a["text"] for a in tg.answers] == ["Stopped."] and button_message(tg, -100) is None
    reply = saved(app, "-100")[-1].content
    assert reply.endswith(stopped_note("Bob")) and LONG.startswith(reply.split("\n\n")[0])
    tg.push_message(-100, "@tusk_bot and then?", chat_type="supergroup")
    await tg.wait_for(lambda: any(m["plain"] == "next one" for m in tg.sent), timeout=10)
    assert violations(fake_llm.requests[-1]["messages"]) == []


async def test_the_private_drafts_stop_button_stops_the_reply(start, tg, fake_llm):
    """In a private chat the draft is sent with can_stop; Telegram's stopped_message_generation ends the reply,
    whose final message is the text so far with the note."""
    app = await start()
    fake_llm.script(Reply(text=LONG, token_delay=0.02))
    tg.push_message(42, "tell me a lot")
    await tg.wait_for(lambda: tg.drafts, timeout=10)
    assert tg.drafts[0]["can_stop"] is True and tg.drafts[0]["keep_on_stop"] is True
    tg.stop_draft(42, tg.drafts[0]["draft_id"])
    await tg.wait_for(lambda: sent(tg, "sendMessage"), timeout=10)
    (final,) = sent(tg, "sendMessage")
    assert final["plain"].endswith("(stopped)") and final["plain"].startswith("word0")
    assert saved(app, "42")[-1].content.endswith(stopped_note(""))


async def test_a_typed_stop_ends_the_reply_without_a_second_answer(start, tg, fake_llm):
    """`/stop` typed while the reply is written ends it (text so far, noted); the /stop itself gets no answer of
    its own, costs no model call, and is not saved; a /stop with nothing running says so."""
    app = await start()
    fake_llm.script(Reply(text=LONG, token_delay=0.02))
    tg.push_message(42, "tell me a lot")
    await tg.wait_for(lambda: tg.drafts, timeout=10)
    tg.push_message(42, "/stop")
    await tg.wait_for(lambda: sent(tg, "sendMessage"), timeout=10)
    tg.push_message(42, "/stop")  # the sentinel: answered after anything the first /stop could have sent
    await tg.wait_for(lambda: len(sent(tg, "sendMessage")) == 2, timeout=10)
    first, second = [m["plain"] for m in sent(tg, "sendMessage")]
    assert first.endswith("(stopped)") and second == NOTHING_TO_STOP
    assert len(fake_llm.requests) == 1 and [m.content for m in saved(app, "42") if m.role == "user"] == ["tell me a lot"]


async def test_a_press_from_someone_not_allowed_stops_nothing(start, tg, fake_llm):
    """TELEGRAM_ALLOW_FROM names only Alice: Bob's press is answered with a refusal and the reply runs to its end;
    a press on a reply already finished is told so."""
    app = await start(TELEGRAM_ALLOW_FROM="7")
    fake_llm.script(Reply(text=LONG[:1500], token_delay=0.01))
    tg.push_message(-100, "@tusk_bot tell me", chat_type="supergroup", user_id=7)
    await tg.wait_for(lambda: button_message(tg, -100), timeout=10)
    message_id = button_message(tg, -100)
    tg.press(-100, message_id, "stop", user_id=8, username="bob")
    await tg.wait_for(lambda: tg.answers, timeout=10)
    assert tg.answers[0]["text"].startswith("Only those who may talk with me here")
    await tg.wait_for(lambda: any(m.get("parse_mode") == "HTML" for m in tg.sent), timeout=10)
    assert saved(app, "-100")[-1].content == LONG[:1500]


async def test_a_button_left_by_a_crash_finds_no_reply_to_stop(start, tg, fake_llm):
    """A Stop button still under an old message (Tusk was killed before it took it away): a press is answered
    that the reply is finished, and nothing is published or stopped."""
    await start()
    old = tg.push_message(-100, "an old message", chat_type="supergroup")["message"]
    tg.push_update({"callback_query": {"id": "4242", "from": old["from"], "chat_instance": "i", "data": "stop",
                                       "message": {**old, "from": tg.bot_user}}})
    await tg.wait_for(lambda: tg.answers, timeout=10)
    assert [a["text"] for a in tg.answers] == [STOPPED_ALREADY] and fake_llm.requests == []
