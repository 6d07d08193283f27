"""The bus: one turn at a time per chat, chats side by side, nothing kept for idle chats."""

import asyncio
import time

import pytest

from bot.bus import MessageBus
from bot.errors import BusClosed
from bot.events import ChatKey, InboundMessage, OutboundMessage


def msg(chat, text):
    return InboundMessage(ChatKey("http", chat), text, sender_id="u")


async def test_one_chat_is_handled_in_arrival_order():
    """Later messages of a chat wait for earlier ones, even when those are slower."""
    done = []

    async def handler(m):
        await asyncio.sleep(0.05 if m.text == "0" else 0)
        done.append(m.text)

    bus = MessageBus(handler)
    await asyncio.gather(*(bus.publish(msg("a", str(i))) for i in range(10)))
    assert done == [str(i) for i in range(10)]


async def test_turns_of_one_chat_never_overlap():
    """At most one turn per chat runs at any moment."""
    running, peak = 0, 0

    async def handler(m):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1

    bus = MessageBus(handler)
    await asyncio.gather(*(bus.publish(msg("a", str(i))) for i in range(5)))
    assert peak == 1


async def test_a_slow_chat_does_not_delay_others():
    """Twenty chats with a 0.3 s turn each finish together, not one after another."""
    async def handler(m):
        await asyncio.sleep(0.3)

    bus = MessageBus(handler)
    start = time.monotonic()
    await asyncio.gather(*(bus.publish(msg(f"c{i}", "x")) for i in range(20)))
    assert time.monotonic() - start < 1.5


async def test_idle_chats_are_evicted():
    """Once a chat's queue is empty, the bus holds nothing for it."""
    async def handler(m):
        await asyncio.sleep(0)

    bus = MessageBus(handler)
    await asyncio.gather(*(bus.publish(msg(f"c{i}", "x")) for i in range(50)))
    await asyncio.sleep(0)
    assert bus.active_chats == 0


async def test_a_crashing_turn_does_not_stall_the_chat(caplog):
    """A handler exception is logged with its traceback; the chat's next message still runs."""
    seen = []

    async def handler(m):
        if m.text == "boom":
            raise RuntimeError("boom")
        seen.append(m.text)

    bus = MessageBus(handler)
    await asyncio.gather(bus.publish(msg("a", "boom")), bus.publish(msg("a", "ok")))
    assert seen == ["ok"]
    assert any(r.exc_info for r in caplog.records if "turn failed" in r.message)


async def test_replies_go_to_the_owning_channel():
    """send() routes by the chat key's channel."""
    got = {"http": [], "terminal": []}

    class Outlet:
        def __init__(self, name):
            self.name = name

        async def send(self, m: OutboundMessage):
            got[self.name].append(m.text)

    async def handler(m):
        pass

    bus = MessageBus(handler)
    bus.register(Outlet("http"))
    bus.register(Outlet("terminal"))
    await bus.send(OutboundMessage(ChatKey("terminal", "x"), "hi"))
    assert got == {"http": [], "terminal": ["hi"]}


async def test_close_drains_running_turns_then_refuses_new_ones():
    """Shutdown lets a running turn finish, and new messages are refused clearly."""
    finished = []

    async def handler(m):
        await asyncio.sleep(0.1)
        finished.append(m.text)

    bus = MessageBus(handler)
    pending = bus.publish(msg("a", "x"))
    assert await bus.close(grace=5) is True
    assert finished == ["x"] and pending.done()
    with pytest.raises(BusClosed):
        bus.publish(msg("a", "y"))


async def test_close_cancels_turns_past_the_grace_period():
    """A turn that outlasts the grace period is cancelled and close() reports it."""
    async def handler(m):
        await asyncio.sleep(10)

    bus = MessageBus(handler)
    pending = bus.publish(msg("a", "x"))
    queued = bus.publish(msg("a", "y"))
    assert await bus.close(grace=0.05) is False
    assert pending.cancelled() and queued.cancelled() and bus.active_chats == 0


async def test_in_order_runs_between_the_chats_turns_and_returns_or_raises():
    """A job waits for the turns queued before it, runs before those after, and hands back its result or error."""
    done = []

    async def handler(m):
        await asyncio.sleep(0.03)
        done.append(m.text)

    async def job():
        done.append("job")
        return 42

    async def broken():
        raise ValueError("no")

    bus = MessageBus(handler)
    first = bus.publish(msg("a", "before"))
    result = asyncio.ensure_future(bus.in_order(ChatKey("http", "a"), job))
    await asyncio.sleep(0)
    after = bus.publish(msg("a", "after"))
    assert await result == 42
    await asyncio.gather(first, after)
    assert done == ["before", "job", "after"]
    with pytest.raises(ValueError, match="no"):
        await bus.in_order(ChatKey("http", "a"), broken)
