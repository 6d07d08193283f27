"""Work that must not hold up the event loop nor the exit: a daemon thread whose result is a future.

    future = in_thread(load, "name")      # starts now
    value = await asyncio.wrap_future(future)

asyncio's own `to_thread` uses the loop's executor, whose threads `asyncio.run` waits for at exit:
a `tusk chat` left at once would sit until a seconds-long import finished.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

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
