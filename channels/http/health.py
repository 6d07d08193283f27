"""GET /readyz: whether this process can do its work now, for a load balancer or an orchestrator (docs: Scaling
out). GET /healthz (channels/http/__init__.py) only says the process is alive; /readyz says whether to send it
work. Both are public: no token.

    readiness = Readiness()                                   # no check: always ready (the files store)
    readiness.require(db.ready, "the database does not answer")   # PostgreSQL: a check and its reason
    http.add_routes(readiness.routes())
    ...
    readiness.drain()                                         # SIGTERM: not ready from now on

    200 {"ready": true}
    503 {"ready": false, "reason": "the database does not answer"}

The reason is the fixed sentence given with the failing check, never an exception's text (which may name a
host, a user or a password). A check that raises, or takes longer than `timeout`, fails too (logged here).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

logger = logging.getLogger(__name__)

PATH = "/readyz"
TIMEOUT = 3.0  # seconds a check may take: a probe's own timeout is usually a few seconds
DRAINING = "shutting down: finishing the work under way"

Check = Callable[[], Awaitable[bool]]  # True: this part is ready


class Readiness:
    def __init__(self, timeout: float = TIMEOUT) -> None:
        self.timeout = timeout
        self._checks: list[tuple[Check, str]] = []
        self._draining = False

    def require(self, check: Check, reason: str) -> None:
        """Be ready only while `check()` is true; `reason` is what a 503 says when it is not."""
        self._checks.append((check, reason))

    def drain(self) -> None:
        """Not ready from now on (the process is stopping): a balancer sends it no more work."""
        self._draining = True

    async def problem(self) -> str | None:
        """None when ready, else the reason of the first check that fails."""
        if self._draining:
            return DRAINING
        for check, reason in self._checks:
            try:
                async with asyncio.timeout(self.timeout):
                    if await check():
                        continue
            except TimeoutError:
                logger.warning("readiness check %s took longer than %g s: not ready", _name(check), self.timeout)
            except Exception:  # a failing check means not ready, never a 500 to the balancer
                logger.exception("readiness check %s failed: not ready", _name(check))
            return reason
        return None

    def routes(self) -> list[web.RouteDef]:
        async def readyz(request: web.Request) -> web.Response:
            if (reason := await self.problem()) is None:
                return web.json_response({"ready": True})
            return web.json_response({"ready": False, "reason": reason}, status=503)

        return [web.get(PATH, readyz)]


def _name(check: Check) -> str:
    return getattr(check, "__qualname__", None) or repr(check)
