"""What every fake server shares: serving an aiohttp app on a free 127.0.0.1 port, and waiting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """Start `app` on a free loopback port; returns its runner (clean it up) and "http://127.0.0.1:PORT".
    Cleaning up waits a second for requests still being answered (a fake told to be slow), not aiohttp's 60."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, what: Callable[[], str] = lambda: "") -> Any:
    """Poll `predicate` until it is truthy (returning its value); TimeoutError naming `what()` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met in {timeout}s {what()}".rstrip())
        await asyncio.sleep(0.01)
    return result
