"""One MCP server: its connection, kept alive by a supervisor task, and calls to its tools.

    start()  -> supervisor: connect (stdio subprocess or Streamable HTTP), initialize, list tools
                -> serve: refresh the tool list on notifications/tools/list_changed
                -> the connection ends (the process exits, malformed JSON-RPC, HTTP failure)
                -> wait (backoff doubling from `backoff` to 60 s) -> connect again
    call()   -> one tools/call with a deadline; any failure is a `McpToolError` for that call only

Everything the server sends passes a pump between the SDK's transport and its session: a
line that is not JSON-RPC ends the connection at once (the calls waiting on it fail with that
reason, and the server is restarted) instead of leaving them to wait for their deadline. A
stdio server's stderr goes to a pipe whose last lines are kept (`stderr_tail`) for the log and
`tusk doctor`, however much it writes.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError
from pydantic import ValidationError

from bot.errors import McpToolError
from bot.tools.mcp.config import ServerConfig, mask

logger = logging.getLogger(__name__)

MAX_BACKOFF = 60.0
START_TIMEOUT = 30.0  # seconds a server may take to start and list its tools, at least
STABLE_AFTER = 60.0  # seconds up after which the next failure starts the backoff afresh
TAIL_LINES = 20
TAIL_LINE_CHARS = 500
MAX_PAGES = 20  # tools/list pages read at most (a server that paginates forever is cut off)


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as the server lists it (its own name, not yet namespaced)."""

    name: str
    description: str
    input_schema: dict[str, Any]


class StderrTail(asyncio.Protocol):
    """The last lines a server wrote to stderr; memory stays bounded whatever it writes."""

    def __init__(self) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._partial = ""
        self.bytes = 0

    def data_received(self, data: bytes) -> None:
        self.bytes += len(data)
        parts = (self._partial + data.decode("utf-8", "replace")).split("\n")
        self._partial = parts.pop()[-TAIL_LINE_CHARS:]
        self.lines.extend(line[:TAIL_LINE_CHARS] for line in parts[-TAIL_LINES:] if line.strip())

    def text(self) -> str:
        return "\n".join([*self.lines, *([self._partial] if self._partial.strip() else [])][-TAIL_LINES:])


class McpServer:
    def __init__(self, config: ServerConfig, timeout: float, backoff: float = 1.0,
                 on_change: Callable[[], None] = lambda: None) -> None:
        self.config = config
        self.timeout = config.timeout or timeout
        self.start_timeout = max(self.timeout, START_TIMEOUT)
        self.backoff = backoff
        self.on_change = on_change  # called whenever the tool list changes (connect, refresh, loss)
        self.tools: tuple[RemoteTool, ...] = ()
        self.state = "stopped"  # starting | ready | down | stopped
        self.last_error = ""
        self.last_stderr = ""  # the stderr tail of the last connection that failed (secrets masked)
        self.restarts = 0
        self.stderr = StderrTail()
        self._session: ClientSession | None = None
        self._broken = ""  # why the current connection ended, for the calls it cut short
        self._lost = asyncio.Event()  # set when the current connection ends
        self._signal = asyncio.Event()
        self._refresh = False
        self._stopping = False
        self._attempted = asyncio.Event()  # the first connection attempt has finished, either way
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def start(self) -> None:
        if self._task is None:
            self.state = "starting"
            self._task = asyncio.create_task(self._supervise(), name=f"mcp {self.name}")

    async def wait_started(self, timeout: float) -> bool:
        """Wait for the first connection attempt; True if the server is ready."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._attempted.wait(), timeout)
        return self.state == "ready"

    async def stop(self) -> None:
        self._stopping = True
        self._signal.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 5)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            self._task = None
        self.state = "stopped"

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """One tools/call within the timeout; a failure of any kind raises McpToolError. The call also
        ends as soon as its connection does (the process died, a malformed line), not at its deadline."""
        session, lost = self._session, self._lost
        if session is None:
            why = f": {self.last_error}" if self.last_error else ""
            raise McpToolError(f"MCP server {self.name!r} is not running{why}; Tusk keeps restarting it")
        call = asyncio.ensure_future(session.call_tool(tool, arguments))
        watch = asyncio.ensure_future(lost.wait())
        try:
            await asyncio.wait({call, watch}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (call, watch):
                task.cancel()
            await asyncio.gather(call, watch, return_exceptions=True)
        if not call.cancelled():
            return self._outcome(call)
        if watch.done() and not watch.cancelled():
            raise McpToolError(f"MCP server {self.name!r} {self._broken or 'closed the connection'} during the call; "
                               "Tusk is restarting it")
        logger.warning("MCP server %s: %s did not answer within %g s", self.name, tool, self.timeout)
        raise McpToolError(f"MCP server {self.name!r} did not answer {tool} within {self.timeout:g} s")

    def _outcome(self, call: asyncio.Future[types.CallToolResult]) -> types.CallToolResult:
        try:
            return call.result()
        except McpError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                raise McpToolError(f"MCP server {self.name!r} {self._broken or 'closed the connection'} "
                                   "during the call; Tusk is restarting it") from None
            raise McpToolError(f"MCP server {self.name!r} refused the call: {exc.error.message}") from None
        except ValidationError as exc:
            raise McpToolError(f"MCP server {self.name!r} sent a result that is not valid MCP "
                               f"({exc.error_count()} problem(s))") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, httpx.HTTPError, OSError) as exc:
            reason = self._broken or f"connection failed ({type(exc).__name__})"
            raise McpToolError(f"MCP server {self.name!r} {reason} during the call") from None

    async def _supervise(self) -> None:
        delay = self.backoff
        while not self._stopping:
            began = time.monotonic()
            try:
                await self._connect_and_serve()
            except Exception as exc:  # supervisor boundary: log, wait, connect again
                self.last_error = self._describe(exc)
                self.last_stderr = tail = mask(self.stderr.text(), self.config.secrets())
                if not self._stopping:
                    logger.warning("MCP server %s is down: %s%s", self.name, self.last_error,
                                   f"\nits stderr ends with:\n{tail}" if tail else "")
            finally:
                self._session = None
                self.tools = ()
                self.state = "down"
                self._attempted.set()
                self.on_change()
            if self._stopping:
                break
            if time.monotonic() - began > STABLE_AFTER:
                delay = self.backoff
            self._signal.clear()
            with contextlib.suppress(TimeoutError):  # stop() cuts the wait short
                await asyncio.wait_for(self._signal.wait(), delay)
            delay = min(delay * 2, MAX_BACKOFF)
            self.restarts += 1

    def _describe(self, exc: BaseException) -> str:
        if self._broken:
            return self._broken
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return mask(f"{type(exc).__name__}: {exc}"[:300], self.config.secrets())

    async def _connect_and_serve(self) -> None:
        self._broken = ""
        self._lost = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            source = await self._open_transport(stack)
            stack.push_async_callback(source.aclose)  # the HTTP transport leaves its receiving end to us
            writer_end, reader_end = anyio.create_memory_object_stream[Any](0)
            stack.push_async_callback(reader_end.aclose)
            stack.push_async_callback(writer_end.aclose)  # if the pump never got to run
            group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(group.cancel_scope.cancel)
            group.start_soon(self._pump, source, writer_end)
            session = await stack.enter_async_context(ClientSession(reader_end, self._write,
                                                                  message_handler=self._on_message))
            async with asyncio.timeout(self.start_timeout):
                await session.initialize()
                await self._list_tools(session)
            self._session, self.state, self.last_error = session, "ready", ""
            logger.info("MCP server %s ready: %d tool(s)", self.name, len(self.tools))
            self._attempted.set()
            self.on_change()
            await self._serve(session)

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> Any:
        c = self.config
        if c.command:
            read_fd, write_fd = os.pipe()
            errlog = os.fdopen(write_fd, "w")
            stack.callback(errlog.close)
            self.stderr = StderrTail()
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: self.stderr,
                                                                              os.fdopen(read_fd, "rb", 0))
            stack.callback(transport.close)
            params = StdioServerParameters(command=c.command, args=list(c.args), env=dict(c.env) or None, cwd=c.cwd)
            source, self._write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            return source
        assert c.url is not None
        client = await stack.enter_async_context(create_mcp_http_client(
            headers=dict(c.headers), timeout=httpx.Timeout(30, read=max(self.timeout, 300))))
        source, self._write, _ = await stack.enter_async_context(streamable_http_client(c.url, http_client=client))
        return source

    async def _pump(self, source: Any, sink: Any) -> None:
        """Pass the server's messages to the session; anything unreadable ends the connection."""
        async with sink:
            try:
                async for item in source:
                    if isinstance(item, Exception):
                        kind = "sent malformed JSON-RPC" if isinstance(item, ValueError) else "failed"
                        self._broken = f"{kind} ({type(item).__name__})"
                        break
                    await sink.send(item)
                else:
                    self._broken = "closed the connection (the process exited?)" if self.config.command \
                        else "closed the connection"
            except (anyio.ClosedResourceError, anyio.EndOfStream):
                self._broken = self._broken or "closed the connection"
        self._lost.set()
        self._signal.set()

    async def _on_message(self, message: Any) -> None:
        if (isinstance(message, types.ServerNotification)
                and isinstance(message.root, types.ToolListChangedNotification)):
            self._refresh = True
            self._signal.set()

    async def _serve(self, session: ClientSession) -> None:
        while True:
            await self._signal.wait()
            self._signal.clear()
            if self._stopping:
                return
            if self._broken:
                raise ConnectionError(self._broken)
            if self._refresh:
                self._refresh = False
                async with asyncio.timeout(self.timeout):
                    await self._list_tools(session)
                logger.info("MCP server %s changed its tools: now %d", self.name, len(self.tools))
                self.on_change()

    async def _list_tools(self, session: ClientSession) -> None:
        tools: list[RemoteTool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools += [RemoteTool(t.name, t.description or "", dict(t.inputSchema or {"type": "object"}))
                      for t in page.tools]
            if not (cursor := page.nextCursor):
                break
        self.tools = tuple(tools)
