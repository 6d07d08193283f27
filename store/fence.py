"""Fencing a chat's writes across processes: a worker that lost a chat to another writes nothing more into it.

A worker taking a chat's turn bumps the chat's `epoch` (store/postgres/schema/0001_chats.sql) and runs the
turn inside `fenced(key, epoch, inbox)`. Every write to that chat made in the turn's context (its tasks
inherit it) checks, in the write's own transaction with the chat's row locked, that the epoch is still the
one it took: a worker paused past its heartbeat, whose turn another worker took over (and bumped the
epoch), gets `StaleWrite` and writes nothing. The turn's first append of messages also claims its queued
message (`turn_claims`): whatever runs the same message again (a worker that only seemed dead) writes
nothing, and `claimed` tells the worker running it again that its turn is saved. Housekeeping the turn left running
after it ended (a consolidation round, itself compare-and-set on the pointer and memory version) is not
fenced: `fenced` ends with the turn.

    async with fenced(key, epoch, inbox):   # the turn's writes to `key` are checked
        ...
    chats = PgChats(db, guard=check, claim=claim)   # store/postgres/chats.py: `check` in every write,
                                                    # `claim` in every append
"""

from __future__ import annotations

import contextlib
import contextvars
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import psycopg

from memory.keys import ChatKey
from store.errors import StaleWrite


@dataclass
class Fence:
    key: ChatKey
    epoch: int
    inbox: int | None = None  # the queued message whose turn this is: its writes claim it (turn_claims)
    run: str = field(default_factory=lambda: secrets.token_hex(8))  # this run of it
    live: bool = True  # False once the turn ended: what it left running writes unfenced


_FENCE: contextvars.ContextVar[Fence | None] = contextvars.ContextVar("tusk_fence", default=None)


@contextlib.asynccontextmanager
async def fenced(key: ChatKey, epoch: int, inbox: int | None = None) -> AsyncIterator[Fence]:
    fence = Fence(key, epoch, inbox)
    token = _FENCE.set(fence)
    try:
        yield fence
    finally:
        fence.live = False
        _FENCE.reset(token)


def current(key: ChatKey) -> Fence | None:
    """The live fence of `key` in this context, if a turn of it runs here."""
    fence = _FENCE.get()
    return fence if fence is not None and fence.live and fence.key == key else None


async def check(conn: psycopg.AsyncConnection, chat: int) -> None:
    """StaleWrite when this context's turn holds a fence on the chat of row `chat` and another worker has since
    taken the chat (its epoch moved on)."""
    fence = _FENCE.get()
    if fence is None or not fence.live:
        return
    row = await (await conn.execute("SELECT channel, chat_id, epoch FROM chats WHERE id = %s", (chat,))).fetchone()
    if row is None or ChatKey(row[0], row[1]) != fence.key:
        return
    if row[2] > fence.epoch:  # equal: still ours; lower: the chat was erased and made again in this turn
        raise StaleWrite(f"{fence.key}: another worker took this chat over (epoch {row[2]}, this turn's "
                         f"{fence.epoch}): this worker writes nothing more into it")


async def claim(conn: psycopg.AsyncConnection, chat: int) -> None:
    """Messages appended to the chat of row `chat` by this context's turn claim its queued message (the first
    run of it to save claims it); StaleWrite when another run of the same message claimed it first."""
    fence = _FENCE.get()
    if fence is None or not fence.live or fence.inbox is None:
        return
    row = await (await conn.execute("SELECT channel, chat_id FROM chats WHERE id = %s", (chat,))).fetchone()
    if row is None or ChatKey(row[0], row[1]) != fence.key:
        return
    await conn.execute("INSERT INTO turn_claims (inbox, run) VALUES (%s, %s) ON CONFLICT (inbox) DO NOTHING",
                       (fence.inbox, fence.run))
    held = await (await conn.execute("SELECT run FROM turn_claims WHERE inbox = %s", (fence.inbox,))).fetchone()
    if held is not None and held[0] != fence.run:
        raise StaleWrite(f"{fence.key}: this message's turn was saved by another run of it: this one writes nothing")


async def claimed(conn: psycopg.AsyncConnection, inbox: int) -> bool:
    """Whether a run of the queued message `inbox` has written its turn already."""
    row = await (await conn.execute("SELECT 1 FROM turn_claims WHERE inbox = %s", (inbox,))).fetchone()
    return row is not None


async def take(conn: psycopg.AsyncConnection, key: ChatKey) -> int:
    """Bump `key`'s epoch (the worker taking its turn) and return it; 0 for a chat with no row yet (its first
    write makes the row at epoch 0)."""
    row = await (await conn.execute("UPDATE chats SET epoch = epoch + 1 WHERE channel = %s AND chat_id = %s "
                                    "RETURNING epoch", (key.channel, key.chat_id))).fetchone()
    return row[0] if row is not None else 0


async def holds(conn: psycopg.AsyncConnection, fence: Fence) -> bool:
    """Whether `fence` still holds its chat: no other worker took it since (bumping its epoch past ours)."""
    row = await (await conn.execute("SELECT epoch FROM chats WHERE channel = %s AND chat_id = %s",
                                    (fence.key.channel, fence.key.chat_id))).fetchone()
    return row is None or row[0] <= fence.epoch  # no row: erased (by this turn's /forget), nobody took it
