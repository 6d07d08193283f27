"""The settings of the ways in: the local HTTP API, who may talk and how fast, and each platform's own.

Each class is one concern of `bot.config.Settings`; a channel's `..._settings()` builds the settings its
channel takes (channels/<platform>/), the one place its variables are mapped. A platform's module is imported
only when its settings are built, so the platform's library (an optional extra) is needed only where it is on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, SecretStr

from bot.access.flood import FloodLimits
from bot.config.fields import CommaList, IdList, OrUnset, Shards, env, shard_set
from bot.config.store import StoreConfig
from bot.errors import ConfigError

if TYPE_CHECKING:
    from channels.discord_bot import DiscordSettings
    from channels.http import HttpSettings
    from channels.slack import SlackSettings
    from channels.telegram import TelegramSettings


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


class HttpConfig(BaseModel):
    """The local HTTP API and web console (channels/http/); its token is kept by bot/ops/access.py."""
    http_host: str = env("TUSK_HTTP_HOST", "127.0.0.1")
    http_port: int = env("TUSK_HTTP_PORT", 8765, ge=0, le=65535)
    http_token: OrUnset[SecretStr] = env("TUSK_HTTP_TOKEN", None)  # unset: $TUSK_HOME/console-token; "off": none
    http_max_connections: int = env("TUSK_HTTP_MAX_CONNECTIONS", 256, ge=8, le=100_000)
    http_idle_timeout: float = env("TUSK_HTTP_IDLE_TIMEOUT", 15.0, gt=0, le=3600)
    # GET /metrics: behind the token, or open on loopback
    metrics: Literal["token", "open"] = env("TUSK_METRICS", "token")

    def http_settings(self, token: str | None) -> HttpSettings:
        from channels.http import HttpSettings

        return HttpSettings(self.http_host, self.http_port, token, self.http_max_connections, self.http_idle_timeout)


class AccessConfig(BaseModel):
    """Who may talk to Tusk (bot/access/pairing.py, channels/base.py) and how fast (bot/access/flood.py)."""
    dm_policy: Literal["pairing", "allowlist", "open"] = env("TUSK_DM_POLICY", "pairing")
    pairing_ttl: float = env("TUSK_PAIRING_TTL", 60.0, gt=0)  # minutes a pairing code stays valid
    pairing_max_pending: int = env("TUSK_PAIRING_MAX_PENDING", 20, ge=1, le=1000)
    rate_sender_per_minute: int = env("TUSK_RATE_SENDER_PER_MINUTE", 20, ge=0)
    rate_chat_per_minute: int = env("TUSK_RATE_CHAT_PER_MINUTE", 30, ge=0)
    rate_new_chats_per_hour: int = env("TUSK_RATE_NEW_CHATS_PER_HOUR", 60, ge=0)
    group_remember: Literal["admins", "everyone"] = env("TUSK_GROUP_REMEMBER", "admins")

    def flood_limits(self) -> FloodLimits:
        return FloodLimits(self.rate_sender_per_minute, self.rate_chat_per_minute, self.rate_new_chats_per_hour)


class TelegramConfig(BaseModel):
    """Telegram (channels/telegram/): on when TELEGRAM_BOT_TOKEN is set; long polling, or a webhook."""
    telegram_bot_token: OrUnset[SecretStr] = env("TELEGRAM_BOT_TOKEN", None)
    telegram_api_base: str = env("TELEGRAM_API_BASE", "https://api.telegram.org")
    telegram_allow_from: IdList = env("TELEGRAM_ALLOW_FROM", ())
    telegram_webhook_url: OrUnset[str] = env("TELEGRAM_WEBHOOK_URL", None)
    telegram_webhook_listen: str = env("TELEGRAM_WEBHOOK_LISTEN", "127.0.0.1")
    telegram_webhook_port: int = env("TELEGRAM_WEBHOOK_PORT", 8443, ge=0, le=65535)
    telegram_webhook_secret: OrUnset[SecretStr] = env("TELEGRAM_WEBHOOK_SECRET", None)

    def telegram_settings(self) -> TelegramSettings:
        from channels.telegram import TelegramSettings

        assert self.telegram_bot_token is not None
        return TelegramSettings(
            token=self.telegram_bot_token.get_secret_value(), api_base=self.telegram_api_base,
            allow_from=frozenset(self.telegram_allow_from), webhook_url=self.telegram_webhook_url,
            webhook_listen=self.telegram_webhook_listen, webhook_port=self.telegram_webhook_port,
            webhook_secret=_secret(self.telegram_webhook_secret))


class DiscordConfig(BaseModel):
    """Discord (channels/discord_bot/): on when DISCORD_BOT_TOKEN is set."""
    discord_bot_token: OrUnset[SecretStr] = env("DISCORD_BOT_TOKEN", None)
    discord_api_base: OrUnset[str] = env("DISCORD_API_BASE", None)
    discord_gateway_url: OrUnset[str] = env("DISCORD_GATEWAY_URL", None)
    discord_allow_from: IdList = env("DISCORD_ALLOW_FROM", ())
    discord_guild_id: OrUnset[int] = env("DISCORD_GUILD_ID", None)
    discord_shards: OrUnset[Shards] = env("TUSK_DISCORD_SHARDS", None)  # "0-3/8"; unset: one connection

    def discord_settings(self) -> DiscordSettings:
        """The Discord channel's settings; with shards, the database (if any) paces IDENTIFY across processes."""
        from channels.discord_bot import DiscordSettings

        assert self.discord_bot_token is not None
        ids, count = shard_set(self.discord_shards) if self.discord_shards else (None, None)
        database = self.store_url() if isinstance(self, StoreConfig) and ids is not None else None
        return DiscordSettings(token=self.discord_bot_token.get_secret_value(), api_base=self.discord_api_base,
                               gateway_url=self.discord_gateway_url, allow_from=frozenset(self.discord_allow_from),
                               guild_id=self.discord_guild_id, shard_ids=ids, shard_count=count,
                               database_url=database)


class SlackConfig(BaseModel):
    """Slack (channels/slack/): on when SLACK_BOT_TOKEN is set, with Socket Mode or HTTP events."""
    slack_bot_token: OrUnset[SecretStr] = env("SLACK_BOT_TOKEN", None)
    slack_app_token: OrUnset[SecretStr] = env("SLACK_APP_TOKEN", None)
    slack_signing_secret: OrUnset[SecretStr] = env("SLACK_SIGNING_SECRET", None)
    slack_api_url: str = env("SLACK_API_URL", "https://slack.com/api/")
    slack_allow_from: IdList = env("SLACK_ALLOW_FROM", ())
    slack_admins: CommaList = env("SLACK_ADMINS", ())  # member ids who may /forget in channels
    slack_thread_sessions: bool = env("SLACK_THREAD_SESSIONS", True)
    slack_http_host: str = env("SLACK_HTTP_HOST", "127.0.0.1")
    slack_http_port: int = env("SLACK_HTTP_PORT", 3000, ge=0, le=65535)

    def slack_settings(self) -> SlackSettings:
        from channels.slack import SlackSettings

        assert self.slack_bot_token is not None
        if not (self.slack_app_token or self.slack_signing_secret):
            raise ConfigError("SLACK_BOT_TOKEN is set but neither SLACK_APP_TOKEN (Socket Mode) nor "
                              "SLACK_SIGNING_SECRET (HTTP events) is: set one of them.")
        return SlackSettings(
            bot_token=self.slack_bot_token.get_secret_value(), app_token=_secret(self.slack_app_token),
            signing_secret=_secret(self.slack_signing_secret), api_url=self.slack_api_url,
            allow_from=frozenset(self.slack_allow_from), admins=frozenset(self.slack_admins),
            thread_sessions=self.slack_thread_sessions, http_host=self.slack_http_host, http_port=self.slack_http_port)
