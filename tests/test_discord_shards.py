"""Discord sharding: TUSK_DISCORD_SHARDS gives a process some shards of the bot (channels/discord_bot/shards.py),
their IDENTIFYs paced by Discord's per-bucket limit, across processes on PostgreSQL (identify.py)."""

import asyncio
import contextlib

import psycopg
import pytest

from bot.errors import ConfigError
from channels.discord_bot import DiscordChannel, DiscordSettings, discord, identify
from channels.discord_bot.identify import IdentifyGate
from channels.discord_bot.shards import described
from tests.fakes.fake_discord import FakeDiscord, guild_on, snowflake
from tests.published import Published

WINDOW = 1.0  # the fake's seconds per bucket, shortened from Discord's 5 (the gate holds HOLD_FOR)
HOLD_FOR = 1.5


# --- the setting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "ids", "count"), [
    ("0-3/8", (0, 1, 2, 3), 8), ("0,2,5/8", (0, 2, 5), 8), (" 7 / 8 ", (7,), 8), ("0/1", (0,), 1),
    ("4-5, 0-1/6", (0, 1, 4, 5), 6)])
def test_the_shards_setting_reaches_the_discord_channel(make_settings, value, ids, count):
    """TUSK_DISCORD_SHARDS `A-B/N` or `A,B,C/N` gives the channel those shard ids (in order) of N."""
    settings = make_settings(DISCORD_BOT_TOKEN="D", TUSK_DISCORD_SHARDS=value).discord_settings()
    assert (settings.shard_ids, settings.shard_count) == (ids, count)


def test_without_the_setting_one_connection_and_no_database_for_it(make_settings):
    """Unset (or blank), the channel keeps one connection; the database URL goes with shards only."""
    settings = make_settings(DISCORD_BOT_TOKEN="D", TUSK_DISCORD_SHARDS=" ",
                             TUSK_DATABASE_URL="postgresql://u:secret@db/tusk").discord_settings()
    assert (settings.shard_ids, settings.shard_count, settings.database_url) == (None, None, None)
    sharded = make_settings(DISCORD_BOT_TOKEN="D", TUSK_DISCORD_SHARDS="0/2",
                            TUSK_DATABASE_URL="postgresql://u:secret@db/tusk").discord_settings()
    assert sharded.database_url == "postgresql://u:secret@db/tusk" and "secret" not in repr(sharded)


@pytest.mark.parametrize(("value", "why"), [
    ("4/4", "shard 4 is not below the total 4"), ("0-8/8", "shard 8 is not below the total 8"),
    ("0/0", "must be 1 to"), ("1,1/4", "shard 1 is named twice"), ("0-2,2/4", "shard 2 is named twice"),
    ("3-1/4", "runs backwards"), ("0-3", "not a set of shards"), ("a/4", "not a set of shards"),
    ("-1/4", "not a set of shards"), ("0-3/8/2", "not a set of shards")])
def test_a_bad_shards_setting_is_refused_at_settings_time(make_settings, value, why):
    """A TUSK_DISCORD_SHARDS that cannot be right stops Tusk when the settings load, naming the variable, the
    reason and the form to write."""
    with pytest.raises(ConfigError, match="TUSK_DISCORD_SHARDS") as refused:
        make_settings(TUSK_DISCORD_SHARDS=value)
    assert why in str(refused.value) and repr(value) in str(refused.value)


# --- the channels ---------------------------------------------------------------------------------------


@pytest.fixture
async def dc():
    async with FakeDiscord(token="fake-discord-token-123") as fake:
        fake.alice = fake.add_user("alice")
        yield fake


@pytest.fixture
def shorter_windows(dc, monkeypatch):
    """Discord's 5 s per bucket, and the gate's hold, shortened alike (the rule is the same)."""
    dc.starts.window = WINDOW
    monkeypatch.setattr(identify, "HOLD", HOLD_FOR)


@contextlib.asynccontextmanager
async def channels(dc, *shard_sets, count, database_url=None):
    """Started Discord channels, one per set of shard ids (as separate processes would be), with what each
    published; stopped in reverse order (each undoes its aim at the fake)."""
    started = []
    try:
        for ids in shard_sets:
            published = Published()
            channel = DiscordChannel(DiscordSettings(dc.token, api_base=dc.api_base, gateway_url=dc.gateway_url,
                                                     shard_ids=ids, shard_count=count, database_url=database_url),
                                     published, [("help", "what I can do")])
            started.append((channel, published))
        await asyncio.gather(*(channel.start() for channel, _ in started))
        yield started
    finally:
        for channel, _ in reversed(started):
            await channel.stop()


async def test_each_servers_messages_reach_the_process_with_its_shard_and_dms_shard_zero(dc):
    """Two processes with shards 0/2 and 1/2 on one bot: a server's message reaches only the one whose shard holds
    the server, a DM only shard 0's; each connects through discord.py's AutoShardedClient with its own shard."""
    dc.starts.max_concurrency = 2  # shards 0 and 1 in different buckets
    first, second = dc.add_guild(id=guild_on(0, 2)), dc.add_guild(id=guild_on(1, 2))
    here, there = first.add_channel(), second.add_channel()
    async with channels(dc, (0,), (1,), count=2) as ((zero, to_zero), (one, to_one)):
        assert isinstance(zero.client, discord.AutoShardedClient) and set(zero.client.shards) == {0}
        assert set(one.client.shards) == {1} and one.client.shard_count == 2
        assert [g.id for g in zero.client.guilds] == [int(first.id)] and [g.id for g in one.client.guilds] == [
            int(second.id)]
        await dc.message(here, dc.alice, f"{dc.mention} to the first", guild=first)
        await dc.message(there, dc.alice, f"{dc.mention} to the second", guild=second)
        await dc.message(snowflake(), dc.alice, "a DM")
        await dc.message(here, dc.alice, f"{dc.mention} end", guild=first)  # sentinels: after the others, per shard
        await dc.message(there, dc.alice, f"{dc.mention} end", guild=second)
        await dc.wait_for(lambda: len(to_zero) == 3 and len(to_one) == 2)
        assert [m.text for m in to_zero] == ["to the first", "a DM", "end"]
        assert [m.text for m in to_one] == ["to the second", "end"]
        assert [i["shard"] for i in sorted(dc.identifies, key=lambda i: i["shard"])] == [[0, 2], [1, 2]]


async def test_a_send_only_channel_opens_no_gateway_whatever_its_shards(dc):
    """A worker's channel (`receive=False`) with shards set logs in with a plain client and connects no shard."""
    channel = DiscordChannel(DiscordSettings(dc.token, api_base=dc.api_base, gateway_url=dc.gateway_url,
                                             shard_ids=(0, 1), shard_count=2), Published(), [], receive=False)
    await channel.start()
    try:
        assert type(channel.client) is discord.Client and channel._gate is None
    finally:
        await channel.stop()
    assert dc.connections == 0 and dc.identifies == []


async def test_one_process_paces_its_shards_in_one_bucket(dc, shorter_windows):
    """Shards 0 and 1 in one process with `max_concurrency` 1 (one bucket): the second IDENTIFY waits out the
    window, so Discord refuses none."""
    async with channels(dc, (0, 1), count=2) as [(channel, _)]:
        assert set(channel.client.shards) == {0, 1}
    first, second = dc.identifies
    assert dc.invalid_sessions == [] and second["at"] - first["at"] >= WINDOW


async def test_processes_pace_their_identifies_through_postgres(dc, shorter_windows, pg_url):
    """Two processes started together with shards 0/2 and 1/2 and one bucket: the database's lock makes one wait
    for the other's window, so Discord refuses neither IDENTIFY."""
    async with channels(dc, (0,), (1,), count=2, database_url=pg_url):
        await dc.wait_sessions(0, 1)
    first, second = sorted(dc.identifies, key=lambda i: i["at"])
    assert dc.invalid_sessions == [] and second["at"] - first["at"] >= WINDOW


async def test_sharding_required_names_the_setting(dc):
    """Discord's 4011 (too many servers for one connection) stops the start with the variable to set; with the bot
    sharded the same servers connect."""
    dc.guilds_per_shard = 1
    dc.starts.max_concurrency = 2
    dc.add_guild(id=guild_on(0, 2))
    dc.add_guild(id=guild_on(1, 2))
    channel = DiscordChannel(DiscordSettings(dc.token, api_base=dc.api_base, gateway_url=dc.gateway_url),
                             Published(), [])
    with pytest.raises(ConfigError, match="4011.*set TUSK_DISCORD_SHARDS"):
        await channel.start()
    async with channels(dc, (0, 1), count=2) as [(sharded, _)]:
        assert len(sharded.client.guilds) == 2


# --- the gate -------------------------------------------------------------------------------------------


async def test_the_gate_holds_a_bucket_and_lets_others_through():
    """A bucket taken stays taken for the hold; a shard of another bucket enters at once; close lets go."""
    gate = IdentifyGate()
    gate.hold = 3600.0
    await gate.enter(0, 2)
    same = asyncio.create_task(gate.enter(2, 2))  # bucket 0 again
    await gate.enter(1, 2)  # bucket 1: would hang for the hold if buckets were not kept apart
    assert not same.done()
    await gate.close()
    await asyncio.wait_for(same, 5)
    await gate.close()


async def test_the_gate_waits_for_another_process_bucket_in_postgres(pg_url):
    """Two gates on one database (two processes): the second waits on the first's advisory lock until the first
    lets it go, and another bucket is not held back."""
    first, second = IdentifyGate(pg_url), IdentifyGate(pg_url)
    first.hold = second.hold = 3600.0
    await first.enter(0, 1)
    waiting = asyncio.create_task(second.enter(0, 1))
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as watch:
        async def blocked() -> bool:
            row = await (await watch.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                             "AND NOT granted")).fetchone()
            return bool(row and row[0] == 1)

        for _ in range(200):
            if await blocked():
                break
            await asyncio.sleep(0.05)
        assert await blocked() and not waiting.done()
        other = IdentifyGate(pg_url)
        await asyncio.wait_for(other.enter(1, 2), 5)  # bucket 1 of 2: free
        await other.close()
    await first.close()
    await asyncio.wait_for(waiting, 5)
    await second.close()


async def test_the_gate_paces_within_the_process_when_the_database_does_not_answer(caplog):
    """A database that cannot be reached costs the cross-process pacing, with a warning, never the connection."""
    gate = IdentifyGate("postgresql://tusk:pw@127.0.0.1:1/tusk")  # nothing listens on port 1
    gate.hold = 3600.0
    await asyncio.wait_for(gate.enter(0, 1), 15)
    assert "pacing within this process only" in caplog.text
    await gate.close()


def test_the_log_names_a_process_shards_as_a_person_writes_them():
    """`shards 0-3 of 8` for a run, the ids one by one otherwise, `shard 1 of 2` alone."""
    assert described((0, 1, 2, 3), 8) == "shards 0-3 of 8"
    assert described((0, 2, 5), 8) == "shards 0, 2, 5 of 8" and described((1,), 2) == "shard 1 of 2"
