"""`mcp.json`: which MCP servers Tusk starts, and which chats may use each.

The common shape, so a configuration written for another MCP client can be pasted as is:

    {"mcpServers": {
        "notes":  {"command": "uvx", "args": ["notes-mcp"], "env": {"NOTES_TOKEN": "..."}},
        "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ..."}}}}

Tusk's own keys, all optional, per server: `chats` (patterns of the chats that may use it:
`"*"`, `"telegram:*"`, `"telegram:123"`; default: direct chats only, never groups), `allow` /
`deny` (tool names), `timeout` (seconds per call), `cwd` (stdio), `disabled`. Parsed with
pydantic at the edge; the rest of Tusk sees frozen `ServerConfig`s.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bot.errors import ConfigError
from bot.events import ChatKey

SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
CHAT_PATTERN = re.compile(r"\*|[a-z][a-z0-9_]{0,31}:(\*|.+)")
MASK = "***"


@dataclass(frozen=True, slots=True)
class McpSettings:
    timeout: float = 60.0  # seconds per call (a server's own `timeout` wins)
    tool_tokens: int = 4000  # cap on a chat's MCP tool schemas per request
    backoff: float = 1.0  # first restart delay, doubling to 60 s
    result_max_chars: int = 16_000


class _ServerSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")  # other clients' keys (type, description, ...) are not ours

    command: str | None = Field(None, min_length=1)
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = Field(None, pattern=r"^https?://")
    headers: dict[str, str] = {}
    chats: list[str] | None = None
    allow: list[str] | None = None
    deny: list[str] = []
    timeout: float | None = Field(None, gt=0, le=3600)
    disabled: bool = False

    @model_validator(mode="after")
    def _one_transport(self) -> _ServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError('give either "command" (a program speaking MCP on stdio) or "url" (Streamable HTTP)')
        for pattern in self.chats or ():
            if not CHAT_PATTERN.fullmatch(pattern):
                raise ValueError(f'chat pattern {pattern!r} is not "*", "channel:*" or "channel:chat_id"')
        return self


class _McpFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mcpServers: dict[str, _ServerSpec] = {}  # noqa: N815 - the key every MCP client uses


@dataclass(frozen=True, slots=True)
class ServerConfig:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    chats: tuple[str, ...] | None = None  # None: direct chats only
    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()
    timeout: float | None = None

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    def offers(self, tool: str) -> bool:
        """Whether the operator lets the model see this tool of the server (allow, then deny)."""
        return (self.allow is None or tool in self.allow) and tool not in self.deny

    def serves(self, key: ChatKey, is_group: bool) -> bool:
        """Whether this chat may use the server: its `chats` patterns, else direct chats only."""
        if self.chats is None:
            return not is_group
        for pattern in self.chats:
            channel, _, chat = pattern.partition(":")
            if pattern == "*" or (channel == key.channel and chat in ("*", key.chat_id)):
                return True
        return False

    def secrets(self) -> list[str]:
        """The env and header values: masked wherever they could be shown."""
        return [v for _, v in (*self.env, *self.headers) if v]

    def describe(self) -> str:
        """One line for doctor, /status and the console, secrets masked."""
        if self.command:
            where = " ".join([self.command, *self.args])
            env = f" env {', '.join(f'{k}={MASK}' for k, _ in self.env)}" if self.env else ""
            return mask(f"stdio: {where}{env}", self.secrets())
        headers = f" headers {', '.join(f'{k}: {MASK}' for k, _ in self.headers)}" if self.headers else ""
        return mask(f"http: {self.url}{headers}", self.secrets())

    def public(self) -> dict[str, Any]:
        """The server as the console shows it: everything but the env and header values."""
        return {"name": self.name, "transport": self.transport, "target": self.describe(),
                "chats": list(self.chats) if self.chats is not None else ["(direct chats)"],
                "allow": sorted(self.allow) if self.allow is not None else None, "deny": sorted(self.deny)}


def mask(text: str, secrets: list[str]) -> str:
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, MASK)
    return text


def _config(name: str, spec: _ServerSpec) -> ServerConfig:
    return ServerConfig(name=name, command=spec.command, args=tuple(spec.args), env=tuple(spec.env.items()),
                        cwd=spec.cwd, url=spec.url, headers=tuple(spec.headers.items()),
                        chats=tuple(spec.chats) if spec.chats is not None else None,
                        allow=frozenset(spec.allow) if spec.allow is not None else None,
                        deny=frozenset(spec.deny), timeout=spec.timeout)


def parse(text: str, source: str = "mcp.json") -> list[ServerConfig]:
    """The enabled servers of an mcp.json text; a ConfigError names the file, the server and the fix."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{source} is not valid JSON ({exc}): fix it or point TUSK_MCP_CONFIG elsewhere") from exc
    try:
        parsed = _McpFile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_input=False))
        raise ConfigError(f"{source} is invalid: {problems}") from None  # the values may be secrets: not chained
    servers = []
    for name, spec in parsed.mcpServers.items():
        if not SERVER_NAME.fullmatch(name):
            raise ConfigError(f"{source}: MCP server name {name!r} must be 1-32 letters, digits, '-' or '_' "
                              "(it prefixes the tool names the model sees): rename it")
        if not spec.disabled:
            servers.append(_config(name, spec))
    return servers


def load(path: Path, required: bool = False) -> list[ServerConfig]:
    """The servers in `path`; none if it does not exist (unless TUSK_MCP_CONFIG named it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise ConfigError(f"TUSK_MCP_CONFIG={path} does not exist: create it or unset TUSK_MCP_CONFIG") from None
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read MCP config {path}: {exc}") from exc
    return parse(text, str(path))
