"""`tusk doctor`'s MCP check: start each server alone, list its tools, stop it.

A server that does not start is reported with its error and the last lines of its stderr
(env and header values masked); nothing else in the doctor's output depends on it.
"""

from __future__ import annotations

from bot.tools.mcp.config import McpSettings, ServerConfig, mask
from bot.tools.mcp.server import McpServer

MAX_LISTED = 12


async def probe(config: ServerConfig, settings: McpSettings) -> tuple[str, str, str]:
    """(verdict, detail, fix) for one server."""
    server = McpServer(config, settings.timeout, settings.backoff)
    server.start()
    try:
        ready = await server.wait_started(server.start_timeout)
        tools = [t.name for t in server.tools]
        error, stderr = server.last_error or "no answer", mask(server.stderr.text(), config.secrets())
    finally:
        await server.stop()
    where = config.describe()
    if not ready:
        detail = f"did not start ({where}): {error}"
        tail = stderr or server.last_stderr
        if tail:
            detail += "\n      stderr ends with:\n" + "\n".join(f"        {line}" for line in tail.splitlines())
        fix = ("run the command by hand to see why it fails" if config.command
               else "check the URL, the headers and that the server is up")
        return "fail", detail, fix
    offered = [t for t in tools if config.offers(t)]
    shown = ", ".join(offered[:MAX_LISTED]) + (f", ... ({len(offered) - MAX_LISTED} more)"
                                                if len(offered) > MAX_LISTED else "")
    hidden = f"; {len(tools) - len(offered)} hidden by allow/deny" if len(offered) < len(tools) else ""
    chats = ", ".join(config.chats) if config.chats is not None else "direct chats only"
    verdict = "ok" if offered else "warn"
    return verdict, f"{len(offered)} tool(s): {shown or '(none)'}{hidden}; chats: {chats}", \
        "" if offered else "the server offers no tools (check allow/deny in mcp.json)"
