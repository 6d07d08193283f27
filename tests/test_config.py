"""Settings: .env.example is complete and loads as it ships."""

import typing
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.config import Settings, load_settings
from bot.errors import ConfigError
from bot.places import default_home
from channels.discord_bot import DiscordSettings
from channels.slack import SlackSettings
from channels.telegram import TelegramSettings

EXAMPLE = Path(__file__).resolve().parent.parent / ".env.example"


def test_every_setting_is_documented_in_env_example():
    """Each variable Tusk reads has a line in .env.example."""
    documented = {line.split("=", 1)[0] for line in EXAMPLE.read_text().splitlines()
                  if "=" in line and not line.startswith("#")}
    names = {field.validation_alias for field in Settings.model_fields.values()}
    assert names - documented == set()


def test_env_example_loads_as_it_ships(tmp_path, monkeypatch, make_settings):
    """A copy of .env.example with only TUSK_MODEL filled in is a valid configuration."""
    make_settings()  # clears TUSK_/platform variables from the environment and moves into tmp_path
    (tmp_path / ".env").write_text(EXAMPLE.read_text().replace("\nTUSK_MODEL=\n", "\nTUSK_MODEL=openai/gpt-4o-mini\n"))
    settings = load_settings()
    assert settings.model == "openai/gpt-4o-mini" and settings.telegram_bot_token is None
    assert settings.home == default_home() and settings.open_allow_lists() == []


def test_a_blank_value_is_unset_for_every_setting_that_may_be_unset(make_settings):
    """Every setting that may be unset takes a blank value (`VAR=` as .env.example ships it) as unset, whatever
    its type: a blank TUSK_BACKUP_DIR turns no daily backup on, a blank DISCORD_GUILD_ID is no guild."""
    optional = {name: field.validation_alias for name, field in Settings.model_fields.items() if field.default is None}
    settings = make_settings(**{variable: "  " for variable in optional.values()})
    assert {variable for name, variable in optional.items() if getattr(settings, name) is not None} == set()
    assert {"TUSK_BACKUP_DIR", "DISCORD_GUILD_ID", "TUSK_VISION", "TUSK_TTS_PRICE"} <= set(optional.values())


def test_every_secret_setting_is_kept_out_of_the_log(make_settings):
    """What the log masks (`secrets()`) holds the value of every secret setting, found by its type."""
    secret = [field.validation_alias for field in Settings.model_fields.values()
              if SecretStr in (field.annotation, *typing.get_args(field.annotation))]
    settings = make_settings(**{variable: f"value-of-{variable}" for variable in secret})
    assert len(secret) == 13 and set(settings.secrets()) >= {f"value-of-{variable}" for variable in secret}


def test_each_platform_builds_its_channels_settings_from_its_variables(make_settings):
    """TELEGRAM_*, DISCORD_* and SLACK_* reach the settings each channel takes: secrets unwrapped, lists as sets,
    numbers and switches read."""
    s = make_settings(TELEGRAM_BOT_TOKEN="1:T", TELEGRAM_ALLOW_FROM="7, -1008", TELEGRAM_WEBHOOK_URL="https://x/hook",
                      TELEGRAM_WEBHOOK_PORT="8444", TELEGRAM_WEBHOOK_SECRET="ws", DISCORD_BOT_TOKEN="D",
                      DISCORD_ALLOW_FROM="80351110224678912", DISCORD_GUILD_ID="42", DISCORD_GATEWAY_URL="ws://h/g",
                      SLACK_BOT_TOKEN="xoxb-1", SLACK_APP_TOKEN="xapp-1", SLACK_ALLOW_FROM="U0123ABCD",
                      SLACK_ADMINS="U1,U2", SLACK_THREAD_SESSIONS="false", SLACK_HTTP_PORT="3001")
    assert s.telegram_settings() == TelegramSettings(token="1:T", allow_from=frozenset({"7", "-1008"}),
                                                     webhook_url="https://x/hook", webhook_port=8444, webhook_secret="ws")
    assert s.discord_settings() == DiscordSettings(token="D", gateway_url="ws://h/g", guild_id=42,
                                                   allow_from=frozenset({"80351110224678912"}))
    assert s.slack_settings() == SlackSettings(bot_token="xoxb-1", app_token="xapp-1", allow_from=frozenset({"U0123ABCD"}),
                                               admins=frozenset({"U1", "U2"}), thread_sessions=False, http_port=3001)


def test_slack_without_a_way_to_receive_events_names_both(make_settings):
    """SLACK_BOT_TOKEN alone stops Slack's start with the two variables to choose from."""
    with pytest.raises(ConfigError, match="neither SLACK_APP_TOKEN .* nor SLACK_SIGNING_SECRET"):
        make_settings(SLACK_BOT_TOKEN="xoxb-1").slack_settings()
