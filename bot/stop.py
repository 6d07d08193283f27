"""/stop: a chat's running reply stopped at once, what it had shown kept.

    /stop (typed on any channel; the Stop button under a draft on Telegram and Discord;
           POST /v1/chats/{id}/stop on the HTTP API)
      -> MessageBus.publish answers it as it arrives (`Stops.answer`): it never waits in the chat's
         queue behind the turn it stops, and it is not journaled
      -> the chat's running turn: its task is cancelled where it waits (the model's stream, a tool, the
         next request); `Stops.stoppable`, around the turn's conversation, turns that cancellation
         into `Stopped`
      -> the agent (`stopped_turn`): the text written so far, with a note that it was stopped, is the
         reply: saved after the tool steps that completed (a step cut short gets a result for each of
         its calls still without one, so the saved conversation stays legal: memory/history.py), and
         the draft is finished with it
      -> the messages that arrived meanwhile are the chat's next turns: the bus's queue is untouched
      -> the chat's background tasks (bot/tools/tasks.py) are cancelled too, and the answer says so
    nothing running -> NOTHING_TO_STOP

Who may stop: anyone who may talk to the bot in that chat (the channel's allow-list let the /stop in).
In a group a reply goes to everyone, and stopping it loses nothing (its text stays, the queued messages
still run), so no admin is needed; the note says who stopped it.

Unlike the terminal's Ctrl-C (`MessageBus.cancel`: the turn and the chat's queue cancelled, nothing
saved), /stop keeps what was shown and what waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from bot.commands.base import Command, CommandContext
from bot.events import ChatKey, InboundMessage
from memory.session import Message

logger = logging.getLogger(__name__)

STOP = re.compile(r"\s*/stop(?:@\S+)?\s*", re.IGNORECASE)
NOTHING_TO_STOP = "Nothing to stop: no reply is being written here."
STOPPED_RESULT = "(not finished: the user stopped the reply with /stop; nothing more is known of this call)"
Stopper = Callable[[ChatKey], list[str]]  # stops something else a chat runs; a line for each thing stopped


def stopped_note(by: str) -> str:
    """The note a stopped reply ends with (who stopped it, in groups)."""
    return f"_(stopped by {by})_" if by else "_(stopped)_"


def is_stop(msg: InboundMessage) -> bool:
    """`msg` is a /stop meant for the bot (not a turn Tusk started, not group chatter)."""
    return msg.addressed and msg.injected is None and not msg.attachments and STOP.fullmatch(msg.text) is not None


class Stopped(Exception):
    """The turn was stopped by /stop (raised where `Stops.stoppable` ends); `by`: who, in groups."""

    def __init__(self, by: str) -> None:
        super().__init__(f"stopped{f' by {by}' if by else ''}")
        self.by = by


@dataclass(slots=True)
class _Running:
    task: asyncio.Task[object]
    by: str | None = None  # who stopped it ("" in a direct chat); None: not stopped


class Stops:
    """The turns that may be stopped now, one per chat (the bus runs one turn at a time per chat)."""

    def __init__(self, others: Sequence[Stopper] = ()) -> None:
        """`others`: what /stop stops too in the chat (its background tasks: bot/tools/tasks.py `Underway`)."""
        self._running: dict[ChatKey, _Running] = {}
        self._others = tuple(others)

    def running(self, key: ChatKey) -> bool:
        return key in self._running

    def answer(self, msg: InboundMessage) -> str | None:
        """For the bus, before the chat's queue: None if `msg` is not /stop; else what it stopped, as the
        text to answer: "" when a reply was stopped (that reply, ending in its note, is the answer),
        a line per background task stopped, or NOTHING_TO_STOP."""
        if not is_stop(msg):
            return None
        replied = self.stop(msg.key, (msg.sender_name or msg.sender_id) if msg.is_group else "")
        others = [line for stopper in self._others for line in stopper(msg.key)]
        if others:
            return "\n".join(others)
        return "" if replied else NOTHING_TO_STOP

    def stop(self, key: ChatKey, by: str = "") -> bool:
        """Stop `key`'s running turn (its task is cancelled where it waits); False if none is running."""
        running = self._running.get(key)
        if running is None:
            return False
        if running.by is None:
            running.by = by
            running.task.cancel()
            logger.info("the running reply in %s was stopped", key)
        return True

    @contextlib.asynccontextmanager
    async def stoppable(self, key: ChatKey) -> AsyncIterator[None]:
        """The part of `key`'s turn that /stop may cut short: a stop raises `Stopped` here. A cancellation
        that is not only the stop's (shutdown, the terminal's Ctrl-C) goes on as a cancellation."""
        task = asyncio.current_task()
        assert task is not None
        running = self._running[key] = _Running(task)
        try:
            yield
        except asyncio.CancelledError:
            if running.by is None or task.uncancel() > 0:
                raise
            raise Stopped(running.by) from None
        else:
            if running.by is not None:  # the stop came as it finished, and was swallowed on the way
                task.uncancel()
        finally:
            if self._running.get(key) is running:
                del self._running[key]


def stopped_turn(new: list[Message], shown: str, by: str) -> tuple[list[Message], str]:
    """The turn's messages to save and the reply, for a turn stopped after `new` (its user message and the
    tool steps so far, the last maybe cut short) with `shown` written of the current reply."""
    messages = list(new)
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].tool_calls), None)
    if last is not None:
        answered = {m.tool_call_id for m in messages[last + 1:] if m.role == "tool"}
        for call in messages[last].tool_calls:
            if call.get("id") not in answered:
                name = (call.get("function") or {}).get("name")
                messages.append(Message(role="tool", tool_call_id=call.get("id"), name=name,
                                        content=STOPPED_RESULT).counted())
    text = f"{shown.rstrip()}\n\n{stopped_note(by)}" if shown.strip() else stopped_note(by)
    messages.append(Message(role="assistant", content=text))
    return messages, text


def stop_command() -> Command:
    """/stop in /help and the platforms' menus. The bus answers it before any queue (`Stops.answer`); this
    answer is for one that reached a turn all the same (nothing of that chat was running then)."""
    async def answer(ctx: CommandContext, args: str) -> str:
        return NOTHING_TO_STOP

    return Command("stop", "stop the reply being written (what it wrote so far is kept)", answer)
