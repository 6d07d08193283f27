"""Where discord.py connects: DISCORD_API_BASE and DISCORD_GATEWAY_URL (REST proxies such as nirn-proxy, and
the tests), and why a gateway connection failed, with the fix where there is one (the Message Content intent,
sharding)."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from urllib.parse import urlsplit

import yarl

with warnings.catch_warnings():  # discord.py imports audioop (deprecated since 3.11) for voice, which Tusk never uses
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord

from bot.errors import ConfigError, DeliveryError
from channels.discord_bot import refusals


SHARDING = {  # gateway close codes about shards, with the fix
    4010: "Discord refused the shard (gateway close 4010, invalid shard): TUSK_DISCORD_SHARDS must name shard ids "
          "below its total, such as 0-3/8",
    4011: "Discord requires this bot to be sharded (gateway close 4011, sharding required: one connection holds at "
          "most 2,500 servers): set TUSK_DISCORD_SHARDS, e.g. 0-1/2 on one process (docs: Scaling out)",
}


def api_root(api_base: str) -> str:
    """The REST root discord.py should prefix paths with: a bare host gets `/api/v10`, a path is kept."""
    base = api_base.rstrip("/")
    return base if urlsplit(base).path else f"{base}/api/v{discord.http.INTERNAL_API_VERSION}"


def aim(api_base: str | None, gateway_url: str | None) -> Callable[[], None]:
    """Point discord.py's REST and gateway at other hosts; returns the undo.

    discord.py reads both from class attributes: `http.Route.BASE` (what its own
    `_set_api_version` sets; read each time a request is built) and
    `gateway.DiscordWebSocket.DEFAULT_GATEWAY` (read at each fresh connect). Setting the
    attributes, rather than installing subclasses, also reaches the webhook adapter that
    carries interaction replies: it imported `Route` itself. The cost: it is per process,
    which is fine as Tusk runs one Discord bot per process.
    """
    route, socket = discord.http.Route, discord.gateway.DiscordWebSocket
    before = route.BASE, socket.DEFAULT_GATEWAY
    if api_base:
        route.BASE = api_root(api_base)
    if gateway_url:
        socket.DEFAULT_GATEWAY = yarl.URL(gateway_url)

    def undo() -> None:
        route.BASE, socket.DEFAULT_GATEWAY = before

    return undo


def connect_error(connection: asyncio.Task[None]) -> Exception:
    """Why the gateway connection failed or never became ready, with the fix where there is one."""
    exc = connection.exception() if connection.done() and not connection.cancelled() else None
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return ConfigError(f"Discord refused the Message Content intent (gateway close 4014): switch on "
                           f"{refusals.PORTAL}, then restart Tusk")
    if isinstance(exc, discord.ConnectionClosed) and exc.code in SHARDING:
        return ConfigError(SHARDING[exc.code])
    where = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    return DeliveryError(f"could not connect to the Discord gateway at {where}: {exc or 'timed out'}")
