"""Settings: read once from the environment and the settings file (bot/places.py), validated at start.

`Settings` is made of one model per concern, each with its variables and the method that builds its
component's settings (`llm_settings()`, `telegram_settings()`, ...):

    model.py     LlmConfig, MemoryConfig, LimitsConfig, TurnsConfig
    tools.py     SchedulesConfig, TasksConfig, McpConfig, WebConfig, SkillsConfig
    media.py     MediaConfig, SpeechConfig
    channels.py  HttpConfig, AccessConfig, TelegramConfig, DiscordConfig, SlackConfig
    fields.py    the kinds of value (blank is unset, comma lists, ids, time zones), checked by type

Every variable is documented in `.env.example` (and the generated configuration reference). A wrong or
missing value stops Tusk at start with a `ConfigError` that names the variable and the fix; components
receive their own slice, never the whole object.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.config.channels import AccessConfig, DiscordConfig, HttpConfig, SlackConfig, TelegramConfig
from bot.config.fields import Zone, env
from bot.config.media import MediaConfig, SpeechConfig
from bot.config.model import MODEL_HINT, LimitsConfig, LlmConfig, MemoryConfig, TurnsConfig
from bot.config.tools import McpConfig, SchedulesConfig, SkillsConfig, TasksConfig, WebConfig
from bot.config.store import StoreConfig
from bot.errors import ConfigError
from bot.places import SettingsFile, default_home, settings_file

__all__ = ["MODEL_HINT", "Settings", "load_settings", "settings_from"]

Home = Annotated[Path, BeforeValidator(lambda v: default_home() if isinstance(v, str) and not v.strip() else v)]


class Settings(LlmConfig, MemoryConfig, LimitsConfig, TurnsConfig, SchedulesConfig, TasksConfig, McpConfig,
               WebConfig, SkillsConfig, MediaConfig, SpeechConfig, HttpConfig, AccessConfig, TelegramConfig,
               DiscordConfig, SlackConfig, StoreConfig, BaseSettings):
    """Every setting: the general ones here, the others in their concern's model."""

    model_config = SettingsConfigDict(env_file=None, env_file_encoding="utf-8", extra="ignore")

    home: Home = Field(default_factory=default_home, validation_alias="TUSK_HOME")  # bot/places.py
    bot_name: str = env("TUSK_BOT_NAME", "Tusk", min_length=1, max_length=64)
    log_level: str = env("TUSK_LOG_LEVEL", "INFO", pattern=r"(?i)^(debug|info|warning|error)$")
    log_format: str = env("TUSK_LOG_FORMAT", "text", pattern=r"^(text|json)$")
    log_content: bool = env("TUSK_LOG_CONTENT", False)
    timezone: Zone = env("TUSK_TIMEZONE", "UTC")
    shutdown_grace: float = env("TUSK_SHUTDOWN_GRACE", 30.0, ge=0)

    def open_allow_lists(self) -> list[str]:
        """The allow-list variables left empty for platforms that are configured (everyone may talk)."""
        if self.dm_policy != "open":
            return []  # strangers get a pairing code, or nothing
        pairs = (("TELEGRAM_ALLOW_FROM", self.telegram_bot_token, self.telegram_allow_from),
                 ("DISCORD_ALLOW_FROM", self.discord_bot_token, self.discord_allow_from),
                 ("SLACK_ALLOW_FROM", self.slack_bot_token, self.slack_allow_from))
        return [name for name, token, allow in pairs if token is not None and not allow]

    def secrets(self) -> list[str]:
        """Values that must never appear in a log line: every secret setting, and the MCP servers' own."""
        values = [value for name in type(self).model_fields if isinstance(value := getattr(self, name), SecretStr)]
        try:
            mcp = [secret for server in self.mcp_servers() for secret in server.secrets()]
        except ConfigError:  # reported where the servers are loaded; nothing to mask from a file not read
            mcp = []
        return [s.get_secret_value() for s in values] + mcp + self.database_secrets()


def load_settings(source: SettingsFile | None = None, **overrides: object) -> Settings:
    """Settings from the environment and the settings file (`source`, else TUSK_ENV_FILE, ./.env or the
    user config dir's tusk.env: bot/places.py); a bad value becomes a ConfigError naming its variable."""
    source = source or settings_file()
    if source.origin == "TUSK_ENV_FILE" and not source.found:
        raise ConfigError(f"TUSK_ENV_FILE={source.path} does not exist (or is not readable as a file)")
    return settings_from(source.path if source.found else None, overrides)


def settings_from(env_file: Path | None, values: Mapping[str, Any]) -> Settings:
    """Settings from `values` by variable name (TUSK_MODEL=...: any value pydantic reads as the setting's),
    above the environment, above `env_file`; a bad value becomes a ConfigError naming its variable."""
    try:
        return Settings(_env_file=env_file, **values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '?'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid configuration: {problems}") from exc
