"""The message bus: per-chat order, cross-chat concurrency, replies routed to their channel.

Each chat with pending messages has one queue and one worker task. The worker takes the
chat's messages in arrival order, one turn at a time, and ends (removing the queue) the
moment the queue is empty, so an idle chat costs nothing. Different chats have different
workers, so a slow LLM call in one chat never delays another. Messages that must survive a
crash (`durable`) are kept in a journal (bot/inbox.py) from publish until their turn ends.
A message `at_once` answers (/stop: bot/stop.py) is answered as it arrives, before the chat's
queue: it must not wait behind the turn it is about.
"""

from __future__ import annotations

import asyncio
import time
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from bot.errors import BusClosed, DeliveryError
from bot.events import ChatKey, InboundMessage, OutboundMessage, TurnResult
from bot.stream import Draft, Drafts
from bot.threads import Spawned
from store.errors import RETRIED, StaleWrite, StorageUnavailable

if TYPE_CHECKING:
    from bot.speech.replies import VoiceOutlet

logger = logging.getLogger(__name__)

Handler = Callable[[InboundMessage], Awaitable[TurnResult | None]]  # a turn, and how it ended
Job = Callable[[], Awaitable[Any]]  # work that must take its place in a chat's order (the console's Forget)
# several processes: a message queued in the database (bot/cluster/dispatch.py); None: run here (not started)
Remote = Callable[[InboundMessage], "asyncio.Future[TurnResult | None] | None"]
AtOnce = Callable[[InboundMessage], str | None]  # the answer to a message that takes no turn (/stop), else None


class Outlet(Protocol):
    """What the bus needs of a channel to deliver replies: its `name`, `send`, and the abilities a channel
    may have, each None where it has not: `draft`, the reply shown while it is written (bot/stream.py), and
    `voice`, replies as the platform's voice messages (bot/speech/replies.py)."""

    name: str

    @property
    def voice(self) -> VoiceOutlet | None:  # read-only: a platform's is itself, a local channel's None
        ...

    @property
    def draft(self) -> Drafts | None:  # read-only: a platform's is its `draft` method, a local channel's None
        ...

    async def send(self, msg: OutboundMessage) -> None:
        """Deliver a reply (split, formatted, rate-limited as the platform needs)."""


class Journal(Protocol):
    """Where messages that must survive a crash are kept until their turn ends (bot/inbox.py)."""

    def record(self, msg: InboundMessage) -> None: ...

    def done(self, msg: InboundMessage) -> None: ...


class MessageBus:
    def __init__(self, handler: Handler, journal: Journal | None = None,
                 durable: Callable[[InboundMessage], bool] = lambda msg: False, at_once: AtOnce | None = None,
                 remote: Remote | None = None) -> None:
        """`remote`: several processes (bot/cluster/): where published messages go instead of this process's
        queues (stored and queued in the database); the worker hands each turn back with `run_here`."""
        self._handler = handler
        self._remote = remote
        self._at_once = at_once
        self._answering = Spawned()  # at-once answers being sent
        self._journal = journal
        self._durable = durable
        self._outlets: dict[str, Outlet] = {}
        self._queues: dict[ChatKey, deque[tuple[InboundMessage | Job, asyncio.Future[Any], bool]]] = {}  # bool: retried
        self._workers: dict[ChatKey, asyncio.Task[None]] = {}
        self._accepting = True

    def register(self, outlet: Outlet) -> None:
        self._outlets[outlet.name] = outlet

    @property
    def channels(self) -> frozenset[str]:
        """The channels replies can be delivered to (those registered)."""
        return frozenset(self._outlets)

    @property
    def active_chats(self) -> int:
        """Chats with a queued or running turn (idle chats hold no state here)."""
        return len(self._workers)

    def backlog(self) -> dict[str, tuple[int, float]]:
        """Per channel: messages waiting for their turn, and the age in seconds of the oldest (/metrics)."""
        now = time.time()
        out: dict[str, tuple[int, float]] = {}
        for key, queue in self._queues.items():
            ages = [now - item.ts for item, _, _ in queue if isinstance(item, InboundMessage)]
            n, oldest = out.get(key.channel, (0, 0.0))
            out[key.channel] = (n + len(queue), max([oldest, *ages]))
        return out

    def publish(self, msg: InboundMessage) -> asyncio.Future[TurnResult | None]:
        """Queue `msg` behind its chat's earlier messages; the future resolves when its turn is done, with its
        `TurnResult` (None: no turn ran, as for /stop, or it failed)."""
        if self._at_once is not None and (answer := self._at_once(msg)) is not None:
            return self._answer_now(msg, answer)  # also while shutting down: it takes no turn (/stop ends one)
        if not self._accepting:
            raise BusClosed("Tusk is shutting down and takes no new messages")
        if self._remote is not None and (queued := self._remote(msg)) is not None:
            return queued
        if self._journal is not None and self._durable(msg):
            try:
                self._journal.record(msg)
            except (OSError, StorageUnavailable):  # a full disk, a database gone: the message is answered, just
                # not journaled
                logger.exception("could not journal a message for %s", msg.key)
        return self._enqueue(msg.key, msg)

    def run_here(self, msg: InboundMessage) -> asyncio.Future[TurnResult | None]:
        """Run `msg`'s turn in this process, in its chat's order here (a worker's job: bot/cluster/worker.py).
        The queue runs it again when the database is back: a turn the database failed raises StorageUnavailable
        into the future, saying nothing to the chat."""
        if not self._accepting:
            raise BusClosed("Tusk is shutting down and takes no new messages")
        return self._enqueue(msg.key, msg, retried=True)

    def _answer_now(self, msg: InboundMessage, answer: str) -> asyncio.Future[TurnResult | None]:
        """A message that takes no turn: its answer (if any) sent now; the future resolves once it is out."""
        done: asyncio.Future[TurnResult | None] = asyncio.get_running_loop().create_future()

        async def answering() -> None:
            try:
                if answer:
                    await self.send(OutboundMessage.answer(msg, answer))
            finally:
                if not done.done():
                    done.set_result(None)

        self._answering.start(answering(), f"answer {msg.key}")
        return done

    def cancel(self, key: ChatKey) -> bool:
        """Cancel `key`'s running turn and those queued behind it (the terminal's Ctrl-C): their futures are
        cancelled and nothing of them is saved. False if the chat had none."""
        worker = self._workers.get(key)
        if worker is None:
            return False
        worker.cancel()
        return True

    async def in_order(self, key: ChatKey, job: Job) -> Any:
        """Run `job` as a step of `key`'s chat: after the turns queued before it, before those after."""
        if not self._accepting:
            raise BusClosed("Tusk is shutting down and takes no new messages")
        return await self._enqueue(key, job)

    def _enqueue(self, key: ChatKey, item: InboundMessage | Job, retried: bool = False) -> asyncio.Future[Any]:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(key, deque()).append((item, done, retried))
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(key), name=f"chat {key}")
        return done

    async def _work(self, key: ChatKey) -> None:
        queue = self._queues[key]
        try:
            while queue:
                msg, done, retried = queue.popleft()
                RETRIED.set(retried)  # (this task's own context: the chat's turns and jobs, one after another)
                if not isinstance(msg, InboundMessage):
                    await self._run_job(msg, done)
                    continue
                result = None
                try:
                    result = await self._handler(msg)
                except asyncio.CancelledError:
                    done.cancel()
                    raise
                except Exception as exc:  # loop boundary: one broken turn must not stall the chat's queue
                    if retried and isinstance(exc, (StorageUnavailable, StaleWrite)):
                        done.set_exception(exc)  # its queue runs it again once the database is back, or the
                        continue  # worker that took the chat over does
                    logger.exception("turn failed in %s", key)
                self._settled(msg)
                if not done.done():
                    done.set_result(result)
        finally:  # no await between the emptiness check and here: nothing can slip in
            for _, done, _ in queue:
                done.cancel()
            del self._queues[key]
            del self._workers[key]

    @staticmethod
    async def _run_job(job: Job, done: asyncio.Future[Any]) -> None:
        try:
            result = await job()
        except asyncio.CancelledError:
            done.cancel()
            raise
        except Exception as exc:  # the caller of in_order gets it
            done.set_exception(exc)
        else:
            done.set_result(result)

    def _settled(self, msg: InboundMessage) -> None:
        """The turn ended (answered or failed): it will not be run again after a crash."""
        if self._journal is not None:
            try:
                self._journal.done(msg)
            except (OSError, StorageUnavailable):  # the database's row stays: replayed after a restart
                logger.exception("could not mark a journaled message of %s as done", msg.key)

    async def send(self, msg: OutboundMessage) -> bool:
        """Deliver `msg` through the channel that owns its chat; failures are logged, not raised: False
        (a schedule's run records it)."""
        outlet = self._outlets.get(msg.key.channel)
        if outlet is None:
            logger.error("no channel %r to deliver a reply to %s", msg.key.channel, msg.key)
            return False
        try:
            await outlet.send(msg)
        except DeliveryError as exc:  # the platform refused it: its message says why and what to do
            logger.error("could not deliver a reply to %s: %s", msg.key, exc, exc_info=exc)
            return False
        except Exception as exc:  # a channel's delivery failure must not end the turn; the session keeps the reply
            if isinstance(exc, StorageUnavailable) and RETRIED.get():
                raise  # a worker's reply to a request, its row not written: the turn's saved replies are sent again
            logger.exception("could not deliver a reply to %s", msg.key)
            return False
        return True

    def voice(self, key: ChatKey) -> VoiceOutlet | None:
        """How `key`'s channel sends voice messages (bot/speech/replies.py), if it does."""
        outlet = self._outlets.get(key.channel)
        return outlet.voice if outlet is not None else None

    def draft(self, msg: InboundMessage) -> Draft | None:
        """The channel's draft for the reply to `msg` being written (bot/stream.py), if it shows replies that way."""
        outlet = self._outlets.get(msg.key.channel)
        return outlet.draft(msg) if outlet is not None and outlet.draft is not None else None

    async def close(self, grace: float) -> bool:
        """Stop taking messages, let running turns finish for up to `grace` seconds; True if all did."""
        self._accepting = False
        await self._answering.wait(grace)
        workers = list(self._workers.values())
        if not workers:
            return True
        _, pending = await asyncio.wait(workers, timeout=grace)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return not pending
