"""Streaming replies: the model's text reaches the chat while it is written.

    LLM stream (litellm stream=True) --text so far--> Live --throttled--> Draft (the channel's)
    tool step running                 --status-----> Live -------------> Draft
    turn done                         --final text-> Live.finish -------> Draft.finish (formatted, split)

A channel that can show a reply being written offers `draft(msg) -> Draft` (its contract: bot/bus.py)
(Telegram: sendMessageDraft or edits, Discord: edits, Slack: chat streaming or chat.update,
HTTP: Server-Sent Events, terminal: the text as it comes). A channel without one gets the
final reply through `send` as before. Throttling is done here, once, at the draft's own
`interval`; a reply shorter than `min_chars` (TUSK_STREAM_MIN_CHARS) is not shown until
it is done, so short answers arrive as one message without edits.

Drafts are shown the text with `<think>` blocks (open or closed, or a tag still arriving)
removed. What is saved is the final text, which is what the draft ends on.

The model's stream itself is read in bot/llm/streams.py, which feeds `Live` as it goes.
A stream cut after some of it was shown (an error, TUSK_LLM_TIMEOUT) is `StreamCut`: not
retried (the user has read part of it); the agent finishes the draft with what came plus
`CUT_NOTE`, and saves that as the turn's reply, after the tool steps that completed. A
stream cut before anything was shown is an ordinary failure, retried as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from bot import logs
from bot.events import InboundMessage
from bot.llm.wire import strip_think

logger = logging.getLogger(__name__)

CUT_NOTE = "\n\n_(the reply was cut off here: the connection to the model failed)_"
STATUS = {"search_history": "searching this chat's history…", "remember": "saving that to memory…",
          "set_reminder": "setting a reminder…", "list_reminders": "looking at the reminders…",
          "cancel_reminder": "cancelling a reminder…", "start_task": "starting a background task…",
          "current_time": "checking the time…"}
_THINK_TAG = "<think>"


@dataclass(frozen=True, slots=True)
class StreamSettings:
    mode: Literal["auto", "off"] = "auto"  # TUSK_STREAM
    min_chars: int = 120  # TUSK_STREAM_MIN_CHARS: a reply shorter than this is sent once, without edits

    @property
    def on(self) -> bool:
        return self.mode == "auto"


class Draft(Protocol):
    """A reply being written, as one channel shows it. `show` and `status` get the whole text so far
    (never a delta) and are called at most once per `interval` seconds, one at a time; `finish` gets
    the final text and delivers it as the channel's `send` would (formatted, split within limits); with
    `verbatim` it is Tusk's own words (a failure's sentence after a tool step showed), shown as written."""

    interval: float

    async def show(self, text: str) -> None: ...

    async def status(self, text: str) -> None: ...

    async def finish(self, text: str, verbatim: bool = False) -> None: ...


Drafts = Callable[[InboundMessage], Draft | None]  # a channel's draft for the reply to a message, if it shows one


def visible(raw: str) -> str:
    """What a user may see of a reply still being written: no `<think>` block (one still open hides the
    rest), no half-arrived `<think` tag at the end."""
    text = strip_think(raw) or ""
    tail = text[-len(_THINK_TAG):].lower()
    for n in range(min(len(tail), len(_THINK_TAG) - 1), 0, -1):
        if tail.endswith(_THINK_TAG[:n]):
            return text[:-n].rstrip()
    return text.strip()


def status_text(tool: str) -> str:
    return STATUS.get(tool, f"using {tool}…")


class Live:
    """One reply on its way to a chat: the text so far, pushed to the draft at its pace."""

    def __init__(self, draft: Draft | None, min_chars: int = 0) -> None:
        self.draft = draft
        self.min_chars = min_chars
        self.text = ""  # visible text of the current model call
        self.shown = False  # some of this call's text is going to the draft: the user may read it
        self.pushes = 0
        self._latest = ""
        self._status = False
        self._sent = ""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._broken = False
        self._delivered = False  # the draft took at least one update
        self._last = -1e9  # when the draft took its last update
        self._in_call = False  # an update is under way at the platform

    def begin(self) -> None:
        """A model call starts (or starts again): its text is new."""
        self.text, self.shown = "", False

    def feed(self, raw: str) -> None:
        """The model's raw text so far in this call (called for every chunk; cheap)."""
        self.text = visible(raw)
        if self.draft is None or self._broken or not self.shown and len(self.text) < self.min_chars:
            return
        if self.text:
            self._push(self.text)

    def status(self, tool: str) -> None:
        """A tool step starts: its short status replaces the text shown (where a draft is)."""
        self.text, self.shown = "", False
        if self.draft is not None and not self._broken:
            self._push(f"_{status_text(tool)}_", status=True)

    def _push(self, text: str, status: bool = False) -> None:
        if not status and (stats := logs.current_stats()) is not None and stats.first_text_ms is None:
            stats.first_text_ms = (time.monotonic() - stats.started) * 1000  # for /metrics (bot/metrics.py)
        self.shown = self.shown or not status  # from here on this text is the user's to see
        self._latest, self._status = text, status
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._pusher(), name="draft")

    async def _pusher(self) -> None:
        assert self.draft is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            if (wait := self._last + self.draft.interval - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            text, status = self._latest, self._status
            if text == self._sent:
                continue
            self._in_call = True
            try:
                await (self.draft.status(text) if status else self.draft.show(text))
            except Exception:  # a draft is a courtesy: the final reply still goes out, through finish or send
                logger.warning("showing a reply being written failed; the final reply follows", exc_info=True)
                self._broken = True
                return
            finally:
                self._in_call = False
            self._sent, self._last = text, time.monotonic()
            self.pushes += 1
            self._delivered = True
            if self._broken:  # stopped while that update was under way
                return

    async def stop(self) -> None:
        """Wait for the update under way; no more after it."""
        task, self._task = self._task, None
        if task is None:
            return
        self._broken = True
        if not self._in_call:  # waiting for its turn: nothing is under way
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)  # an update under way finishes (a message it sends
        # must be the one the final text replaces, not a second one)

    async def finish(self, text: str, verbatim: bool = False) -> bool:
        """End the reply with its final text (`verbatim`: Tusk's own words); False if nothing was shown (the
        caller sends it as usual)."""
        await self.stop()
        if self.draft is None or not self._delivered:
            return False
        if (wait := self._last + self.draft.interval - time.monotonic()) > 0:  # the final update keeps the pace too
            await asyncio.sleep(wait)
        await self.draft.finish(text, verbatim)
        return True
