"""A real OpenAI-compatible chat-completions server on 127.0.0.1, for tests through real litellm.

    async with FakeLLM() as llm:
        llm.script(Reply(text="hi"), Reply(tool_calls=[("c1", "current_time", {})]))
        ... litellm.acompletion(model="openai/fake", api_base=llm.base_url, api_key="sk-test", ...)
        llm.requests   # every request body, in arrival order

Replies come from the script (FIFO), then from `responder(body)` if set, else echo the
last user message as "echo: <text>". Streaming requests get SSE chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.loopback import serve, wait_until


@dataclass
class Reply:
    text: str | None = "ok"
    tool_calls: list[tuple[str, str, dict | str]] = field(default_factory=list)  # (id, name, arguments)
    delay: float = 0.0
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None


def last_user_text(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages", [])):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


class FakeLLM:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self._script: deque[Reply] = deque()
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._ids = itertools.count(1)
        self.base_url = ""

    def script(self, *replies: Reply) -> None:
        self._script.extend(replies)

    async def wait_for_requests(self, n: int, timeout: float = 5.0) -> None:
        await wait_until(lambda: len(self.requests) >= n, timeout, lambda: f"{len(self.requests)} requests, wanted {n}")

    async def __aenter__(self) -> FakeLLM:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        app.router.add_post("/chat/completions", self._complete)
        app.router.add_get("/v1/models", self._models)
        self._runner, url = await serve(app)
        self.base_url = f"{url}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing.set()
        assert self._runner is not None
        await self._runner.cleanup()

    def _next(self, body: dict[str, Any]) -> Reply:
        if self._script:
            return self._script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Reply(text=f"echo: {last_user_text(body)}")

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        reply = self._next(body)
        if reply.delay:  # cut short when the fake closes, so a test never waits out a slow reply
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), reply.delay)
        if reply.raw_body is not None:
            return web.Response(text=reply.raw_body, status=reply.status, headers=reply.headers,
                                content_type="application/json")
        if reply.status != 200:
            error = {"error": {"message": f"fake error {reply.status}", "type": "fake_error", "code": reply.status}}
            return web.json_response(error, status=reply.status, headers=reply.headers)
        calls = [{"id": cid, "type": "function",
                  "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                 for cid, name, args in reply.tool_calls]
        base = {"id": f"chatcmpl-{next(self._ids)}", "created": int(time.time()), "model": body.get("model", "fake")}
        if body.get("stream"):
            return await self._stream(request, base, reply, calls)
        prompt = len(json.dumps(body.get("messages", []))) // 4
        done = len(reply.text or "") // 4 + 1
        message = {"role": "assistant", "content": reply.text, **({"tool_calls": calls} if calls else {})}
        return web.json_response({
            **base, "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done},
        }, headers=reply.headers)

    async def _stream(self, request: web.Request, base: dict, reply: Reply, calls: list[dict]) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **reply.headers})
        await resp.prepare(request)
        text = reply.text or ""
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": text[: len(text) // 2]},
                                        {"content": text[len(text) // 2:]}]
        deltas += [{"tool_calls": [{"index": i, **c}]} for i, c in enumerate(calls)]
        for i, delta in enumerate(deltas):
            last = i == len(deltas) - 1
            choice = {"index": 0, "delta": delta,
                      "finish_reason": ("tool_calls" if calls else "stop") if last else None}
            chunk = {**base, "object": "chat.completion.chunk", "choices": [choice]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
