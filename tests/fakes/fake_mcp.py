"""Real MCP servers (the SDK's FastMCP) for tests and benchmarks, over stdio or Streamable HTTP.

    python tests/fakes/fake_mcp.py KIND            stdio (what Tusk starts from mcp.json)
    python tests/fakes/fake_mcp.py KIND --http     HTTP on 127.0.0.1, a free port; prints "PORT <n>" on stdout

KIND is one of:
    normal     add(a, b), echo(text, times), lookup(key) (structured), fail(reason) (isError),
               picture() (an image), flood(n) (n characters out, n bytes of stderr), env(name)
    crashy     pid(), crash() (writes to stderr, then the process dies mid-call)
    hang       ping(), hang() (never answers)
    changing   grow(name) (adds a tool called `name` and sends tools/list_changed)
    malformed  ok(), garble() (writes a line that is not JSON-RPC on stdout; stdio only)
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import sys
from typing import Annotated

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.utilities.types import Image
from pydantic import Field

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def normal(mcp: FastMCP) -> None:
    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool()
    def echo(text: str, times: Annotated[int, Field(ge=1, le=10)] = 1) -> str:
        """Repeat a text."""
        return " ".join([text] * times)

    @mcp.tool()
    def lookup(key: str) -> dict[str, str | int]:
        """Look a key up in a small table."""
        return {"key": key, "length": len(key)}

    @mcp.tool()
    def fail(reason: str) -> str:
        """Always fails, with the given reason."""
        raise ValueError(reason)

    @mcp.tool()
    def picture() -> Image:
        """A one-pixel picture."""
        return Image(data=PNG, format="png")

    @mcp.tool()
    def flood(n: int) -> str:
        """Return n characters and write n bytes to stderr."""
        sys.stderr.write("e" * n + "\nlast stderr line\n")
        sys.stderr.flush()
        return "x" * n

    @mcp.tool()
    def env(name: str) -> str:
        """The value of an environment variable of this server, or (unset)."""
        return os.environ.get(name, "(unset)")


def crashy(mcp: FastMCP) -> None:
    @mcp.tool()
    def pid() -> int:
        """This server's process id."""
        return os.getpid()

    @mcp.tool()
    def crash() -> str:
        """Dies in the middle of the call."""
        sys.stderr.write("fatal: the fake server crashes on purpose\n")
        sys.stderr.flush()
        os._exit(3)


def hang(mcp: FastMCP) -> None:
    @mcp.tool()
    def ping() -> str:
        """Answers pong."""
        return "pong"

    @mcp.tool()
    async def hang() -> str:
        """Never answers."""
        await asyncio.sleep(3600)
        return "late"


def changing(mcp: FastMCP) -> None:
    @mcp.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool with this name, and tell the client the tool list changed."""
        def added() -> str:
            return f"I am {name}"

        mcp.add_tool(added, name=name, description=f"A tool added at run time ({name}).")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"


def malformed(mcp: FastMCP) -> None:
    @mcp.tool()
    def ok() -> str:
        """Answers ok."""
        return "ok"

    @mcp.tool()
    async def garble() -> str:
        """Writes a line that is not JSON-RPC to stdout, then answers."""
        os.write(1, b"this is not json-rpc {{{\n")
        await asyncio.sleep(0.2)
        return "garbled"


KINDS = {"normal": normal, "crashy": crashy, "hang": hang, "changing": changing, "malformed": malformed}


def main() -> None:
    kind = sys.argv[1]
    mcp = FastMCP(f"fake-{kind}", log_level="WARNING")
    KINDS[kind](mcp)
    if "--http" not in sys.argv:
        mcp.run("stdio")
        return
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog from now on, not refused while uvicorn starts
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(mcp.streamable_http_app(), log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
