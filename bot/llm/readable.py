"""What OpenAI-compatible servers really send, made readable before litellm reads it.

For the `openai/` route with a base URL (vLLM, LM Studio, llama.cpp, Ollama's /v1, a proxy)
litellm is handed `readable_client(...)`: an OpenAI client (litellm's documented `client`
parameter) whose httpx transport, `ReadableReplies`, fixes the shapes litellm would refuse
or drop, streamed or not:

- `content` as a list of parts (Mistral, some vLLM models), in a whole reply or in each
  streamed `delta`: its text; thinking parts become `reasoning_content`;
- tool-call `arguments` given as a JSON object: JSON text;
- a streamed request answered with one whole JSON body (a server that ignores `stream`):
  the same reply as one SSE chunk, so nothing is lost and nothing is asked twice;
- an `error` object in a 200 answer to a streamed request: an SSE error event, which the
  OpenAI client raises as the server's error;
- a web page (HTML) where the chat API should be: `NotAnApi`, which bot/llm/translate.py reads as a
  misconfigured base URL (`bot.errors.NotAModelServer`), not as an empty reply.

Everything else passes unchanged. What is fixed, and how, is bot/llm/shapes.py (the direct client,
bot/llm/direct.py, reads with it too). Imported only when such a client is made: start-up does
not pay for httpx.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx

from bot.llm.shapes import as_chunks, flatten_content
from bot.llm.wire import WEB_PAGE, NotAnApi

_STREAM_ASKED = re.compile(rb'(?<!\\)"stream"\s*:\s*true')
_NEEDS_READING = (b'"content":[', b'"content": [', b'"arguments":{', b'"arguments": {')


def _events(payloads: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in payloads) + b"data: [DONE]\n\n"


class _ReadableEvents(httpx.AsyncByteStream):
    """An SSE body read line by line; a `data:` line whose JSON needs it is made readable (`flatten_content`)."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = b""
        async for piece in self._inner:
            pending += piece
            *lines, pending = pending.split(b"\n")
            if lines:
                yield b"".join(_readable_line(line) + b"\n" for line in lines)
        if pending:
            yield _readable_line(pending)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _readable_line(line: bytes) -> bytes:
    if not line.startswith(b"data:") or not any(marker in line for marker in _NEEDS_READING):
        return line
    try:
        chunk = json.loads(line[5:])
    except ValueError:
        return line
    if not isinstance(chunk, dict) or not flatten_content(chunk):
        return line
    return b"data: " + json.dumps(chunk).encode() + (b"\r" if line.endswith(b"\r") else b"")


def _asks_stream(request: httpx.Request) -> bool:
    try:
        return _STREAM_ASKED.search(request.content) is not None
    except httpx.RequestNotRead:  # a streamed upload is no chat request
        return False


class ReadableReplies(httpx.AsyncBaseTransport):
    """An httpx transport that hands chat completions on in shapes litellm reads (the module docstring)."""

    def __init__(self) -> None:
        # No pooled connections: none outlives its request (nor the event loop that made it). These
        # servers are mostly local, where a connection costs a fraction of a millisecond.
        self._inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if not request.url.path.endswith("/chat/completions"):
            return response
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind in ("text/html", "application/xhtml+xml") and response.status_code in (200, 404):
            await response.aclose()
            raise NotAnApi(f"HTTP {response.status_code}: {WEB_PAGE} ({kind})")
        if kind == "text/event-stream":
            assert isinstance(response.stream, httpx.AsyncByteStream)  # an async transport's
            return httpx.Response(response.status_code, headers=response.headers,
                                  stream=_ReadableEvents(response.stream), request=request,
                                  extensions=response.extensions)
        if kind != "application/json":
            return response  # errors in other types pass as they are
        raw = await response.aread()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        headers = [(k, v) for k, v in response.headers.items()
                   if k.lower() not in ("content-length", "content-encoding", "transfer-encoding", "content-type")]
        if isinstance(body, dict) and response.status_code == 200 and _asks_stream(request):
            flatten_content(body)  # a server that ignored `stream`: its whole answer, as one stream
            payloads = [{"error": body["error"]}] if body.get("error") else as_chunks(body)
            return httpx.Response(200, headers=[*headers, ("content-type", "text/event-stream")],
                                  content=_events(payloads), request=request, extensions=response.extensions)
        if not isinstance(body, dict) or not flatten_content(body):
            return httpx.Response(response.status_code, headers=response.headers, content=raw,
                                  request=request, extensions=response.extensions)
        return httpx.Response(response.status_code, headers=[*headers, ("content-type", "application/json")],
                              content=json.dumps(body).encode(), request=request, extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


def readable_client(api_base: str, api_key: str | None) -> Any:
    """An OpenAI client (for litellm's `client` parameter) whose replies arrive readable (see above)."""
    import openai  # installed with litellm

    client = httpx.AsyncClient(transport=ReadableReplies(), timeout=None)
    # openai 3 takes an httpx.AsyncClient as well as its own httpx2's (is_legacy_httpx_async_client), though its
    # hint names httpx2's only; an older openai's hint names httpx's (so the ignore may be unused there)
    return openai.AsyncOpenAI(base_url=api_base, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
                              max_retries=0,
                              http_client=client)  # type: ignore[arg-type, unused-ignore]  # it takes httpx's too

