"""The settings of what the model can do beside answering: reminders, background tasks, MCP, the web, skills.
Concerns of `bot.config.Settings`, with TUSK_TOOL_RESULT_MAX_CHARS, TUSK_TIMEZONE, TUSK_HOME where needed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, SecretStr

from bot.config.fields import OrUnset, env
from bot.errors import ConfigError
from bot.places import settings_file
from bot.schedules.service import ScheduleSettings
from bot.tools.mcp.config import McpSettings, ServerConfig
from bot.tools.mcp.config import load as load_mcp
from bot.tools.tasks import TaskSettings

if TYPE_CHECKING:
    from bot.skills.config import SkillSettings
    from bot.tools.web.config import WebSettings


class SchedulesConfig(BaseModel):
    """Reminders, repeating schedules and check-ins (bot/schedules/)."""
    if TYPE_CHECKING:  # other concerns' settings, read here (Settings has them all)
        timezone: str  # TUSK_TIMEZONE (Settings)

    reminder_grace: float = env("TUSK_REMINDER_GRACE", 1440.0, gt=0)  # minutes
    max_reminders: int = env("TUSK_MAX_REMINDERS", 50, ge=1, le=10_000)  # one-time and repeating together
    checkins_daily: int = env("TUSK_CHECKINS_DAILY", 2, ge=1, le=20)  # check-ins one chat gets a day (/checkins)

    def schedule_settings(self) -> ScheduleSettings:
        return ScheduleSettings(default_timezone=self.timezone, grace_seconds=max(1, round(self.reminder_grace * 60)),
                                max_per_chat=self.max_reminders, checkins_daily=self.checkins_daily)


class TasksConfig(BaseModel):
    """Background tasks (bot/tools/tasks.py)."""
    if TYPE_CHECKING:  # other concerns' settings, read here (Settings has them all)
        tool_result_max_chars: int  # TUSK_TOOL_RESULT_MAX_CHARS (TurnsConfig)

    task_timeout: float = env("TUSK_TASK_TIMEOUT", 300.0, gt=0)
    task_max_steps: int = env("TUSK_TASK_MAX_STEPS", 8, ge=1, le=50)
    max_tasks: int = env("TUSK_MAX_TASKS", 3, ge=1, le=20)

    def task_settings(self) -> TaskSettings:
        return TaskSettings(timeout=self.task_timeout, max_steps=self.task_max_steps, max_running=self.max_tasks,
                            result_max_chars=self.tool_result_max_chars)


class McpConfig(BaseModel):
    """Tools from MCP servers (bot/tools/mcp/): where mcp.json is, and how its servers are called."""
    if TYPE_CHECKING:  # other concerns' settings, read here (Settings has them all)
        tool_result_max_chars: int  # TUSK_TOOL_RESULT_MAX_CHARS (TurnsConfig)

    mcp_config: OrUnset[Path] = env("TUSK_MCP_CONFIG", None)  # default: mcp.json beside the settings file
    mcp_timeout: float = env("TUSK_MCP_TIMEOUT", 60.0, gt=0, le=3600)
    mcp_tool_tokens: int = env("TUSK_MCP_TOOL_TOKENS", 4000, ge=0)
    mcp_restart_backoff: float = env("TUSK_MCP_RESTART_BACKOFF", 1.0, gt=0, le=60)

    def mcp_servers(self) -> list[ServerConfig]:
        """The MCP servers of mcp.json (TUSK_MCP_CONFIG, else beside the settings file read, else in the
        working directory); none if it is absent."""
        source = settings_file()
        path = self.mcp_config or (source.path.parent if source.found else Path.cwd()) / "mcp.json"
        return load_mcp(path, required=self.mcp_config is not None)

    def mcp_settings(self) -> McpSettings:
        return McpSettings(timeout=self.mcp_timeout, tool_tokens=self.mcp_tool_tokens,
                           backoff=self.mcp_restart_backoff, result_max_chars=self.tool_result_max_chars)


class WebConfig(BaseModel):
    """Reading pages and searching (bot/tools/web/)."""
    if TYPE_CHECKING:  # other concerns' settings, read here (Settings has them all)
        tool_result_max_chars: int  # TUSK_TOOL_RESULT_MAX_CHARS (TurnsConfig)

    web_fetch: bool = env("TUSK_WEB_FETCH", True)
    web_search: Literal["off", "searxng", "brave", "tavily", "keyless"] = env("TUSK_WEB_SEARCH", "off")
    searxng_url: str = env("TUSK_SEARXNG_URL", "")
    brave_api_key: OrUnset[SecretStr] = env("TUSK_BRAVE_API_KEY", None)
    brave_api_base: str = env("TUSK_BRAVE_API_BASE", "https://api.search.brave.com")
    tavily_api_key: OrUnset[SecretStr] = env("TUSK_TAVILY_API_KEY", None)
    tavily_api_base: str = env("TUSK_TAVILY_API_BASE", "https://api.tavily.com")
    web_allow_hosts: str = env("TUSK_WEB_ALLOW_HOSTS", "")  # host or host:port, reachable even inside
    web_chats: str = env("TUSK_WEB_CHATS", "*")  # chat patterns as in mcp.json
    web_groups: bool = env("TUSK_WEB_GROUPS", True)
    web_max_bytes: int = env("TUSK_WEB_MAX_BYTES", 5_000_000, ge=10_000, le=100_000_000)
    web_max_tokens: int = env("TUSK_WEB_MAX_TOKENS", 4000, ge=100, le=100_000)
    web_timeout: float = env("TUSK_WEB_TIMEOUT", 20.0, gt=0, le=300)
    web_host_interval: float = env("TUSK_WEB_HOST_INTERVAL", 1.0, ge=0, le=60)

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
                           timeout=self.web_timeout, host_interval=self.web_host_interval, user_agent=user_agent())


class SkillsConfig(BaseModel):
    """The owner's playbooks (bot/skills/): where they are found and which chats get them."""
    if TYPE_CHECKING:  # other concerns' settings, read here (Settings has them all)
        home: Path  # TUSK_HOME (Settings)
        tool_result_max_chars: int  # TUSK_TOOL_RESULT_MAX_CHARS (TurnsConfig)

    skills_dirs: str = env("TUSK_SKILLS_DIRS", "")  # more folders of skill folders
    skills_shared: bool = env("TUSK_SKILLS_SHARED", True)  # ~/.agents/skills too
    skills_max_tokens: int = env("TUSK_SKILLS_MAX_TOKENS", 1000, ge=100, le=100_000)
    skills_chats: str = env("TUSK_SKILLS_CHATS", "*")  # chat patterns, `skill=pattern` for one skill
    skills_groups: bool = env("TUSK_SKILLS_GROUPS", True)

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
