"""Work beside the work: a daemon thread whose result is a future, and tasks held until they end.

    future = in_thread(load, "name")      # starts now
    value = await asyncio.wrap_future(future)

    side = Spawned()                      # typing indicators, notices, file downloads ...
    side.start(coro, "name")              # held (asyncio keeps only a weak reference) until it ends
    await side.cancel(grace=5)            # at shutdown: the rest may finish for `grace` s, then cancelled

asyncio's own `to_thread` uses the loop's executor, whose threads `asyncio.run` waits for at exit:
a `tusk chat` left at once would sit until a seconds-long import finished.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def in_thread(work: Callable[[], T], name: str) -> concurrent.futures.Future[T]:
    """`work()` in a new daemon thread; the future holds its result or its exception."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # thread boundary: whoever awaits the future gets it
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


class Spawned:
    """Tasks started beside the work, each held until it ends; all ended together at shutdown."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Future[Any]] = set()

    def __bool__(self) -> bool:
        return bool(self.tasks)

    def start(self, work: Awaitable[Any], name: str) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(work)
        if isinstance(task, asyncio.Task):
            task.set_name(name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def wait(self, timeout: float | None = None) -> None:
        """Until every task started so far has ended, at most `timeout` seconds."""
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=timeout)

    async def cancel(self, grace: float = 0.0) -> None:
        """Let the tasks finish for `grace` seconds, then cancel the rest and wait for them."""
        if grace and self.tasks:
            await self.wait(grace)
        pending = set(self.tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
