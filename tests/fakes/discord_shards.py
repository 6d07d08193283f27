"""Discord's sharding rules, as the fake gateway (tests/fakes/fake_discord.py) keeps them.

From discord.com/developers/docs/events/gateway (Sharding, Session Start Limit Object, Close Event Codes):

- IDENTIFY may carry `shard: [shard_id, num_shards]`; without it the session is shard 0 of 1. A shard id not
  below the count (or a count below 1, or anything but two integers) is closed with 4010 Invalid shard.
- A server's events go to the one shard `(guild_id >> 22) % num_shards` (its GUILD_CREATE in READY too);
  events of no server (DMs and their interactions) go to shard 0 only.
- A session that would hold more than MAX_GUILDS servers is closed with 4011 Sharding required.
- Session starts are limited per rate-limit bucket, `shard_id % max_concurrency`: one IDENTIFY per bucket every
  5 seconds; another one in the same bucket within them is answered with op 9 Invalid Session (d: false).
  GET /gateway/bot reports `session_start_limit` (`max_concurrency`, `remaining` counted down per session
  started) and the recommended number of shards.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.discord_payloads import snowflake

IDENTIFY_WINDOW = 5.0  # seconds between two IDENTIFYs of one bucket
MAX_GUILDS = 2500  # servers one session may hold
SESSION_STARTS = 1000  # a day's session starts (`total`)
GUILD_EVENTS = frozenset({"GUILD_CREATE", "GUILD_UPDATE", "GUILD_DELETE"})  # the server is the payload itself


def shard_of(guild_id: str | int, count: int) -> int:
    """The shard that receives this server's events."""
    return (int(guild_id) >> 22) % count


def guild_of(event: str, data: dict[str, Any]) -> str | None:
    """The server an event belongs to (None: a DM, or an event of no server)."""
    if event in GUILD_EVENTS:
        return data.get("id")
    return data.get("guild_id")


def shard_field(identify: dict[str, Any]) -> tuple[int, int] | None:
    """The IDENTIFY's (shard_id, num_shards): (0, 1) without `shard`; None if Discord would close with 4010."""
    shard = identify.get("shard", [0, 1])
    if not (isinstance(shard, list) and len(shard) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in shard)):
        return None
    shard_id, count = shard
    return (shard_id, count) if 0 <= shard_id < count else None


@dataclass
class Session:
    """One identified gateway connection: its IDENTIFY, its shard, its own sequence numbers."""
    ws: web.WebSocketResponse
    identify: dict[str, Any]
    shard: int = 0
    count: int = 1
    seq: int = 0

    def holds(self, guild_id: str | None) -> bool:
        """Whether this session receives the events of `guild_id` (None: DMs, shard 0's)."""
        return self.shard == 0 if guild_id is None else shard_of(guild_id, self.count) == self.shard

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq


@dataclass
class SessionStarts:
    """Discord's session start limit: one IDENTIFY per bucket per `window`, and the day's allowance."""
    max_concurrency: int = 1
    window: float = IDENTIFY_WINDOW
    total: int = SESSION_STARTS
    started: int = 0
    _last: dict[int, float] = field(default_factory=dict)  # bucket -> when its last session started (monotonic)

    def take(self, shard_id: int) -> bool:
        """Start a session for `shard_id` if its bucket allows one now (False: Discord's op 9)."""
        bucket, now = shard_id % self.max_concurrency, time.monotonic()
        last = self._last.get(bucket)
        if last is not None and now - last < self.window:
            return False
        self._last[bucket] = now
        self.started += 1
        return True

    def payload(self) -> dict[str, Any]:
        """The `session_start_limit` object of GET /gateway/bot."""
        return {"total": self.total, "remaining": max(0, self.total - self.started), "reset_after": 86_400_000,
                "max_concurrency": self.max_concurrency}


def guild_on(shard: int, count: int) -> str:
    """A new server id (a snowflake of now, give or take `count` ms) whose events go to `shard` of `count`."""
    made = int(snowflake())
    stamp = made >> 22
    return str((stamp - stamp % count + shard) << 22 | made & ((1 << 22) - 1))
