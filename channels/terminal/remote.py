"""`tusk chat` beside a running Tusk: the terminal talks to that Tusk's own terminal chat over its local HTTP
API (channels/http/terminal.py) instead of starting a second Tusk on the same files.

    remote = RemoteTusk(url, token, chat)
    terminal = TerminalChannel(chat, remote.publish, cancel=remote.cancel, ...)
    async with remote.connected(terminal):     # the chat's event stream opened, or RemoteTuskError saying why
        await terminal.run()

It is the same `terminal:<chat>` a chat alone uses, so its memory is the same either way. The screen is
the same too: `publish` sends the message and draws the reply as the running Tusk writes it (the
terminal's own draft), commands are answered there, Ctrl-C (`cancel`) cancels the turn there, and a
reply nobody asked for (a reminder, a background task) arrives on the event stream and is shown
above the prompt, as in a chat alone. A lost connection is a line on the terminal, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp

from bot.errors import RemoteTuskError
from bot.events import ChatKey, InboundMessage
from channels.base import Done

if TYPE_CHECKING:
    from channels.terminal import TerminalChannel

CONNECT = aiohttp.ClientTimeout(total=None, sock_connect=10)  # a turn takes as long as it takes


async def server_events(content: aiohttp.StreamReader) -> AsyncIterator[tuple[str, Any]]:
    """(event, data) of a Server-Sent Events body; comments (`: ping`) skipped. Lines of any length."""
    buffer, name = b"", "message"
    data: list[str] = []
    async for chunk in content.iter_any():
        buffer += chunk
        while b"\n" in buffer:
            raw, buffer = buffer.split(b"\n", 1)
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if not line:
                if data:
                    yield name, json.loads("\n".join(data))
                name, data = "message", []
            elif not line.startswith(":"):
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "event":
                    name = value
                elif field == "data":
                    data.append(value)


class RemoteTusk:
    def __init__(self, url: str, token: str | None, chat: str) -> None:
        self.key = ChatKey("terminal", chat)
        self.url = url
        self._base = f"{url}/v1/terminal/{quote(chat, safe='')}"
        self._headers = {"Origin": url, **({"Authorization": f"Bearer {token}"} if token else {})}  # Origin:
        # what the API asks of a request that changes state when TUSK_HTTP_TOKEN=off
        self._client: aiohttp.ClientSession | None = None
        self._terminal: TerminalChannel | None = None
        self._turn: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # held until done (the loop keeps only weak references)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @contextlib.asynccontextmanager
    async def connected(self, terminal: TerminalChannel) -> AsyncIterator[RemoteTusk]:
        """Connected to the running Tusk for `terminal`: its event stream open (RemoteTuskError if refused)."""
        self._terminal = terminal
        async with aiohttp.ClientSession(headers=self._headers, timeout=CONNECT) as client:
            self._client = client
            try:
                events = await client.get(f"{self._base}/events")
            except (aiohttp.ClientError, OSError) as exc:
                raise RemoteTuskError(f"the Tusk running on this home does not answer on {self.url} ({exc})") from None
            if events.status != 200:
                reason = await _reason(events)
                events.release()
                raise RemoteTuskError(f"the Tusk running on this home ({self.url}) refused this chat: {reason}")
            watching = self._spawn(self._watch(events))
            try:
                yield self
            finally:
                watching.cancel()
                for task in list(self._tasks):
                    task.cancel()
                await asyncio.gather(*self._tasks, watching, return_exceptions=True)
                events.release()
                self._client = None

    def publish(self, msg: InboundMessage) -> Done:
        """Send one message; the future ends with the turn (cancelled if the turn was), with None: how the
        turn ended stays with the running Tusk."""
        done: Done = asyncio.get_running_loop().create_future()
        self._turn = self._spawn(self._post(msg, done))
        return done

    def cancel(self, key: ChatKey) -> bool:
        """Ctrl-C: ask the running Tusk to cancel this chat's turn; False if none is under way here."""
        if self._turn is None or self._turn.done():
            return False
        self._spawn(self._cancel())
        return True

    async def _cancel(self) -> None:
        assert self._client is not None and self._terminal is not None
        try:
            async with self._client.post(f"{self._base}/cancel", json={}) as resp:
                if resp.status != 200 or not (await resp.json()).get("cancelled"):
                    self._terminal.note("(nothing to cancel)")
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            self._terminal.note(f"(could not reach the running Tusk to cancel: {exc})")

    async def _post(self, msg: InboundMessage, done: Done) -> None:
        assert self._client is not None and self._terminal is not None
        terminal = self._terminal
        body = {"text": msg.text, "user": msg.sender_id, "name": msg.sender_name}
        try:
            async with self._client.post(f"{self._base}/messages", json=body) as resp:
                if resp.status != 200:
                    terminal.note(f"(the running Tusk did not take that message: {await _reason(resp)})")
                    return
                await self._draw(server_events(resp.content), terminal.draft(msg), done)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            terminal.note(f"(the connection to the Tusk running on this home broke: {exc or type(exc).__name__}; "
                          "that message may not have been answered)")
        finally:
            if not done.done():
                done.set_result(None)

    async def _draw(self, events: AsyncIterator[tuple[str, Any]], draft: Any, done: Done) -> None:
        """A turn's events onto the terminal, as its draft and `show` draw them in a chat alone."""
        assert self._terminal is not None
        text = ""
        async for name, data in events:
            if name == "delta":
                text = data["text"] if data.get("replace") else text + data["text"]
                await draft.show(text)
            elif name == "tool":
                text = ""
                await draft.status(data["status"])
            elif name == "reply" and data.get("streamed"):
                await draft.finish(data["text"], bool(data.get("plain")))
                text = ""
            elif name == "reply":
                self._terminal.show(data["text"], bool(data.get("plain")))
            elif name == "cancelled":
                done.cancel()
                return
            elif name == "error":
                self._terminal.note(f"({data.get('error')})")
            elif name == "done":
                return

    async def _watch(self, events: aiohttp.ClientResponse) -> None:
        """Replies nobody asked for (reminders, background tasks), shown as they come; a line when it ends."""
        assert self._terminal is not None
        try:
            async for name, data in server_events(events.content):
                if name == "message":
                    self._terminal.show(data["text"])
        except (aiohttp.ClientError, OSError, ValueError):
            pass
        self._terminal.note(f"(the Tusk running on this home ({self.url}) stopped: /quit, then start `tusk chat` "
                            "again)")


async def _reason(resp: aiohttp.ClientResponse) -> str:
    """The `error` of a JSON error answer, else its status line."""
    try:
        body = await resp.json(content_type=None)
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            return f"{body['error']} ({resp.status})"
    except (ValueError, aiohttp.ClientError):
        pass
    return f"{resp.status} {resp.reason}"
