"""The terminal chats of a running Tusk, for a `tusk chat` started beside it (channels/terminal/remote.py).

They are the same `terminal:<chat>` chats a `tusk chat` alone keeps, so a chat's memory is the same
either way. Owner only: like every route but the OpenAI ones, they take the console token (or
TUSK_HTTP_TOKEN), never an API key.

    POST /v1/terminal/{chat}/messages   {"text": "...", "user": "ann", "name": "Ann"}
         -> Server-Sent Events while the turn runs:
            delta, tool    the reply while it is written (as channels/http/stream.py sends them)
            reply          {"text": "...", "streamed": true}  the final text of what the deltas showed, or
                           {"text": "...", "streamed": false} a reply of its own (a command's answer, a
                           short reply, a notice), in the order the turn delivers them; "plain": true
                           for Tusk's own words, shown as written (not as Markdown)
            done           {"replies": [...]}                 the turn has ended
            cancelled      {}                                 it was cancelled: nothing of it is saved
            error          {"error": "..."}                   not taken (Tusk is shutting down)
    POST /v1/terminal/{chat}/cancel     {} -> {"cancelled": true|false}  the chat's running turn, and those queued
                                        behind it, cancelled (Ctrl-C in the terminal)
    GET  /v1/terminal/{chat}/events     Server-Sent Events for as long as the client stays: `message`
                                        {"text": "..."} for each reply no request waits for (a reminder, a
                                        background task's result); `: ping` comments keep it open

A reply nobody waits for while no terminal is connected (a reminder due while no `tusk chat` runs) is
saved in the chat's session as always, and kept here as well (the last `KEPT` of each chat, for as
long as this Tusk runs): the next `tusk chat` on that chat shows it when it connects.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Callable

import pydantic
from aiohttp import web

from bot.errors import BusClosed
from bot.events import ChatKey, InboundMessage, OutboundMessage
from channels.base import Publish
from channels.http import SECURITY_HEADERS, chat_key, error, problems
from channels.http.stream import MARKDOWN, PLAIN, EventStream

logger = logging.getLogger(__name__)

BASE = "/v1/terminal/{chat}"
KEPT = 20  # replies kept per chat for the next terminal that connects
PING = 15.0  # seconds between two keep-alive comments on an event stream


class TerminalBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    text: str = pydantic.Field(min_length=1)
    user: str = pydantic.Field("terminal", min_length=1, max_length=200)
    name: str = pydantic.Field("", max_length=200)


def _event(name: str, data: object) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class TurnStream(EventStream):
    """One terminal turn's events: EventStream's, plus each reply as it is delivered and how it ended. A client
    that left is not written to again (the turn goes on and is saved)."""

    gone = False

    async def _event(self, name: str, data: object) -> None:
        if self.gone:
            return
        try:
            await super()._event(name, data)
        except ConnectionResetError:
            self.gone = True
            logger.info("a terminal client left before its reply was done; the turn goes on and is saved")

    async def finish(self, text: str, verbatim: bool = False) -> None:
        await super().finish(text, verbatim)
        await self._event("reply", {"text": text, "streamed": True, "plain": verbatim})

    async def sent(self, text: str, verbatim: bool = False) -> None:
        self.replies.append(text)
        self.formats.append(PLAIN if verbatim else MARKDOWN)
        await self._event("reply", {"text": text, "streamed": False, "plain": verbatim})

    async def end(self, name: str, data: object) -> None:
        await self._event(name, data)
        if not self.gone:
            try:
                await self.response.write_eof()
            except ConnectionResetError:
                self.gone = True


class TerminalRelay:
    """The channel `terminal` inside a running Tusk: replies go to the request that asked, else to the
    connected terminals of the chat (else they are kept for the next one)."""

    name = "terminal"
    voice = None  # replies are text only

    def __init__(self, publish: Publish, cancel: Callable[[ChatKey], bool]) -> None:
        self._publish = publish
        self._cancel = cancel
        self._turns: dict[int, TurnStream] = {}  # InboundMessage.id -> the request waiting for that turn
        self._watchers: dict[ChatKey, set[asyncio.Queue[str | None]]] = {}
        self._kept: dict[ChatKey, deque[str]] = {}

    def routes(self) -> list[web.RouteDef]:
        return [web.post(BASE + "/messages", self._message), web.post(BASE + "/cancel", self._cancel_turn),
                web.get(BASE + "/events", self._events)]

    async def start(self) -> None:
        """Nothing to start: the HTTP channel serves the routes."""

    async def pause(self) -> None:
        """Nothing to pause: a message after this is refused by the bus (an `error` event)."""

    async def stop(self) -> None:
        """End every event stream (before the HTTP server stops, which waits for its open requests)."""
        for queues in self._watchers.values():
            for queue in queues:
                queue.put_nowait(None)

    def draft(self, msg: InboundMessage) -> TurnStream | None:
        return self._turns.get(msg.id)

    async def send(self, msg: OutboundMessage) -> None:
        turn = self._turns.get(msg.reply_to) if msg.reply_to is not None else None
        if turn is not None:
            await turn.sent(msg.text, msg.verbatim)
            return
        watchers = self._watchers.get(msg.key)
        if watchers:
            for queue in watchers:
                queue.put_nowait(msg.text)
            return
        self._kept.setdefault(msg.key, deque(maxlen=KEPT)).append(msg.text)
        logger.info("no terminal is connected to %s: the message is kept for the next `tusk chat` there", msg.key)

    async def _message(self, request: web.Request) -> web.StreamResponse:
        key = chat_key(self.name, request.match_info["chat"])
        try:
            body = TerminalBody.model_validate_json(await request.read())
        except pydantic.ValidationError as exc:
            return error(400, f"expected JSON {{\"text\": \"...\", \"user\": \"...\", \"name\": \"...\"}}: "
                              f"{problems(exc)}")
        msg = InboundMessage(key, body.text, sender_id=body.user, sender_name=body.name)
        turn = TurnStream(request, SECURITY_HEADERS)
        await turn.open()
        self._turns[msg.id] = turn
        try:
            try:
                done = self._publish(msg)
            except BusClosed as exc:
                await turn.end("error", {"error": str(exc)})
                return turn.response
            await asyncio.wait([done])
            if done.cancelled():
                await turn.end("cancelled", {})
            else:
                await turn.end("done", {"replies": turn.replies})
        finally:
            del self._turns[msg.id]
        return turn.response

    async def _cancel_turn(self, request: web.Request) -> web.Response:
        key = chat_key(self.name, request.match_info["chat"])
        return web.json_response({"cancelled": self._cancel(key)})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        key = chat_key(self.name, request.match_info["chat"])
        response = web.StreamResponse(headers={**SECURITY_HEADERS, "Content-Type": "text/event-stream",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        for waiting in self._kept.pop(key, ()):
            queue.put_nowait(waiting)
        self._watchers.setdefault(key, set()).add(queue)
        text: str | None = None
        try:
            await response.write(b": connected\n\n")
            while True:
                try:
                    text = await asyncio.wait_for(queue.get(), PING)
                except TimeoutError:
                    await response.write(b": ping\n\n")
                    continue
                if text is None:
                    break
                await response.write(_event("message", {"text": text}))
                text = None
            await response.write_eof()
        except ConnectionResetError:  # the terminal went away: what it did not get waits for the next one
            unshown = [t for t in [text, *_drain(queue)] if t is not None]
            if unshown and len(self._watchers.get(key, ())) <= 1:
                self._kept.setdefault(key, deque(maxlen=KEPT)).extend(unshown)
        finally:
            watchers = self._watchers.get(key, set())
            watchers.discard(queue)
            if not watchers:
                self._watchers.pop(key, None)
        return response


def _drain(queue: asyncio.Queue[str | None]) -> list[str | None]:
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out
