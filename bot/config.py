"""Settings: read once from the environment and the settings file (bot/places.py), validated at start.

Every variable is documented in `.env.example`. A wrong or missing value stops Tusk at
start with a `ConfigError` that names the variable and the fix; components receive
their own slice (`llm_settings()`, `agent_settings()`, ...), never the whole object.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.access.allow import ids_only
from bot.agent import AgentSettings
from bot.errors import ConfigError
from bot.access.flood import FloodLimits
from bot.llm import LLMSettings
from bot.media import MediaSettings
from bot.media.voice import TranscribeSettings
from bot.places import SettingsFile, default_home, settings_file
from bot.speech.config import SpeechSettings
from bot.stream import StreamSettings
from bot.tools.mcp.config import McpSettings, ServerConfig
from bot.tools.mcp.config import load as load_mcp
from bot.schedules.service import ScheduleSettings
from bot.tools.tasks import TaskSettings
from bot.usage.limits import LimitSettings
from bot.usage.prices import ModelChoice, parse_models
from memory.chat_settings import zone
from memory.documents import DocumentLimits
from memory.media import MB, MediaLimits

if TYPE_CHECKING:
    from bot.skills.config import SkillSettings
    from bot.tools.web.config import WebSettings

MODEL_HINT = "set it to a litellm model string such as openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest or ollama/llama3.1"


def _env(name: str, default, **kw):
    return Field(default, validation_alias=name, **kw)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=None, env_file_encoding="utf-8", extra="ignore")

    home: Path = Field(default_factory=default_home, validation_alias="TUSK_HOME")  # bot/places.py
    # PostgreSQL instead of files (store/postgres/): postgresql://user:password@host:5432/db
    database_url: SecretStr | None = _env("TUSK_DATABASE_URL", None)
    bot_name: str = _env("TUSK_BOT_NAME", "Tusk", min_length=1, max_length=64)
    log_level: str = _env("TUSK_LOG_LEVEL", "INFO", pattern=r"(?i)^(debug|info|warning|error)$")
    log_format: str = _env("TUSK_LOG_FORMAT", "text", pattern=r"^(text|json)$")
    log_content: bool = _env("TUSK_LOG_CONTENT", False)

    model: str | None = _env("TUSK_MODEL", None)
    api_base: str | None = _env("TUSK_API_BASE", None)
    api_key: SecretStr | None = _env("TUSK_API_KEY", None)
    fallback_models: Annotated[tuple[str, ...], NoDecode] = _env("TUSK_FALLBACK_MODELS", ())
    llm_timeout: float = _env("TUSK_LLM_TIMEOUT", 120.0, gt=0)
    llm_retries: int = _env("TUSK_LLM_RETRIES", 3, ge=0, le=10)
    llm_backoff: float = _env("TUSK_LLM_BACKOFF", 1.0, ge=0)
    max_reply_tokens: int | None = _env("TUSK_MAX_REPLY_TOKENS", None, gt=0)
    thinking_budget: int | None = _env("TUSK_THINKING_BUDGET", None, ge=1024)  # Anthropic extended thinking
    consolidation_model: str | None = _env("TUSK_CONSOLIDATION_MODEL", None)
    context_window: int | None = _env("TUSK_CONTEXT_WINDOW", None, ge=1024)
    memory_max_tokens: int | None = _env("TUSK_MEMORY_MAX_TOKENS", None, ge=100)
    persona_max_tokens: int = _env("TUSK_PERSONA_MAX_TOKENS", 500, ge=20, le=8000)  # a chat's /persona
    models: str = _env("TUSK_MODELS", "")  # label=model[@IN/OUT],...: the models a chat may pick (bot/usage/prices.py)
    limit_daily_usd: float | None = _env("TUSK_LIMIT_DAILY_USD", None, ge=0)  # owner-wide (bot/usage/limits.py)
    limit_monthly_usd: float | None = _env("TUSK_LIMIT_MONTHLY_USD", None, ge=0)
    chat_limit_daily_usd: float | None = _env("TUSK_CHAT_LIMIT_DAILY_USD", None, ge=0)
    person_limit_daily_usd: float | None = _env("TUSK_PERSON_LIMIT_DAILY_USD", None, ge=0)
    limit_daily_tokens: int | None = _env("TUSK_LIMIT_DAILY_TOKENS", None, ge=0)  # models with no known price
    chat_limit_daily_tokens: int | None = _env("TUSK_CHAT_LIMIT_DAILY_TOKENS", None, ge=0)
    consolidate_every: float = _env("TUSK_CONSOLIDATE_EVERY", 10.0, gt=0)
    backup_dir: Path | None = _env("TUSK_BACKUP_DIR", None)  # daily `tusk backup` into it (bot/ops/backup.py)
    backup_keep: int = _env("TUSK_BACKUP_KEEP", 7, ge=1)

    max_tool_iterations: int = _env("TUSK_MAX_TOOL_ITERATIONS", 20, ge=1, le=100)
    tool_result_max_chars: int = _env("TUSK_TOOL_RESULT_MAX_CHARS", 16_000, ge=100)
    max_message_chars: int = _env("TUSK_MAX_MESSAGE_CHARS", 32_000, ge=100)

    timezone: str = _env("TUSK_TIMEZONE", "UTC")
    memory_notices: bool = _env("TUSK_MEMORY_NOTICES", True)
    reminder_grace: float = _env("TUSK_REMINDER_GRACE", 1440.0, gt=0)  # minutes
    max_reminders: int = _env("TUSK_MAX_REMINDERS", 50, ge=1, le=10_000)  # one-time and repeating together
    checkins_daily: int = _env("TUSK_CHECKINS_DAILY", 2, ge=1, le=20)  # check-ins one chat gets a day (/checkins)
    task_timeout: float = _env("TUSK_TASK_TIMEOUT", 300.0, gt=0)
    task_max_steps: int = _env("TUSK_TASK_MAX_STEPS", 8, ge=1, le=50)
    max_tasks: int = _env("TUSK_MAX_TASKS", 3, ge=1, le=20)

    mcp_config: Path | None = _env("TUSK_MCP_CONFIG", None)  # default: mcp.json beside the settings file
    mcp_timeout: float = _env("TUSK_MCP_TIMEOUT", 60.0, gt=0, le=3600)
    mcp_tool_tokens: int = _env("TUSK_MCP_TOOL_TOKENS", 4000, ge=0)
    mcp_restart_backoff: float = _env("TUSK_MCP_RESTART_BACKOFF", 1.0, gt=0, le=60)

    web_fetch: bool = _env("TUSK_WEB_FETCH", True)  # the web tools (bot/tools/web/)
    web_search: Literal["off", "searxng", "brave", "tavily", "keyless"] = _env("TUSK_WEB_SEARCH", "off")
    searxng_url: str = _env("TUSK_SEARXNG_URL", "")
    brave_api_key: SecretStr | None = _env("TUSK_BRAVE_API_KEY", None)
    brave_api_base: str = _env("TUSK_BRAVE_API_BASE", "https://api.search.brave.com")
    tavily_api_key: SecretStr | None = _env("TUSK_TAVILY_API_KEY", None)
    tavily_api_base: str = _env("TUSK_TAVILY_API_BASE", "https://api.tavily.com")
    web_allow_hosts: str = _env("TUSK_WEB_ALLOW_HOSTS", "")  # host or host:port, reachable even inside
    web_chats: str = _env("TUSK_WEB_CHATS", "*")  # chat patterns as in mcp.json
    web_groups: bool = _env("TUSK_WEB_GROUPS", True)
    web_max_bytes: int = _env("TUSK_WEB_MAX_BYTES", 5_000_000, ge=10_000, le=100_000_000)
    web_max_tokens: int = _env("TUSK_WEB_MAX_TOKENS", 4000, ge=100, le=100_000)
    web_timeout: float = _env("TUSK_WEB_TIMEOUT", 20.0, gt=0, le=300)
    web_host_interval: float = _env("TUSK_WEB_HOST_INTERVAL", 1.0, ge=0, le=60)

    skills_dirs: str = _env("TUSK_SKILLS_DIRS", "")  # the skills (bot/skills/): more folders of skill folders
    skills_shared: bool = _env("TUSK_SKILLS_SHARED", True)  # ~/.agents/skills too
    skills_max_tokens: int = _env("TUSK_SKILLS_MAX_TOKENS", 1000, ge=100, le=100_000)
    skills_chats: str = _env("TUSK_SKILLS_CHATS", "*")  # chat patterns, `skill=pattern` for one skill
    skills_groups: bool = _env("TUSK_SKILLS_GROUPS", True)

    media_max_mb: float = _env("TUSK_MEDIA_MAX_MB", 20.0, gt=0, le=2048)  # one file (memory/media.py)
    media_chat_mb: float = _env("TUSK_MEDIA_CHAT_MB", 200.0, gt=0)  # all files one chat keeps
    media_chat_files: int = _env("TUSK_MEDIA_CHAT_FILES", 200, ge=1)
    transcribe_model: str | None = _env("TUSK_TRANSCRIBE_MODEL", None)  # voice notes (bot/media/voice.py)
    transcribe_api_base: str | None = _env("TUSK_TRANSCRIBE_API_BASE", None)  # default: TUSK_API_BASE
    transcribe_api_key: SecretStr | None = _env("TUSK_TRANSCRIBE_API_KEY", None)  # default: TUSK_API_KEY
    show_transcript: Literal["groups", "always", "never"] = _env("TUSK_SHOW_TRANSCRIPT", "groups")
    vision: bool | None = _env("TUSK_VISION", None)  # unset: litellm's capability data for TUSK_MODEL
    vision_model: str | None = _env("TUSK_VISION_MODEL", None)  # describes photos when TUSK_MODEL cannot see
    document_max_chars: int = _env("TUSK_DOCUMENT_MAX_CHARS", 60_000, ge=1000, le=2_000_000)
    # the text of documents and web pages kept for search_history (memory/documents.py): per document (0: none)
    document_index_max_chars: int = _env("TUSK_DOCUMENT_INDEX_MAX_CHARS", 200_000, ge=0, le=10_000_000)
    document_index_chat_max_chars: int = _env("TUSK_DOCUMENT_INDEX_CHAT_MAX_CHARS", 2_000_000, ge=0,
                                              le=1_000_000_000)  # all of one chat's kept documents

    # voice replies (bot/speech/)
    voice_replies: Literal["auto", "on", "off"] = _env("TUSK_VOICE_REPLIES", "auto")  # the chats' default (/voice)
    voice_text: Literal["caption", "message"] = _env("TUSK_VOICE_TEXT", "caption")  # the text on the voice, or after
    tts_model: str | None = _env("TUSK_TTS_MODEL", None)  # litellm speech model: openai/tts-1, openai/kokoro
    tts_api_base: str | None = _env("TUSK_TTS_API_BASE", None)  # default: TUSK_API_BASE
    tts_api_key: SecretStr | None = _env("TUSK_TTS_API_KEY", None)  # default: TUSK_API_KEY
    tts_voice: str = _env("TUSK_TTS_VOICE", "", max_length=200)  # the provider's voice (alloy), {voice} in a command
    tts_command: str | None = _env("TUSK_TTS_COMMAND", None)  # a local engine: espeak-ng -v {lang} -w {out} --stdin
    tts_timeout: float = _env("TUSK_TTS_TIMEOUT", 30.0, gt=0, le=600)  # seconds a reply waits for its voice
    tts_max_chars: int = _env("TUSK_TTS_MAX_CHARS", 1500, ge=50, le=4096)  # read out up to a sentence end
    tts_price: float | None = _env("TUSK_TTS_PRICE", None, ge=0)  # USD per million characters

    http_host: str = _env("TUSK_HTTP_HOST", "127.0.0.1")
    http_port: int = _env("TUSK_HTTP_PORT", 8765, ge=0, le=65535)
    http_token: SecretStr | None = _env("TUSK_HTTP_TOKEN", None)  # unset: $TUSK_HOME/console-token; "off": none
    http_max_connections: int = _env("TUSK_HTTP_MAX_CONNECTIONS", 256, ge=8, le=100_000)
    http_idle_timeout: float = _env("TUSK_HTTP_IDLE_TIMEOUT", 15.0, gt=0, le=3600)
    metrics: Literal["token", "open"] = _env("TUSK_METRICS", "token")  # GET /metrics: behind the token, or open on loopback
    shutdown_grace: float = _env("TUSK_SHUTDOWN_GRACE", 30.0, ge=0)

    telegram_bot_token: SecretStr | None = _env("TELEGRAM_BOT_TOKEN", None)
    telegram_api_base: str = _env("TELEGRAM_API_BASE", "https://api.telegram.org")
    telegram_allow_from: Annotated[tuple[str, ...], NoDecode] = _env("TELEGRAM_ALLOW_FROM", ())
    telegram_webhook_url: str | None = _env("TELEGRAM_WEBHOOK_URL", None)
    telegram_webhook_listen: str = _env("TELEGRAM_WEBHOOK_LISTEN", "127.0.0.1")
    telegram_webhook_port: int = _env("TELEGRAM_WEBHOOK_PORT", 8443, ge=0, le=65535)
    telegram_webhook_secret: SecretStr | None = _env("TELEGRAM_WEBHOOK_SECRET", None)

    discord_bot_token: SecretStr | None = _env("DISCORD_BOT_TOKEN", None)
    discord_api_base: str | None = _env("DISCORD_API_BASE", None)
    discord_gateway_url: str | None = _env("DISCORD_GATEWAY_URL", None)
    discord_allow_from: Annotated[tuple[str, ...], NoDecode] = _env("DISCORD_ALLOW_FROM", ())
    discord_guild_id: int | None = _env("DISCORD_GUILD_ID", None)

    slack_bot_token: SecretStr | None = _env("SLACK_BOT_TOKEN", None)
    slack_app_token: SecretStr | None = _env("SLACK_APP_TOKEN", None)
    slack_signing_secret: SecretStr | None = _env("SLACK_SIGNING_SECRET", None)
    slack_api_url: str = _env("SLACK_API_URL", "https://slack.com/api/")
    slack_allow_from: Annotated[tuple[str, ...], NoDecode] = _env("SLACK_ALLOW_FROM", ())
    slack_admins: Annotated[tuple[str, ...], NoDecode] = _env("SLACK_ADMINS", ())
    slack_thread_sessions: bool = _env("SLACK_THREAD_SESSIONS", True)
    slack_http_host: str = _env("SLACK_HTTP_HOST", "127.0.0.1")
    slack_http_port: int = _env("SLACK_HTTP_PORT", 3000, ge=0, le=65535)

    # who may talk to Tusk (bot/access/pairing.py, channels/base.py) and how fast (bot/access/flood.py)
    dm_policy: Literal["pairing", "allowlist", "open"] = _env("TUSK_DM_POLICY", "pairing")
    pairing_ttl: float = _env("TUSK_PAIRING_TTL", 60.0, gt=0)  # minutes a pairing code stays valid
    pairing_max_pending: int = _env("TUSK_PAIRING_MAX_PENDING", 20, ge=1, le=1000)
    rate_sender_per_minute: int = _env("TUSK_RATE_SENDER_PER_MINUTE", 20, ge=0)
    rate_chat_per_minute: int = _env("TUSK_RATE_CHAT_PER_MINUTE", 30, ge=0)
    rate_new_chats_per_hour: int = _env("TUSK_RATE_NEW_CHATS_PER_HOUR", 60, ge=0)
    group_remember: Literal["admins", "everyone"] = _env("TUSK_GROUP_REMEMBER", "admins")

    # streaming replies (bot/stream.py)
    stream: Literal["auto", "off"] = _env("TUSK_STREAM", "auto")
    stream_min_chars: int = _env("TUSK_STREAM_MIN_CHARS", 120, ge=0, le=4000)

    @field_validator("fallback_models", "telegram_allow_from", "discord_allow_from", "slack_allow_from",
                     "slack_admins", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return tuple(v.strip() for v in value.split(",") if v.strip()) if isinstance(value, str) else value

    @field_validator("model", "api_base", "api_key", "http_token", "max_reply_tokens", "consolidation_model",
                     "context_window", "memory_max_tokens", "telegram_bot_token", "telegram_webhook_url",
                     "telegram_webhook_secret", "discord_bot_token", "discord_api_base", "discord_gateway_url",
                     "discord_guild_id", "slack_bot_token", "slack_app_token", "slack_signing_secret", "mcp_config",
                     "transcribe_model", "transcribe_api_base", "database_url", "transcribe_api_key", "vision", "vision_model",
                     "thinking_budget", "limit_daily_usd", "limit_monthly_usd", "chat_limit_daily_usd",
                     "person_limit_daily_usd", "limit_daily_tokens", "chat_limit_daily_tokens", "brave_api_key",
                     "tavily_api_key", "tts_model", "tts_api_base", "tts_api_key", "tts_command", "tts_price",
                     mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("home", mode="before")
    @classmethod
    def _blank_home_is_default(cls, value: object) -> object:
        return default_home() if isinstance(value, str) and not value.strip() else value

    @field_validator("telegram_allow_from", "discord_allow_from", "slack_allow_from")
    @classmethod
    def _ids_only(cls, value: tuple[str, ...], info) -> tuple[str, ...]:
        return ids_only(f"{info.field_name.upper()}", value)  # usernames stop Tusk here (bot/access/allow.py)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return zone(value).key  # raises "'X' is not a time zone I know: use an IANA name such as ..."

    def media_limits(self) -> MediaLimits:
        return MediaLimits(int(self.media_max_mb * MB), int(self.media_chat_mb * MB), self.media_chat_files)

    def media_settings(self) -> MediaSettings:
        key = self.transcribe_api_key or self.api_key
        return MediaSettings(
            TranscribeSettings(self.transcribe_model, self.transcribe_api_base or self.api_base,
                               key.get_secret_value() if key else None, self.llm_timeout),
            self.show_transcript, self.vision, self.vision_model, self.document_max_chars, self.document_limits())

    def document_limits(self) -> DocumentLimits:
        return DocumentLimits(self.document_index_max_chars, self.document_index_chat_max_chars)

    def speech_settings(self) -> SpeechSettings:
        key = self.tts_api_key or self.api_key
        return SpeechSettings(model=self.tts_model, api_base=self.tts_api_base or self.api_base,
                              api_key=key.get_secret_value() if key else None, voice=self.tts_voice.strip(),
                              command=self.tts_command, timeout=self.tts_timeout, max_chars=self.tts_max_chars,
                              price_per_mchar=self.tts_price, replies=self.voice_replies, text_as=self.voice_text)

    def llm_settings(self) -> LLMSettings:
        if not self.model:
            raise ConfigError(f"TUSK_MODEL is not set: run `tusk init` to set Tusk up (it asks for the model and "
                              f"its key, and checks them), or {MODEL_HINT}.")
        return LLMSettings(
            model=self.model, api_base=self.api_base,
            api_key=self.api_key.get_secret_value() if self.api_key else None,
            fallbacks=self.fallback_models, timeout=self.llm_timeout, retries=self.llm_retries,
            backoff=self.llm_backoff, max_tokens=self.max_reply_tokens,
            thinking_budget=self.thinking_budget,
        )

    def model_choices(self) -> dict[str, ModelChoice]:
        """TUSK_MODELS read: label -> model (and its price, where given)."""
        try:
            return parse_models(self.models)
        except ValueError as exc:
            raise ConfigError(f"TUSK_MODELS: {exc}. Write it as label=model pairs separated by commas, a price "
                              "in USD per million input/output tokens after @: fast=openai/gpt-4o-mini,"
                              "local=openai/tiny@0/0") from exc

    def limit_settings(self) -> LimitSettings:
        return LimitSettings(daily_usd=self.limit_daily_usd, monthly_usd=self.limit_monthly_usd,
                             chat_daily_usd=self.chat_limit_daily_usd, person_daily_usd=self.person_limit_daily_usd,
                             daily_tokens=self.limit_daily_tokens, chat_daily_tokens=self.chat_limit_daily_tokens,
                             zone=zone(self.timezone))

    def stream_settings(self) -> StreamSettings:
        return StreamSettings(self.stream, self.stream_min_chars)

    def agent_settings(self) -> AgentSettings:
        return AgentSettings(model=self.model or "", max_tool_iterations=self.max_tool_iterations,
                             tool_result_max_chars=self.tool_result_max_chars,
                             max_message_chars=self.max_message_chars, log_content=self.log_content)

    def schedule_settings(self) -> ScheduleSettings:
        return ScheduleSettings(default_timezone=self.timezone, grace_seconds=max(1, round(self.reminder_grace * 60)),
                                max_per_chat=self.max_reminders, checkins_daily=self.checkins_daily)

    def task_settings(self, budget_tokens: int) -> TaskSettings:
        return TaskSettings(timeout=self.task_timeout, max_steps=self.task_max_steps, max_running=self.max_tasks,
                            result_max_chars=self.tool_result_max_chars, budget_tokens=budget_tokens)

    def flood_limits(self) -> FloodLimits:
        return FloodLimits(self.rate_sender_per_minute, self.rate_chat_per_minute, self.rate_new_chats_per_hour)

    def mcp_servers(self) -> list[ServerConfig]:
        """The MCP servers of mcp.json (TUSK_MCP_CONFIG, else beside the settings file read, else in the
        working directory); none if it is absent."""
        source = settings_file()
        path = self.mcp_config or (source.path.parent if source.found else Path.cwd()) / "mcp.json"
        return load_mcp(path, required=self.mcp_config is not None)

    def mcp_settings(self) -> McpSettings:
        return McpSettings(timeout=self.mcp_timeout, tool_tokens=self.mcp_tool_tokens,
                           backoff=self.mcp_restart_backoff, result_max_chars=self.tool_result_max_chars)

    def web_settings(self) -> WebSettings:
        from bot.tools.web.config import WebSettings, chat_patterns, user_agent
        from bot.tools.web.guard import parse_allow

        try:
            allow = parse_allow(self.web_allow_hosts)
            chats = chat_patterns(self.web_chats)
        except ValueError as exc:
            raise ConfigError(f"{exc}: TUSK_WEB_ALLOW_HOSTS is host or host:port items (localhost:8888,wiki.lan), "
                              "TUSK_WEB_CHATS is *, channel:* or channel:chat_id items") from exc
        needs = {"searxng": ("TUSK_SEARXNG_URL", self.searxng_url, "http://localhost:8888"),
                 "brave": ("TUSK_BRAVE_API_KEY", self.brave_api_key, "your Brave Search API key"),
                 "tavily": ("TUSK_TAVILY_API_KEY", self.tavily_api_key, "your Tavily API key")}.get(self.web_search)
        if needs and not needs[1]:
            raise ConfigError(f"TUSK_WEB_SEARCH={self.web_search} needs {needs[0]}: set it to {needs[2]} "
                              "(or set TUSK_WEB_SEARCH=off)")
        return WebSettings(fetch=self.web_fetch, search=self.web_search, searxng_url=self.searxng_url,
                           brave_api_key=self.brave_api_key.get_secret_value() if self.brave_api_key else "",
                           tavily_api_key=self.tavily_api_key.get_secret_value() if self.tavily_api_key else "",
                           brave_api_base=self.brave_api_base, tavily_api_base=self.tavily_api_base, allow=allow,
                           chats=chats, groups=self.web_groups, max_bytes=self.web_max_bytes,
                           max_tokens=self.web_max_tokens, max_chars=self.tool_result_max_chars,
                           timeout=self.web_timeout,
                           host_interval=self.web_host_interval, user_agent=user_agent())

    def skill_settings(self) -> SkillSettings:
        from bot.skills.catalog import roots
        from bot.skills.config import ChatRules, SkillSettings, skill_dirs

        try:
            chats = ChatRules.parse(self.skills_chats)
        except ValueError as exc:
            raise ConfigError(f"TUSK_SKILLS_CHATS: {exc}. Write chat patterns (*, channel:*, channel:chat_id) "
                              "and skill=pattern or skill=off items, separated by commas: *,oncall=slack:*") from exc
        return SkillSettings(roots(self.home, self.skills_shared, skill_dirs(self.skills_dirs)),
                             self.skills_max_tokens, chats, self.skills_groups, self.tool_result_max_chars)

    def open_allow_lists(self) -> list[str]:
        """The allow-list variables left empty for platforms that are configured (everyone may talk)."""
        if self.dm_policy != "open":
            return []  # strangers get a pairing code, or nothing
        pairs = (("TELEGRAM_ALLOW_FROM", self.telegram_bot_token, self.telegram_allow_from),
                 ("DISCORD_ALLOW_FROM", self.discord_bot_token, self.discord_allow_from),
                 ("SLACK_ALLOW_FROM", self.slack_bot_token, self.slack_allow_from))
        return [name for name, token, allow in pairs if token is not None and not allow]

    def secrets(self) -> list[str]:
        """Values that must never appear in a log line."""
        values = (self.api_key, self.transcribe_api_key, self.tts_api_key, self.http_token, self.telegram_bot_token, self.telegram_webhook_secret,
                  self.discord_bot_token, self.slack_bot_token, self.slack_app_token, self.slack_signing_secret,
                  self.brave_api_key, self.tavily_api_key)
        try:
            mcp = [secret for server in self.mcp_servers() for secret in server.secrets()]
        except ConfigError:  # reported where the servers are loaded; nothing to mask from a file not read
            mcp = []
        database = []
        if self.database_url is not None:
            from store.postgres.url import password

            database = [p for p in [password(self.database_url.get_secret_value())] if p]
        return [s.get_secret_value() for s in values if s is not None] + mcp + database


def load_settings(source: SettingsFile | None = None, **overrides: object) -> Settings:
    """Settings from the environment and the settings file (`source`, else TUSK_ENV_FILE, ./.env or the
    user config dir's tusk.env: bot/places.py); a bad value becomes a ConfigError naming its variable."""
    source = source or settings_file()
    if source.origin == "TUSK_ENV_FILE" and not source.found:
        raise ConfigError(f"TUSK_ENV_FILE={source.path} does not exist (or is not readable as a file)")
    try:
        return Settings(_env_file=source.path if source.found else None, **overrides)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '?'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid configuration: {problems}") from exc
