"""The web tools' settings slice and which chats get the tools (TUSK_WEB_CHATS, TUSK_WEB_GROUPS)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from bot.events import ChatKey
from bot.tools.mcp.config import CHAT_PATTERN
from bot.tools.web.guard import Allow

BACKENDS = ("off", "searxng", "brave", "tavily", "keyless")


def chat_patterns(text: str) -> tuple[str, ...]:
    """TUSK_WEB_CHATS: comma-separated `*`, `channel:*` or `channel:chat_id`."""
    patterns = tuple(p.strip() for p in text.split(",") if p.strip())
    for pattern in patterns:
        if not CHAT_PATTERN.fullmatch(pattern):
            raise ValueError(f"chat pattern {pattern!r} is not *, channel:* or channel:chat_id")
    return patterns


def user_agent() -> str:
    try:
        version = metadata.version("tuskbot")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        version = "0"
    return f"Tusk/{version} (+self-hosted chat bot)"


@dataclass(frozen=True, slots=True)
class WebSettings:
    fetch: bool = True
    search: str = "off"  # one of BACKENDS
    searxng_url: str = ""
    brave_api_key: str = ""
    tavily_api_key: str = ""
    brave_api_base: str = "https://api.search.brave.com"
    tavily_api_base: str = "https://api.tavily.com"
    allow: Allow = frozenset()
    chats: tuple[str, ...] = ("*",)  # patterns as MCP's: "*", "telegram:*", "telegram:123"
    groups: bool = True
    max_bytes: int = 5_000_000
    timeout: float = 20.0  # seconds for one fetch, redirects included
    max_redirects: int = 5
    max_tokens: int = 4000  # of page text the model is given
    max_chars: int = 16_000  # the framed page, at most (TUSK_TOOL_RESULT_MAX_CHARS: what a tool result may hold)
    host_interval: float = 1.0  # seconds between two requests to one host
    search_results: int = 5
    user_agent: str = ""

    @property
    def any(self) -> bool:
        return self.fetch or self.search != "off"

    def serves(self, key: ChatKey, is_group: bool) -> bool:
        """Whether this chat gets the web tools: one of `chats`, and not a group when groups are left out."""
        if is_group and not self.groups:
            return False
        for pattern in self.chats:
            channel, _, chat = pattern.partition(":")
            if pattern == "*" or (channel == key.channel and chat in ("*", key.chat_id)):
                return True
        return False
