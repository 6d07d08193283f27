"""Flood limits: per sender, per chat, new chats per hour; one polite reply, no LLM call beyond them."""

import logging

import pytest

from bot.access.flood import REPLIES, Window
from bot.events import ChatKey
from tests.settle import answered, drained
from tests.test_telegram import start_tusk, tg  # noqa: F401  (fixtures)
from tests import kept


def plain(tg):
    return [m["plain"] for m in tg.sent]


@pytest.fixture
def notices(caplog):
    """The polite replies the flood gate decided to send, by limit: it logs each as it decides (before sending)."""
    caplog.set_level(logging.WARNING, logger="bot.access.flood")
    return lambda: [r.getMessage().split("(")[1].split(")")[0] for r in caplog.records
                    if r.name == "bot.access.flood" and r.getMessage().startswith("flood limit (")]


async def test_sender_over_the_limit_gets_one_polite_reply(start_tusk, tg, fake_llm, notices):  # noqa: F811
    """Past TUSK_RATE_SENDER_PER_MINUTE a sender gets one polite reply, then silence, and the LLM is not called."""
    app = await start_tusk(TUSK_RATE_SENDER_PER_MINUTE="3")
    for i in range(7):
        tg.push_message(42, f"message {i}", user_id=7)
    tg.push_message(44, "sentinel", user_id=8)  # handled after the seven: answered, they have all been gated
    await tg.wait_for(lambda: answered(tg, "sentinel") and len(tg.sent) >= 5)
    await drained(app, ChatKey("telegram", "42"))  # any turn the seven started has ended
    assert notices() == ["sender"] and plain(tg).count(REPLIES["sender"]) == 1
    assert len(tg.sent) == 5 and len(fake_llm.requests) == 4
    saved = [m.content for m in kept.on_disk(app, "telegram", "42").unconsolidated if m.role == "user"]
    assert saved == ["message 0", "message 1", "message 2"]


async def test_chat_limit_counts_every_member(start_tusk, tg, fake_llm, notices):  # noqa: F811
    """Past TUSK_RATE_CHAT_PER_MINUTE a group is told once, whoever writes; other chats are not affected."""
    app = await start_tusk(TUSK_RATE_CHAT_PER_MINUTE="2")
    for user in (1, 2, 3, 4):
        tg.push_message(-100, "@tusk_bot hi", chat_type="supergroup", user_id=user)
    await tg.wait_for(lambda: len(tg.sent) == 3)
    tg.push_message(43, "hello", user_id=5)  # handled after the group's four: they have all been gated
    await tg.wait_for(lambda: answered(tg, "hello"))
    await drained(app, ChatKey("telegram", "-100"))  # any turn the four started has ended
    assert notices() == ["chat"] and plain(tg).count(REPLIES["chat"]) == 1
    assert len(tg.sent) == 4 and len(fake_llm.requests) == 3
    assert tg.sent[-1]["chat_id"] == 43 and answered(tg, "hello")


async def test_new_chats_per_hour(start_tusk, tg, fake_llm, notices):  # noqa: F811
    """Past TUSK_RATE_NEW_CHATS_PER_HOUR new chats are turned away politely; chats already known still talk."""
    app = await start_tusk(TUSK_RATE_NEW_CHATS_PER_HOUR="2")
    for chat in (51, 52):
        tg.push_message(chat, "hi", user_id=chat)
    await tg.wait_for(lambda: len(tg.sent) == 2)
    tg.push_message(53, "hi", user_id=53)
    tg.push_message(53, "hi?", user_id=53)
    tg.push_message(51, "still there?", user_id=51)  # handled after 53's two: they have both been gated
    await tg.wait_for(lambda: answered(tg, "still there?") and len(tg.sent) >= 4)
    await drained(app, ChatKey("telegram", "53"))  # a turn either started has ended
    assert notices() == ["new"] and [m["chat_id"] for m in tg.sent if m["plain"] == REPLIES["new"]] == [53]
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
