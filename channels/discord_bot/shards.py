"""A share of a large bot's gateway: TUSK_DISCORD_SHARDS=0-3/8 gives this process shards 0 to 3 of 8.

Discord sends a server's events on one shard only, `(guild_id >> 22) % shard_count`, and DMs on shard 0: each
process takes the servers of its shards (and the one with shard 0 the DMs), and replies go through the REST API
from any of them. Without the setting the channel opens one connection as before (`discord.Client`).

    client(...)        discord.Client, or ShardedClient: discord.py's AutoShardedClient with those shard ids and
                       that total, connecting them one after the other
    ShardedClient      its IDENTIFYs wait for Tusk's gate (identify.py: Discord's per-bucket limit, across
                       processes on PostgreSQL) instead of discord.py's flat 5 s; `max_concurrency` (the number
                       of buckets) and Discord's recommended total are read once from GET /gateway/bot
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import aiohttp

with warnings.catch_warnings():  # discord.py imports audioop (deprecated since 3.11) for voice, which Tusk never uses
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord

from channels.discord_bot.identify import IdentifyGate

logger = logging.getLogger(__name__)


def described(ids: tuple[int, ...], count: int) -> str:
    """`shards 0-3 of 8`, `shards 0, 2, 5 of 8`, `shard 1 of 2`, as the log and errors say it."""
    if len(ids) == 1:
        return f"shard {ids[0]} of {count}"
    run = ids == tuple(range(ids[0], ids[-1] + 1))
    return f"shards {ids[0]}-{ids[-1]} of {count}" if run else f"shards {', '.join(map(str, ids))} of {count}"


class ShardedClient(discord.AutoShardedClient):
    """discord.py's AutoShardedClient whose every IDENTIFY (first connects and new sessions alike) goes through
    the gate."""

    def __init__(self, gate: IdentifyGate, **options: Any) -> None:
        super().__init__(**options)
        self.gate = gate
        self._buckets: int | None = None  # max_concurrency, once read

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        await self.gate.enter(shard_id or 0, await self._max_concurrency())

    async def _max_concurrency(self) -> int:
        """Discord's `max_concurrency` for this bot, read once (1, the strictest, if GET /gateway/bot fails)."""
        if self._buckets is None:
            try:
                recommended, _, limits = await self.http.get_bot_gateway()
            except (discord.HTTPException, discord.GatewayNotFound, aiohttp.ClientError, OSError) as exc:
                logger.warning("could not read Discord's session start limit (%s): one IDENTIFY every 5 s", exc)
                return 1
            self._buckets = max(1, int(limits.get("max_concurrency") or 1))
            if self.shard_count is not None and recommended > self.shard_count:
                logger.warning("Discord recommends %d shards for this bot; TUSK_DISCORD_SHARDS has %d in all "
                               "(a shard holds at most 2,500 servers)", recommended, self.shard_count)
        return self._buckets


def client(shard_ids: tuple[int, ...] | None, shard_count: int | None, gate: IdentifyGate | None,
           **options: Any) -> discord.Client:
    """One connection (discord.py decides, as without sharding), or these shards of `shard_count`."""
    if shard_ids is None:
        return discord.Client(**options)
    assert shard_count is not None and gate is not None
    return ShardedClient(gate, shard_ids=list(shard_ids), shard_count=shard_count, **options)
