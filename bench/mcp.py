"""MCP tools: what a call, a start and a server's schemas cost.

Real FastMCP servers (tests/fakes/fake_mcp.py) driven through Tusk's own path (McpHub ->
the turn's tool set -> framed result), no LLM:

- per call: `normal__add` through `ChatTools.run`, over stdio and over Streamable HTTP on
  loopback (median, p95), beside a built-in tool (`current_time`) through the same ToolBox;
- start-up: `McpHub.start()` with 1 and 5 stdio servers (processes spawned, initialized, tools listed);
- prompt tokens: what each server adds to a chat's fixed prompt (schemas + the system prompt's
  note), and what a chat without servers has (unchanged by MCP).

    python bench/mcp.py [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # this file would hide the `mcp` SDK
sys.path.insert(0, str(ROOT))

from bot.context import ContextBuilder  # noqa: E402
from bot.events import ChatKey, InboundMessage  # noqa: E402
from bot.llm import ToolCall  # noqa: E402
from bot.tools.box import BUILTIN_TOOLS, ToolBox, ToolContext  # noqa: E402
from bot.tools.mcp.config import McpSettings, parse  # noqa: E402
from bot.tools.mcp.hub import McpHub  # noqa: E402
from memory.paths import ChatFiles  # noqa: E402

FAKE = str(ROOT / "tests" / "fakes" / "fake_mcp.py")


def stdio(kind: str) -> dict:
    return {"command": sys.executable, "args": [FAKE, kind]}


def ms(samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=20)
    return f"median {statistics.median(samples) * 1000:.2f} ms, p95 {q[18] * 1000:.2f} ms"


async def per_call(servers: dict, tool: str, calls: int, home: Path) -> list[float]:
    hub = McpHub(parse(json.dumps({"mcpServers": servers})), McpSettings())
    await hub.start()
    try:
        msg = InboundMessage(ChatKey("telegram", "1"), "x", "7")
        tools = hub.for_chat(ToolBox(BUILTIN_TOOLS, extra=hub), msg)
        ctx = ToolContext(msg.key, ChatFiles.locate(home, "telegram", "1"))
        call = ToolCall("c", tool, json.dumps({"a": 2, "b": 3} if tool.endswith("add") else {}))
        samples = []
        for i in range(calls + 20):
            began = time.perf_counter()
            result = await tools.run(call, ctx)
            if i >= 20:  # warm-up left out
                samples.append(time.perf_counter() - began)
            assert result.error is None, result.for_model()
        return samples
    finally:
        await hub.stop()


async def start_up(n: int) -> float:
    hub = McpHub(parse(json.dumps({"mcpServers": {f"s{i}": stdio("normal") for i in range(n)}})), McpSettings())
    began = time.perf_counter()
    await hub.start()
    took = time.perf_counter() - began
    assert all(s.state == "ready" for s in hub.servers.values())
    await hub.stop()
    return took


async def prompt_tokens(home: Path) -> list[tuple[str, int, int]]:
    rows = []
    files = ChatFiles.locate(home, "telegram", "1")
    box = ToolBox(BUILTIN_TOOLS)
    plain = ContextBuilder(home, "Tusk", box.schemas).fixed_tokens(files)
    rows.append(("(no server)", 0, plain))
    for kind in ("normal", "hang", "changing"):
        hub = McpHub(parse(json.dumps({"mcpServers": {kind: stdio(kind)}})), McpSettings())
        await hub.start()
        hub.remember(ChatKey("telegram", "1"), False)
        with_server = ContextBuilder(home, "Tusk", box.schemas, chat_tools=hub).fixed_tokens(files)
        rows.append((kind, len(hub.catalogue), with_server - plain))
        await hub.stop()
    return rows


async def main(calls: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="tusk-bench-mcp-"))
    box = ToolBox(BUILTIN_TOOLS)
    ctx = ToolContext(ChatKey("telegram", "1"), ChatFiles.locate(home, "telegram", "1"))
    builtin = []
    for _ in range(calls):
        began = time.perf_counter()
        await box.run(ToolCall("c", "current_time", "{}"), ctx)
        builtin.append(time.perf_counter() - began)
    print(f"built-in tool call (current_time): {ms(builtin)}")
    print(f"MCP call over stdio:  {ms(await per_call({'normal': stdio('normal')}, 'normal__add', calls, home))}")
    server = subprocess.Popen([sys.executable, FAKE, "normal", "--http"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        port = server.stdout.readline().split()[1]
        url = f"http://127.0.0.1:{port}/mcp"
        print(f"MCP call over HTTP:   {ms(await per_call({'normal': {'url': url}}, 'normal__add', calls, home))}")
    finally:
        server.kill()
        server.wait()
    for n in (1, 5):
        print(f"start-up with {n} stdio server(s): {await start_up(n):.2f} s")
    for name, tools, tokens in await prompt_tokens(home):
        label = "fixed prompt of a chat without servers" if not tools else f"server {name} ({tools} tools) adds"
        print(f"{label}: {tokens} tokens")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    asyncio.run(main(parser.parse_args().calls))
