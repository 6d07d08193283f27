"""When a shard may IDENTIFY: Discord's session start rate limit, kept within this process and, on PostgreSQL,
across every process of the bot.

Discord takes one IDENTIFY per rate-limit bucket every 5 seconds, the bucket of shard `i` being
`i % max_concurrency` (`session_start_limit.max_concurrency` of GET /gateway/bot: 1 for most bots, 16 or more
for large ones); a second one in the same bucket is answered with op 9 Invalid Session, and that shard must
IDENTIFY again later. discord.py 2.x does not read `max_concurrency`: its AutoShardedClient
connects its shards one after the other and, in the default `before_identify_hook`, sleeps 5 s before each
IDENTIFY but the first. That keeps one process within the limit when `max_concurrency` is 1, and nothing
across processes (each one's first IDENTIFY goes at once). Its maintainers leave the rest to that hook
(Rapptz/discord.py#8430), which Tusk's sharded client fills with `IdentifyGate.enter` (channels/discord_bot/shards.py):

    enter(shard, max_concurrency)   waits until the shard's bucket is free, takes it, and returns: discord.py
                                    sends the IDENTIFY at once. The bucket stays taken for HOLD seconds
                                    (Discord's 5 s and a margin), then is let go.
    within this process             an asyncio.Lock per bucket
    across processes                with TUSK_DATABASE_URL, a PostgreSQL session advisory lock per bucket as
                                    well, on a short connection of its own, taken after the local lock and
                                    let go by closing that connection HOLD seconds later. A process that dies
                                    holding one loses it with its connection; one whose machine died or was
                                    cut off loses it within 30 s (DEAD_PEER: TCP keepalives, and
                                    idle_session_timeout from PostgreSQL 14 on)

Shards in different buckets of a large bot are not held back by each other. On files there is nothing to
share: processes that start together may see one IDENTIFY refused (op 9), which discord.py sends again after
the hold (docs/scaling.md says to start them 5 s apart). If the database cannot be reached, the gate logs a
warning and paces within this process only: the gateway connection matters more than the pacing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # psycopg is the postgres extra's: imported where TUSK_DATABASE_URL is set
    import psycopg

logger = logging.getLogger(__name__)

HOLD = 5.5  # seconds a bucket stays taken after a shard took it: Discord's 5 s, and a margin for the IDENTIFY to leave
LOCK = 0x74646964  # the advisory lock's first key ("tdid": Tusk, Discord IDENTIFY); the second is the bucket
CONNECT_TIMEOUT = 10  # seconds
DEAD_PEER = {  # how soon the server ends a lock's session whose process is gone without closing it
    "idle_session_timeout": "30s", "tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3"}


class IdentifyGate:
    """One per Discord channel (it outlives the clients a 4014 makes it rebuild); `close` lets every bucket go."""

    def __init__(self, database_url: str | None = None) -> None:
        self.database_url = database_url
        self.hold = HOLD
        self._buckets: dict[int, asyncio.Lock] = {}
        self._held: set[asyncio.Task[None]] = set()
        self._closing = asyncio.Event()

    async def enter(self, shard_id: int, max_concurrency: int) -> None:
        """Return when `shard_id` may IDENTIFY; its bucket is then taken for `hold` seconds."""
        bucket = shard_id % max(1, max_concurrency)
        lock = self._buckets.setdefault(bucket, asyncio.Lock())
        await lock.acquire()
        try:
            conn = await self._cluster(bucket) if self.database_url else None
        except BaseException:  # cancelled while waiting (discord.py's connect timeout): nothing is held
            lock.release()
            raise
        held = asyncio.create_task(self._release(lock, conn), name=f"discord identify bucket {bucket}")
        self._held.add(held)
        held.add_done_callback(self._held.discard)

    async def _cluster(self, bucket: int) -> psycopg.AsyncConnection[object] | None:
        """The bucket's advisory lock, taken on a connection of its own (None: the database did not answer)."""
        import psycopg

        assert self.database_url is not None
        try:
            conn = await psycopg.AsyncConnection.connect(self.database_url, autocommit=True,
                                                         connect_timeout=CONNECT_TIMEOUT,
                                                         application_name="tusk-discord-identify")
        except psycopg.Error as exc:
            logger.warning("cannot reach the database to pace Discord's IDENTIFY across processes (%s); pacing "
                           "within this process only", exc)
            return None
        try:
            for name, value in DEAD_PEER.items():
                if conn.info.server_version >= 140000 or name != "idle_session_timeout":  # PostgreSQL 14's
                    await conn.execute("SELECT set_config(%s, %s, false)", (name, value))
            await conn.execute("SELECT pg_advisory_lock(%s::int, %s::int)", (LOCK, bucket))
        except psycopg.Error as exc:
            logger.warning("could not take Discord's IDENTIFY bucket %d in the database (%s); pacing within this "
                           "process only", bucket, exc)
            await conn.close()
            return None
        except BaseException:
            await conn.close()  # cancelled: psycopg cancelled the wait; closing lets go of a lock taken meanwhile
            raise
        return conn

    async def _release(self, lock: asyncio.Lock, conn: psycopg.AsyncConnection[object] | None) -> None:
        """Let the bucket go after the hold, or at once when the gate closes (never cancelled: a task cancelled
        before its first step would skip its `finally`, and the bucket would stay taken)."""
        closing = self._closing
        try:
            await asyncio.wait_for(closing.wait(), self.hold)
        except TimeoutError:
            pass
        finally:
            lock.release()
            if conn is not None:
                await conn.close()  # the session ends: its advisory lock is let go

    async def close(self) -> None:
        """Let every bucket go now (the channel stops)."""
        self._closing.set()
        await asyncio.gather(*self._held, return_exceptions=True)
        self._closing = asyncio.Event()  # a channel started again paces anew
