"""Telegram updates as real chats send them (shapes from the Bot API docs and python-telegram-bot's tests),
pushed whole through the fake Bot API to Tusk's real Telegram channel."""

import json
import logging
import socket
import time

import aiohttp
import pytest

from bot.app import TuskApp
from bot.events import ChatKey
from bot.tools.box import ToolContext
from bot.tools.reminders import ReminderTools
from memory.chat_settings import ChatSettings
from memory.files import append_history
from memory.move import move_chat
from tests.fakes.fake_llm import Reply
from tests.settle import answered, drained
from tests.test_telegram import start_tusk, tg  # noqa: F401  (the fake Bot API and a Tusk started on it)
from tests import kept

BOT = {"id": 123, "is_bot": True, "first_name": "Tusk", "username": "tusk_bot"}
ALICE = {"id": 7, "is_bot": False, "first_name": "Alice", "username": "alice", "language_code": "en"}
BOB = {"id": 8, "is_bot": False, "first_name": "Bob", "last_name": "Stone"}  # no username
DM = {"id": 7, "type": "private", "first_name": "Alice", "username": "alice"}
GROUP = {"id": -4001, "type": "group", "title": "Hikers", "all_members_are_administrators": True}
SUPER = {"id": -1004001, "type": "supergroup", "title": "Hikers"}
CHANNEL = {"id": -1009999, "type": "channel", "title": "Hiking News", "username": "hikingnews"}


@pytest.fixture
async def app(start_tusk):
    return await start_tusk()


def message(tg, chat, sender=ALICE, **fields):
    """A Bot API `message` object: `from` is left out when `sender` is None."""
    msg = {"message_id": tg.next_message_id(), "date": int(time.time()), "chat": chat, **fields}
    return msg | ({"from": sender} if sender is not None else {})


def push(tg, chat, sender=ALICE, **fields):
    return tg.push_update({"message": message(tg, chat, sender, **fields)})


def mention(text="@tusk_bot hi"):
    return {"text": text, "entities": [{"type": "mention", "offset": text.index("@tusk_bot"), "length": 9}]}


def last_prompt(fake_llm):
    return fake_llm.requests[-1]["messages"][-1]["content"]


CHATS = [ChatKey("telegram", str(chat["id"])) for chat in (DM, GROUP, SUPER, CHANNEL)]


async def quiet(app, tg, fake_llm, sent, requests):
    """No more than `sent` messages went out (sendMessage: a group's reply may also be edited in place, as it is
    written) and `requests` went to the model: checked once a last DM, pushed after everything else, is answered
    (every update before it has been handled) and the queues of this file's chats have drained behind it (every
    turn those updates started has ended)."""
    push(tg, DM, text="last, as a sentinel")
    await tg.wait_for(lambda: answered(tg, "last, as a sentinel"))
    await drained(app, *CHATS)
    messages = [m["plain"] for m in tg.sent if m["method"] == "sendMessage"]
    assert (len(messages), len(fake_llm.requests)) == (sent + 1, requests + 1), messages


async def test_service_messages_are_no_turns_and_nothing_is_kept(app, tg, fake_llm):
    """Joins, leaves (the bot's own too), pins, titles, topics, video chats, timers: no turn, nothing saved."""
    await kept.put_settings(app.chats, ChatKey("telegram", "-1004001"), ChatSettings(listen=True))
    services = [{"new_chat_members": [BOT, BOB]}, {"new_chat_members": [BOB]}, {"left_chat_member": BOT},
                {"left_chat_member": BOB}, {"new_chat_title": "Hikers 2"}, {"group_chat_created": True},
                {"pinned_message": message(tg, SUPER, text="meet at 9")},
                {"forum_topic_created": {"name": "Trips", "icon_color": 7322096}},
                {"forum_topic_closed": {}}, {"video_chat_scheduled": {"start_date": int(time.time()) + 60}},
                {"video_chat_started": {}}, {"video_chat_ended": {"duration": 60}},
                {"video_chat_participants_invited": {"users": [BOB]}},
                {"message_auto_delete_timer_changed": {"message_auto_delete_time": 86400}},
                {"delete_chat_photo": True}]
    for fields in services:
        push(tg, SUPER, **fields)
        push(tg, DM, **fields)
    tg.push_update({"my_chat_member": {"chat": SUPER, "from": ALICE, "date": int(time.time()),
                                       "old_chat_member": {"status": "left", "user": BOT},
                                       "new_chat_member": {"status": "member", "user": BOT}}})
    push(tg, DM, text="still there?")
    await tg.wait_for(lambda: answered(tg, "still there?"))  # every update before it has been handled
    await drained(app, *CHATS)  # and every turn they started has ended
    assert (len(tg.sent), len(fake_llm.requests)) == (1, 1) and last_prompt(fake_llm).endswith("still there?")
    assert kept.on_disk(app, "telegram", "-1004001").unconsolidated == []
    assert [m.content for m in kept.on_disk(app, "telegram", "7").unconsolidated][0] == "still there?"


async def test_group_upgrade_takes_the_chats_memory_along_once(app, tg, fake_llm):
    """A group upgraded to a supergroup keeps its session, MEMORY.md, HISTORY.md, media, /listen and reminders."""
    push(tg, GROUP, **mention("@tusk_bot the meeting point is the old mill"))
    old = kept.files(app, "telegram", "-4001")
    await tg.wait_for(old.session.exists)  # the turn is saved (its reply may show, streamed, before)
    old.memory.write_text("- Meeting point: the old mill\n")
    append_history(old, "The group planned a hike.")
    (old.media).mkdir()
    (old.media / "photo.jpg").write_bytes(b"jpeg")
    await kept.put_settings(app.chats, ChatKey("telegram", "-4001"), ChatSettings(listen=True))
    ctx = ToolContext(ChatKey("telegram", "-4001"), await kept.chat(app, "telegram", "-4001"), app.chats,
                      sender_id="7", sender_name="Alice", is_group=True)
    await ReminderTools(app.schedules).set_reminder(ctx, "bring water", when="in 2 hours")
    tg.migrate(-4001, -1004001)
    tg.migrate(-4001, -1004001)  # both notices again, as a re-delivery would: moved once, nothing lost
    push(tg, SUPER, **mention("@tusk_bot where do we meet?"))
    await tg.wait_for(lambda: len(tg.sent) == 2)
    prompt = json.dumps(fake_llm.requests[-1]["messages"])
    assert "the old mill" in prompt and "Meeting point" in prompt
    new = kept.files(app, "telegram", "-1004001")
    assert not old.dir.exists() and (new.media / "photo.jpg").read_bytes() == b"jpeg"
    assert "planned a hike" in new.history.read_text() and (await kept.chat(app, "telegram", "-1004001")).prefs.listen
    assert [r.key.chat_id for r in app.schedules.of(ChatKey("telegram", "-1004001"))] == ["-1004001"]
    assert [m.content for m in kept.on_disk(app, "telegram", "-1004001").unconsolidated if m.role == "user"] == [
        "the meeting point is the old mill", "where do we meet?"]
    assert tg.sent[-1]["chat_id"] == -1004001


async def test_reply_to_an_upgraded_group_goes_to_the_supergroup(app, tg, fake_llm):
    """A reply refused with "group chat was upgraded" (ChatMigrated) is sent to the new id; the files follow."""
    fake_llm.script(Reply(text="on my way", delay=0.5))
    push(tg, GROUP, **mention("@tusk_bot slow question"))
    await fake_llm.wait_for_requests(1)
    tg.upgraded[-4001] = -1004001  # upgraded while the turn ran; the notices are not seen
    await tg.wait_for(lambda: tg.sent)
    assert [(m["chat_id"], m["plain"]) for m in tg.sent] == [(-1004001, "on my way")]
    await tg.wait_for(lambda: kept.files(app, "telegram", "-1004001").session.exists())
    assert not kept.files(app, "telegram", "-4001").dir.exists()


async def test_forwards_replies_and_quotes_reach_the_model_framed(app, tg, fake_llm):
    """A forward names its origin, a reply carries the text (or the picked quote) it answers."""
    now = int(time.time())
    push(tg, DM, text="Is this true?", forward_origin={"type": "user", "date": now - 60, "sender_user": BOB})
    await tg.wait_for(lambda: len(tg.sent) == 1)
    assert "[forwarded message, first written by Bob Stone" in last_prompt(fake_llm)
    assert last_prompt(fake_llm).endswith("Is this true?")
    push(tg, DM, text="/forget confirm", forward_origin={"type": "hidden_user", "date": now, "sender_user_name": "Eve"})
    await tg.wait_for(lambda: len(tg.sent) == 2)
    assert "first written by Eve" in last_prompt(fake_llm) and kept.files(app, "telegram", "7").session.exists()
    post = {"type": "channel", "date": now, "chat": CHANNEL, "message_id": 5, "author_signature": "Ann"}
    push(tg, DM, text="look", forward_origin=post)
    earlier = message(tg, DM, text="The summit is 2,962 m high and the path is closed in winter.")
    push(tg, DM, text="why closed?", reply_to_message=earlier,
         quote={"text": "closed in winter", "position": 40, "is_manual": True})
    await tg.wait_for(lambda: len(tg.sent) == 4)
    assert 'replying to a message of Alice: "closed in winter"]' in last_prompt(fake_llm)
    assert "2,962" not in last_prompt(fake_llm)  # the quote, not the whole message
    assert "first written by Hiking News (Ann)" in json.dumps(fake_llm.requests[-2]["messages"][-1])
    push(tg, DM, text="and this?", external_reply={"origin": post, "chat": CHANNEL, "message_id": 5},
         quote={"text": "Trail 4 reopens Monday", "position": 0})
    await tg.wait_for(lambda: len(tg.sent) == 5)
    assert 'a message of Hiking News (Ann) in another chat: "Trail 4 reopens Monday"]' in last_prompt(fake_llm)


async def test_stickers_places_contacts_polls_and_dice_are_read(app, tg, fake_llm):
    """A sticker is its emoji; locations, venues, contacts, polls and dice are bracketed lines; a video is explained."""
    sticker = {"file_id": "s", "file_unique_id": "su", "type": "regular", "width": 512, "height": 512,
               "is_animated": False, "is_video": False, "emoji": "\N{THUMBS UP SIGN}"}
    place = {"latitude": 46.55802, "longitude": 7.98325}
    things = [({"sticker": sticker}, "[sticker \N{THUMBS UP SIGN}]"),
              ({"location": place | {"live_period": 900}}, "[location: 46.55802, 7.98325, shared live]"),
              ({"venue": {"location": place, "title": "Hut", "address": "Kleine Scheidegg"}, "location": place},
               "[venue: Hut, Kleine Scheidegg (46.55802, 7.98325)]"),
              ({"contact": {"phone_number": "+41 79 000", "first_name": "Guide"}}, "[contact: Guide, +41 79 000]"),
              ({"poll": {"id": "1", "question": "Sat or Sun?", "total_voter_count": 0, "is_closed": False,
                         "is_anonymous": True, "type": "regular", "allows_multiple_answers": False,
                         "options": [{"text": "Sat", "voter_count": 0}, {"text": "Sun", "voter_count": 0}]}},
               "[poll: Sat or Sun? - options: Sat / Sun]"),
              ({"dice": {"emoji": "\N{GAME DIE}", "value": 4}}, "[dice \N{GAME DIE} rolled 4]")]
    for n, (fields, seen) in enumerate(things, 1):
        push(tg, DM, **fields)
        await tg.wait_for(lambda n=n: len(fake_llm.requests) == n)
        assert last_prompt(fake_llm).endswith(seen)
    push(tg, DM, video={"file_id": "v", "file_unique_id": "vu", "width": 1, "height": 1, "duration": 3})
    await tg.wait_for(lambda: any("only read text" in m["plain"] for m in tg.sent))
    await quiet(app, tg, fake_llm, len(things) + 1, len(things))


async def test_group_senders_channels_and_entities(app, tg, fake_llm):
    """Anonymous admins, users posting as a channel, inline bots and text mentions are read as real groups send them."""
    push(tg, SUPER, {"id": 1087968824, "is_bot": True, "first_name": "Group", "username": "GroupAnonymousBot"},
         sender_chat=SUPER, author_signature="Chief", **mention("@tusk_bot status of the trip?"))
    await tg.wait_for(lambda: len(fake_llm.requests) == 1)
    assert "from Chief" in last_prompt(fake_llm)
    push(tg, SUPER, {"id": 136817688, "is_bot": True, "first_name": "Channel", "username": "Channel_Bot"},
         sender_chat=CHANNEL, **mention("@tusk_bot news?"))
    await tg.wait_for(lambda: len(fake_llm.requests) == 2)
    assert "from Hiking News (id -1009999)" in last_prompt(fake_llm)
    push(tg, SUPER, via_bot={"id": 99, "is_bot": True, "first_name": "gif", "username": "gif"},
         **mention("@tusk_bot funny"))
    await tg.wait_for(lambda: len(fake_llm.requests) == 3)
    assert "[sent via the inline bot @gif]" in last_prompt(fake_llm)
    push(tg, SUPER, text="Bob, see you", entities=[{"type": "text_mention", "offset": 0, "length": 3, "user": BOB}])
    push(tg, SUPER, text="Tusk, hello", entities=[{"type": "text_mention", "offset": 0, "length": 4, "user": BOT}])
    await tg.wait_for(lambda: len(fake_llm.requests) == 4)
    assert last_prompt(fake_llm).endswith(", hello")
    push(tg, SUPER, {"id": 777000, "is_bot": False, "first_name": "Telegram"}, sender_chat=CHANNEL,
         is_automatic_forward=True, forward_origin={"type": "channel", "date": 1, "chat": CHANNEL, "message_id": 9},
         **mention("New trail report, ask @tusk_bot"))
    push(tg, SUPER, text="/help@tusk_bot", entities=[{"type": "bot_command", "offset": 0, "length": 14}])
    await tg.wait_for(lambda: any("/forget" in m["plain"] for m in tg.sent))
    await quiet(app, tg, fake_llm, 5, 4)  # four answers and /help's


async def test_linked_channel_posts_are_kept_as_the_channels_when_the_group_listens(app, tg, fake_llm):
    """A linked channel's automatic forward is never a turn; a listening group keeps it, said by the channel."""
    await kept.put_settings(app.chats, ChatKey("telegram", "-1004001"), ChatSettings(listen=True))
    push(tg, SUPER, {"id": 777000, "is_bot": False, "first_name": "Telegram"}, sender_chat=CHANNEL,
         is_automatic_forward=True, forward_origin={"type": "channel", "date": 1, "chat": CHANNEL, "message_id": 9},
         text="Trail 4 reopens Monday")
    await tg.wait_for(lambda: kept.on_disk(app, "telegram", "-1004001").unconsolidated)
    (post,) = kept.on_disk(app, "telegram", "-1004001").unconsolidated
    assert (post.sender_id, post.sender_name) == ("-1009999", "Hiking News")
    assert post.content == "[a post of the linked channel Hiking News]\nTrail 4 reopens Monday"
    await quiet(app, tg, fake_llm, 0, 0)


async def test_unreadable_updates_are_skipped_once_and_polling_goes_on(app, tg, fake_llm, caplog):
    """Updates PTB cannot parse, sender-less or huge messages are skipped or answered; the next ones still arrive."""
    with caplog.at_level(logging.INFO):
        tg.push_update({"message": {"message_id": 1, "chat": DM, "from": ALICE, "text": "no date"}})
        tg.push_update({"message": {"message_id": "x", "date": "y", "chat": DM, "from": ALICE, "text": 5}})
        tg.push_update({"message": "not an object"})
        push(tg, DM, None, text="who sent this?")
        push(tg, DM, text="a future field", shiny_new_field={"x": 1})
        await tg.wait_for(lambda: len(tg.sent) == 1)
        push(tg, DM, text="x" * 200_000)
        await tg.wait_for(lambda: len(tg.sent) == 2)
        push(tg, DM, text="last one")
        await tg.wait_for(lambda: len(tg.sent) == 3)
    assert last_prompt(fake_llm).endswith("last one")
    assert "200,000 characters" in tg.sent[1]["plain"] and len(fake_llm.requests) == 2
    skipped = [r.getMessage() for r in caplog.records if "cannot read" in r.getMessage()]
    assert len(skipped) == 3 and not any("no date" in s for s in skipped)  # once each; content never logged
    assert [r.getMessage() for r in caplog.records if "without a sender" in r.getMessage()]
    assert not [r for r in caplog.records if r.levelno >= logging.CRITICAL]


async def test_webhook_skips_what_it_does_not_answer(start_tusk, tg, fake_llm, caplog):
    """Edits, channel posts, inline queries, join requests, newer kinds and unreadable updates are taken (200) and
    skipped, logged once per kind and never with their text; a button press that stops no reply is answered so;
    the webhook goes on answering."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = await start_tusk(TELEGRAM_WEBHOOK_URL="https://bot.example.org/tg/hook", TELEGRAM_WEBHOOK_PORT=port,
                           TELEGRAM_WEBHOOK_SECRET="hook-secret-123")
    now = int(time.time())
    updates = [{"edited_message": message(tg, DM, text="hi (edited)", edit_date=now)},
               {"edited_message": message(tg, DM, text="again", edit_date=now)},
               {"channel_post": message(tg, CHANNEL, None, text="@tusk_bot news", sender_chat=CHANNEL)},
               {"edited_channel_post": message(tg, CHANNEL, None, text="news!", sender_chat=CHANNEL)},
               {"callback_query": {"id": "1", "from": ALICE, "chat_instance": "c", "data": "x"}},
               {"inline_query": {"id": "2", "from": ALICE, "query": "q", "offset": ""}},
               {"chat_join_request": {"chat": SUPER, "from": BOB, "user_chat_id": 8, "date": now}},
               {"purchased_paid_media_v9": {"from": ALICE}},
               {"message": {"message_id": 1, "chat": DM, "from": ALICE, "text": "secret words"}},  # no date
               {"message": message(tg, DM, text="answer me")}]
    with caplog.at_level(logging.INFO, logger="channels.telegram"):
        async with aiohttp.ClientSession() as client:
            for n, update in enumerate(updates, 1):
                async with client.post(f"http://127.0.0.1:{port}/tg/hook", json={"update_id": n, **update},
                                       headers={"X-Telegram-Bot-Api-Secret-Token": "hook-secret-123"}) as resp:
                    assert resp.status == 200
        await tg.wait_for(lambda: answered(tg, "answer me"))  # the last update: every one before it was handled
    await drained(app, *CHATS)  # and every turn they started has ended
    assert (len(tg.sent), len(fake_llm.requests)) == (1, 1) and last_prompt(fake_llm).endswith("answer me")
    skipped = [r.getMessage() for r in caplog.records if r.getMessage().startswith(("skipping Telegram", "skipping a"))]
    assert len(skipped) == 7 and any("edited_message" in s for s in skipped) and not any("news" in s for s in skipped)
    assert any("cannot read" in s for s in skipped) and not any("callback_query" in s for s in skipped)
    presses = [(p["callback_query_id"], p["text"]) for m, p in tg.calls if m == "answerCallbackQuery"]
    assert presses == [("1", "That reply is already finished.")]  # (the fake refuses it: it never sent query 1)
    assert not any("secret words" in r.getMessage() or r.levelno >= logging.CRITICAL for r in caplog.records)


async def test_a_paired_group_stays_paired_after_its_upgrade(start_tusk, tg, fake_llm):
    """With pairing, a group the owner approved is still approved under its supergroup id."""
    app = await start_tusk(TUSK_DM_POLICY="pairing")
    request, _ = app.access.pairing.request("telegram", "group", "-4001", "Hikers")
    app.access.pairing.approve(request.code)
    tg.migrate(-4001, -1004001)
    push(tg, SUPER, **mention("@tusk_bot still there?"))
    await tg.wait_for(lambda: fake_llm.requests)
    assert last_prompt(fake_llm).endswith("still there?")
    assert app.access.pairing.approved("telegram", "group", "-1004001")
    assert not app.access.pairing.approved("telegram", "group", "-4001")


def test_a_move_never_merges_or_overwrites(tmp_path):
    """Files under the new id already: both folders are left as they are; a second move finds it done."""
    for chat_id, text in (("-4001", "old memory"), ("-1004001", "new memory")):
        folder = tmp_path / "chats" / "telegram" / chat_id
        folder.mkdir(parents=True)
        (folder / "MEMORY.md").write_text(text)
    assert move_chat(tmp_path, "telegram", "-4001", "-1004001") == "kept both"
    assert (tmp_path / "chats/telegram/-4001/MEMORY.md").read_text() == "old memory"
    assert (tmp_path / "chats/telegram/-1004001/MEMORY.md").read_text() == "new memory"
    assert move_chat(tmp_path, "telegram", "-4002", "-1004002") == "nothing"
    (tmp_path / "chats/telegram/-4002").mkdir()
    (tmp_path / "chats/telegram/-1004002").mkdir()  # an empty folder is no chat's files: replaced
    assert move_chat(tmp_path, "telegram", "-4002", "-1004002") == "moved"
    assert move_chat(tmp_path, "telegram", "-4002", "-1004002") == "done before"
