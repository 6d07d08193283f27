"""Replies before housekeeping, on a model server that answers one request at a time.

llama.cpp's server, Ollama and LM Studio serve one request at a time unless told otherwise: a consolidation
round, an import round or a background task's step in flight holds the server, and a person's reply queues
behind it. `Slots` puts the person first when the server has one slot:

    a person's request           counted while it waits and runs (`people`); on arrival every housekeeping
                                 request in flight is cut off: its task cancelled, its connection closed (which
                                 stops a llama.cpp generation), and waited for, before the person's goes out
    a housekeeping request       (made inside `housekeeping()`): not started while a person's request or turn is
                                 under way, and cut off as above: both raise `Preempted` to its caller, which
                                 waits for `quiet()` and sends the same request again (a consolidation round
                                 writes nothing before its answer, so nothing is lost or done twice:
                                 memory/consolidate.py `Deferred`; a background task's step: `retrying`).
                                 It is streamed (someone quiet watches), since llama-cpp-python's server stops
                                 a generation on a closed connection only while streaming; a stream the server
                                 itself ends early (it does so when another client's request waits) is
                                 `Preempted` too, not asked again whole (bot/llm/client.py)

`Turns` counts the chat turns under way (the agent enters `running()` for each): made first and given to both
the agent and `Slots`, so housekeeping waits for turns without either holding the other.

How many slots: TUSK_MODEL_SLOTS, else what the server says (llama.cpp's /props `total_slots`, asked at
the warm-up: bot/llm/warmup.py), else unknown. With several slots, or unknown (a cloud API), nothing of this
applies: requests go as they come.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
MAX_TRIES = 20  # times a background task's step is held back or cut off before it is sent as a turn's would be

_HOUSEKEEPING: contextvars.ContextVar[bool] = contextvars.ContextVar("tusk_housekeeping", default=False)


@contextlib.contextmanager
def housekeeping() -> Iterator[None]:
    """The requests made inside (this task and the tasks it starts) are housekeeping: they yield to people."""
    token = _HOUSEKEEPING.set(True)
    try:
        yield
    finally:
        _HOUSEKEEPING.reset(token)


def is_housekeeping() -> bool:
    return _HOUSEKEEPING.get()


class Preempted(Exception):
    """A housekeeping request was not started, or was cut off, so that a person's reply could go first.
    Nothing of it was used: send it again once `Slots.quiet()` returns."""


class QuietWatcher:
    """Watches a housekeeping stream and shows nothing (bot/llm/streams.py's Watcher)."""

    shown = False

    def begin(self) -> None:
        pass

    def feed(self, raw: str) -> None:
        pass


class Turns:
    """The chat turns under way now, in any chat: counted by the agent (`running()`), waited for by
    housekeeping (`until_idle()`: replies go first). Made before both, so neither needs the other."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def busy(self) -> bool:
        """Whether a turn is under way now, in any chat."""
        return self._count > 0

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Counts one turn while inside."""
        self._count += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._count -= 1
            if not self._count:
                self._idle.set()

    async def until_idle(self) -> None:
        """Return once no turn is under way."""
        while self._count:
            await self._idle.wait()


class Slots:
    def __init__(self, count: int | None = None, turns: Turns | None = None) -> None:
        """`count`: requests the server answers at once (None: unknown, nothing is held back; the warm-up may
        learn it); `turns`: the chat turns under way, before which housekeeping does not start."""
        self.count = count
        self.people = 0  # a person's requests waiting or under way
        self.cuts = 0  # housekeeping requests cut off since start
        self.turns = turns
        self._chores: set[asyncio.Task[Any]] = set()
        self._cut: set[asyncio.Task[Any]] = set()
        self._nobody: asyncio.Event | None = None

    @property
    def one(self) -> bool:
        return self.count == 1

    def _people_gone(self) -> asyncio.Event:
        if self._nobody is None:
            self._nobody = asyncio.Event()
            self._nobody.set()
        return self._nobody

    async def quiet(self) -> None:
        """Return once no person's request nor turn is under way."""
        while True:
            if self.turns is not None:
                await self.turns.until_idle()
            if not self.people:
                return
            await self._people_gone().wait()

    async def run(self, call: Callable[[], Awaitable[T]]) -> T:
        """`call()` (one LLM request, retries included), in its place in the queue."""
        if not self.one:
            return await call()
        if is_housekeeping():
            return await self._chore(call)
        self.people += 1
        self._people_gone().clear()
        try:
            await self._cut_chores()
            return await call()
        finally:
            self.people -= 1
            if not self.people:
                self._people_gone().set()

    async def _cut_chores(self) -> None:
        running = [t for t in self._chores if not t.done()]
        for task in running:
            self._cut.add(task)
            task.cancel()
        if running:
            self.cuts += len(running)
            logger.info("cut off %d housekeeping request(s): a reply goes first", len(running))
            await asyncio.wait(running)  # their connections closed before the person's request goes out

    async def _chore(self, call: Callable[[], Awaitable[T]]) -> T:
        if self.people or (self.turns is not None and self.turns.busy()):
            raise Preempted("a person's turn is under way")
        task = asyncio.ensure_future(call())
        self._chores.add(task)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task in self._cut and not _cancelling():
                raise Preempted("cut off: a person's reply went first") from None
            task.cancel()  # this caller was cancelled (a shutdown): the request goes with it
            raise
        finally:
            self._chores.discard(task)
            self._cut.discard(task)

    def retrying(self, complete: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        """`complete` as housekeeping that, when held back or cut off, waits for `quiet()` and asks again (a
        background task's step: it holds no lock a turn could wait for)."""
        async def chore(*args: Any, **kwargs: Any) -> T:
            with housekeeping():
                for _ in range(MAX_TRIES):
                    try:
                        return await complete(*args, **kwargs)
                    except Preempted:
                        await self.quiet()
            return await complete(*args, **kwargs)  # held back too often: asked as a turn would be
        return chore


def _cancelling() -> bool:
    """Whether the current task itself is being cancelled (not just what it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
