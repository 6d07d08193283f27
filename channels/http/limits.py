"""Bounds on the HTTP server's connections, so a flood of slow or idle ones cannot take Tusk down.

    limit = ConnectionLimit(256)              # its middleware marks connections serving a request
    app = web.Application(middlewares=[limit.track, ...])
    runner = web.AppRunner(app, keepalive_timeout=15)   # idle keep-alive and header-read time
    await runner.setup()
    server = await loop.create_server(limit.factory(runner.server), host, port)

aiohttp's keep-alive timer starts when a connection opens and closes it if no complete
request head has arrived by then, so `keepalive_timeout` bounds both the time to send the
headers (slow-loris) and the idle time between requests. At most `limit` connections stay
open: a new one closes the oldest idle one (one not serving a request), or is closed at
once if every open connection is busy. The limit never exceeds a quarter of the process's
file limit (RLIMIT_NOFILE), so the files, journals and platform sockets always have room.

A request body is read whole within the idle timeout and at most 1 MiB (channels/http/), except a
file upload (multipart), which streams to disk within `upload_deadline`.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Callable

from aiohttp import web

logger = logging.getLogger(__name__)


MIN_UPLOAD_RATE = 64 * 1024  # bytes a second a file upload must at least keep up (channels/http/files.py)


def upload_deadline(max_bytes: int, idle_timeout: float) -> float:
    """Seconds a multipart upload of up to `max_bytes` may take: the idle timeout, plus the time the body
    needs at `MIN_UPLOAD_RATE` (20 MB: about five minutes), so a sender a byte a minute is cut off."""
    return idle_timeout + max_bytes / MIN_UPLOAD_RATE


def fd_share(wanted: int) -> int:
    """`wanted`, lowered to a quarter of the soft file limit (at least 8)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return wanted if soft == resource.RLIM_INFINITY else max(8, min(wanted, soft // 4))


class _Refused(asyncio.Protocol):
    """A connection over the limit while every open one is busy: closed as soon as it is accepted."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.Transport):  # a TCP server's: dropped without a goodbye
            transport.abort()
        else:
            transport.close()


class ConnectionLimit:
    def __init__(self, wanted: int) -> None:
        self.limit = fd_share(wanted)
        self._busy: set[object] = set()  # RequestHandlers serving a request now
        self.evicted = 0
        self.refused = 0

    @web.middleware
    async def track(self, request: web.Request, handler) -> web.StreamResponse:
        protocol = request.protocol
        self._busy.add(protocol)
        try:
            return await handler(request)
        finally:
            self._busy.discard(protocol)

    def factory(self, server: web.Server) -> Callable[[], asyncio.BaseProtocol]:
        """The protocol factory for `loop.create_server`: aiohttp's, behind the limit."""
        def make() -> asyncio.BaseProtocol:
            live = [c for c in server.connections if c.transport is not None and not c.transport.is_closing()]
            if len(live) >= self.limit:
                idle = next((c for c in live if c not in self._busy), None)  # oldest first
                if idle is None:
                    self._count("refused")
                    return _Refused()
                idle.force_close()
                self._count("evicted")
            return server()
        return make

    def _count(self, what: str) -> None:
        setattr(self, what, getattr(self, what) + 1)
        if (self.evicted + self.refused) % 1000 == 1:  # a flood: say so, but not once per connection
            logger.warning("HTTP: %d connections open (the limit): %d idle ones closed, %d new ones refused so far",
                           self.limit, self.evicted, self.refused)
