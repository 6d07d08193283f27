"""Discord sharding: TUSK_DISCORD_SHARDS gives a process some shards of the bot."""

import pytest

from bot.errors import ConfigError


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
