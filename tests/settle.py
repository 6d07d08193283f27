"""Sentinels for tests that check something did NOT happen: they wait for what comes after it, never sleep.

    tg.push_message(42, "dropped?")                       # must cost nothing
    tg.push_message(42, "sentinel")                       # the same path, after it
    await tg.wait_for(lambda: answered(tg, "sentinel"))   # every update before it has been handled ...
    await drained(app, ChatKey("telegram", "42"))         # ... and every turn it could have started has ended
    assert len(fake_llm.requests) == 1

A platform channel hands its updates over one at a time, in order, and the bus runs a chat's turns in order,
so a late answer to the first message would have been published before the sentinel's and have ended before a
step queued behind it.
"""

from __future__ import annotations

import asyncio

from bot.events import ChatKey
from tests.fakes.loopback import wait_until


async def _nothing() -> None:
    return None


async def drained(app, *keys: ChatKey) -> None:
    """Every turn queued so far in the chats `keys` has ended: a step queued behind them has run (on the
    database's queue, bot/cluster/: no job of the chat waits or runs, so each turn's end is recorded)."""
    for key in keys:
        if app.cluster is not None and app.cluster.started:
            await _queue_empty(app, key)
        await app.bus.in_order(key, _nothing)


async def _queue_empty(app, key: ChatKey) -> None:
    from bot.cluster.wire import lock_of
    from bot.events import InboundMessage

    lock = lock_of(InboundMessage(key, "", sender_id=""))
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        async with app.store.db.connection() as conn:
            row = await (await conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s AND status "
                                            "IN ('todo', 'doing')", (lock,))).fetchone()
        if not row[0]:
            return
        assert asyncio.get_running_loop().time() < deadline, f"{key}: turns still queued after 30 s"
        await asyncio.sleep(0.02)


async def idle(app) -> None:
    """No chat has a turn queued or running: every turn published so far has ended."""
    await wait_until(lambda: app.bus.active_chats == 0, what=lambda: f"{app.bus.active_chats} chats still busy")


def answered(tg, text: str) -> bool:
    """Tusk's echo of `text` (the fake model's default answer: the prompt's last user message, its runtime-context
    block first) has reached Telegram."""
    return any(m["plain"].startswith("echo: ") and m["plain"].endswith(f"\n\n{text}") for m in tg.sent)


def waiting_on(lock: asyncio.Lock) -> bool:
    """Someone is blocked in `lock.acquire()`: the point past which a test that holds the lock knows the code
    under test cannot go without it (asyncio's Lock keeps its blocked acquirers in `_waiters`)."""
    return bool(lock._waiters)
