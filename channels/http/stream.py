"""A turn over the HTTP API as Server-Sent Events (`"stream": true`): the reply while it is written.

    event: delta   data: {"text": "more of the reply"}         append it to what you show
                   data: {"text": "the reply so far", "replace": true}   (rare: the text started over)
    event: tool    data: {"status": "searching this chat's history…"}   a tool step runs; the next
                                                                        delta starts the reply afresh
    event: done    data: {"replies": ["...", ...],             the final replies, exactly as saved
                          "formats": ["markdown", ...]}        (and as the JSON answer has them), each
                                                               "markdown" (the model's) or "plain" (Tusk's
                                                               own words: show them as written), with
                                                               "voice" when a reply was read out
    event: error   data: {"error": "..."}                      the turn was not taken (shutting down)

`done` is the truth: the streamed text is a preview (Markdown still arriving, a cut note
not yet added). A short reply (under TUSK_STREAM_MIN_CHARS) comes as `done` alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from aiohttp import web

INTERVAL = 0.05  # seconds between two events: a local client can take them fast
MARKDOWN, PLAIN = "markdown", "plain"  # a reply's format: the model's Markdown, or Tusk's own words as written


class EventStream:
    """One streaming request's response, and the draft (bot/stream.py) the agent writes the reply to."""

    interval = INTERVAL

    def __init__(self, request: web.Request, headers: Mapping[str, str]) -> None:
        self.request = request
        self.response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream",
                                                    "Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        self.replies: list[str] = []
        self.formats: list[str] = []  # MARKDOWN or PLAIN, one per reply
        self.voices: list[dict] = []  # the spoken replies' references (channels/http/voice.py)
        self._text = ""

    async def open(self) -> None:
        await self.response.prepare(self.request)

    async def _event(self, name: str, data: object) -> None:
        await self.response.write(f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode())

    async def show(self, text: str) -> None:
        if text.startswith(self._text):
            await self._event("delta", {"text": text[len(self._text):]})
        else:
            await self._event("delta", {"text": text, "replace": True})
        self._text = text

    async def status(self, text: str) -> None:
        self._text = ""
        await self._event("tool", {"status": text.strip("_")})

    async def finish(self, text: str, verbatim: bool = False) -> None:
        """The final reply, one of `done`'s; a preview it continues is first brought up to it (the last
        update before the end may have been skipped by the pace)."""
        if self._text and text != self._text and text.startswith(self._text):
            await self.show(text)
        self.replies.append(text)
        self.formats.append(PLAIN if verbatim else MARKDOWN)

    async def done(self) -> None:
        await self._event("done", {"replies": self.replies, "formats": self.formats,
                                   **({"voice": self.voices} if self.voices else {})})
        await self.response.write_eof()

    async def error(self, message: str) -> None:
        await self._event("error", {"error": message})
        await self.response.write_eof()
