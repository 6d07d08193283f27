"""The httpx transport behind `bot.llm_wire.readable_client`: chat completions whose content is a list
of parts arrive as text (litellm's reply model refuses lists on the openai route). Imported only when
such a client is made, so start-up does not pay for httpx."""

from __future__ import annotations

import json

import httpx

from bot.llm_wire import flatten_content


class ReadableReplies(httpx.AsyncBaseTransport):
    """An httpx transport that hands chat completions on with list content turned into text."""

    def __init__(self) -> None:
        # No pooled connections: none outlives its request (nor the event loop that made it). These
        # servers are mostly local, where a connection costs a fraction of a millisecond.
        self._inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if not request.url.path.endswith("/chat/completions") or \
                "application/json" not in response.headers.get("content-type", ""):
            return response  # streams and errors pass as they are
        raw = await response.aread()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict) or not flatten_content(body):
            return httpx.Response(response.status_code, headers=response.headers, content=raw,
                                  request=request, extensions=response.extensions)
        headers = [(k, v) for k, v in response.headers.items()
                   if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=headers, content=json.dumps(body).encode(),
                              request=request, extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()
