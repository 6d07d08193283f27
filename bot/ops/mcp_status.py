"""The web console's view of the MCP servers (mounted by bot/app.py beside the console's routes).

    GET /api/mcp    every server: transport and target (env and header values masked), which
                    chats may use it, allow/deny, state, its tools, restarts, last error
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from bot.tools.mcp.hub import McpHub


def mcp_routes(hub: McpHub | None) -> list[web.RouteDef]:
    async def servers(request: web.Request) -> web.Response:
        return web.json_response({"servers": hub.public() if hub is not None else []})

    return [web.get("/api/mcp", servers)]
