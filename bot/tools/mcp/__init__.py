"""Tools from MCP servers (Model Context Protocol), through the official `mcp` SDK.

    config.py   mcp.json -> ServerConfig (which servers, which chats, allow/deny, timeouts)
    server.py   McpServer: one server's connection (stdio or Streamable HTTP), restarts, calls
    results.py  a CallToolResult -> the framed text the model sees
    hub.py      McpHub: every server, each chat's tool set, the token cap, status for /status and the console
    doctor.py   `tusk doctor`'s check of each server
"""
