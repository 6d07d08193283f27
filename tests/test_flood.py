"""Flood limits: per sender, per chat, new chats per hour; one polite reply, no LLM call beyond them."""

import asyncio

from bot.access.flood import REPLIES, Window
from tests.test_telegram import start_tusk, tg  # noqa: F401  (fixtures)
from tests import kept


def plain(tg):
    return [m["plain"] for m in tg.sent]


async def test_sender_over_the_limit_gets_one_polite_reply(start_tusk, tg, fake_llm):  # noqa: F811
    """Past TUSK_RATE_SENDER_PER_MINUTE a sender gets one polite reply, then silence, and the LLM is not called."""
    app = await start_tusk(TUSK_RATE_SENDER_PER_MINUTE="3")
    for i in range(7):
        tg.push_message(42, f"message {i}", user_id=7)
    await tg.wait_for(lambda: len(tg.sent) == 4)
    await asyncio.sleep(0.3)
    assert len(tg.sent) == 4 and plain(tg).count(REPLIES["sender"]) == 1 and len(fake_llm.requests) == 3
    saved = [m.content for m in kept.on_disk(app, "telegram", "42").unconsolidated if m.role == "user"]
    assert saved == ["message 0", "message 1", "message 2"]


async def test_chat_limit_counts_every_member(start_tusk, tg, fake_llm):  # noqa: F811
    """Past TUSK_RATE_CHAT_PER_MINUTE a group is told once, whoever writes; other chats are not affected."""
    await start_tusk(TUSK_RATE_CHAT_PER_MINUTE="2")
    for user in (1, 2, 3, 4):
        tg.push_message(-100, "@tusk_bot hi", chat_type="supergroup", user_id=user)
    await tg.wait_for(lambda: len(tg.sent) == 3)
    tg.push_message(43, "hello", user_id=5)
    await tg.wait_for(lambda: len(tg.sent) == 4)
    await asyncio.sleep(0.3)
    assert plain(tg).count(REPLIES["chat"]) == 1 and len(fake_llm.requests) == 3
    assert tg.sent[-1]["chat_id"] == 43 and tg.sent[-1]["plain"].startswith("echo: ")


async def test_new_chats_per_hour(start_tusk, tg, fake_llm):  # noqa: F811
    """Past TUSK_RATE_NEW_CHATS_PER_HOUR new chats are turned away politely; chats already known still talk."""
    await start_tusk(TUSK_RATE_NEW_CHATS_PER_HOUR="2")
    for chat in (51, 52):
        tg.push_message(chat, "hi", user_id=chat)
    await tg.wait_for(lambda: len(tg.sent) == 2)
    tg.push_message(53, "hi", user_id=53)
    tg.push_message(53, "hi?", user_id=53)
    tg.push_message(51, "still there?", user_id=51)
    await tg.wait_for(lambda: len(tg.sent) == 4)
    await asyncio.sleep(0.3)
    assert [m["chat_id"] for m in tg.sent if m["plain"] == REPLIES["new"]] == [53]
    assert len(tg.sent) == 4 and len(fake_llm.requests) == 3


def test_window_slides():
    """A key is full at `limit` hits within `span` seconds and free again as the oldest hits leave it."""
    w = Window(limit=2, span=60)
    w.add("a", 0)
    w.add("a", 30)
    assert w.full("a", 59) and not w.full("b", 59)
    assert not w.full("a", 60.5)
    assert not Window(limit=0, span=60).full("a", 0)  # 0: no limit


def test_window_keeps_a_bounded_number_of_keys():
    """However many senders there are, at most `keys` are remembered (the least recently active go)."""
    w = Window(limit=1, span=60, keys=100)
    for i in range(1000):
        w.add(i, 0)
    assert len(w._hits) == 100 and w.full(999, 1) and not w.full(0, 1)
