"""The first requests after a start, sent on the OpenAI wire over aiohttp while litellm is still loading.

litellm's import takes ~4 s of CPU (bot/llm/loader.py). A fresh Tusk answers before that: requests of
the `openai/` route (the OpenAI API, or any OpenAI-compatible server at TUSK_API_BASE: llama.cpp, vLLM,
LM Studio, Ollama's /v1, a proxy) go out here, as litellm would send them, until litellm is loaded:

    route(model, api_base)   where such a request goes, or None: another route, or a model litellm rewrites
                             requests for (OpenAI's o-series and gpt-5 take max_completion_tokens, no
                             temperature): those wait for litellm
    DirectClient.send(...)   the request: the body litellm sends for it (tests/test_direct.py compares the two),
                             the reply read as bot/llm/readable.py's transport reads it (bot/llm/shapes.py),
                             returned in the shape bot/llm/reply.py and bot/llm/streams.py read: a whole reply,
                             or an async iterator of chunks (Server-Sent Events)
    WireError                what went wrong, in the attributes bot/llm/translate.py and bot/llm/wire.py read
                             (status, body, headers, the chain of causes): the same Tusk errors as litellm's path

Retries, streaming, the usage meter and window learning are bot/llm/client.py's, the same on both paths.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from bot.llm.shapes import as_chunks, flatten_content
from bot.llm.wire import WEB_PAGE, NotAnApi, model_name, overflow_window

OPENAI_BASE = "https://api.openai.com/v1"
_REWRITTEN = re.compile(r"^(?:o\d|gpt-5|codex)", re.IGNORECASE)  # litellm's o-series / gpt-5 request rewrites
_BODY_KEYS = ("tools", "tool_choice", "max_tokens", "temperature", "stream", "stream_options")
# finish reasons as litellm maps them (litellm_core_utils/core_helpers.py); any other is "stop"
_FINISH = {"length": "length", "max_tokens": "length", "tool_calls": "tool_calls", "tool_use": "tool_calls",
           "function_call": "function_call", "content_filter": "content_filter", "content_filtered": "content_filter",
           "refusal": "content_filter", "sensitive": "content_filter"}
_THINK_FIRST = re.compile(r"<(?:think|thinking|budget:thinking)>(.*?)</(?:think|thinking|budget:thinking)>(.*)",
                          re.DOTALL)


def route(model: str, api_base: str | None) -> str | None:
    """The base URL `model`'s request goes to on the OpenAI wire, or None when it must wait for litellm."""
    if not model.startswith("openai/") or _REWRITTEN.match(model_name(model)):
        return None
    return api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or OPENAI_BASE


class WireError(Exception):
    """A failed request: `status_code` (None: no HTTP answer, or an error inside a stream), the server's
    `body`, and a `response` with its `headers` and `text`, where bot/llm/wire.py looks for them."""

    def __init__(self, message: str, status_code: int | None = None, body: str = "",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status_code, self.message, self.body = status_code, message, body
        self.response = SimpleNamespace(headers={k.lower(): v for k, v in (headers or {}).items()}, text=body)


def body_for(model: str, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body litellm sends for an `openai/` request: the model's name, the messages without keys
    whose value is None, and the options the OpenAI API takes (others are litellm's own)."""
    clean = [{k: v for k, v in m.items() if v is not None} for m in messages]
    return {"model": model_name(model), "messages": clean,
            **{k: kwargs[k] for k in _BODY_KEYS if kwargs.get(k) is not None}}


_AS_DICTS = frozenset({"thinking_blocks", "provider_specific_fields"})  # kept as litellm keeps them: dicts


def _ns(value: Any) -> Any:
    """JSON as attribute objects (what litellm's reply objects give `getattr`)."""
    if isinstance(value, dict):
        return SimpleNamespace(**{str(k): v if k in _AS_DICTS else _ns(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_ns(v) for v in value]
    return value


def _read(body: dict[str, Any], part: str) -> Any:
    """A chat completion (`part="message"`) or chunk (`"delta"`) as litellm hands it on: readable shapes,
    `reasoning` as `reasoning_content`, a leading `<think>` block of a whole reply split off as reasoning,
    finish reasons mapped."""
    flatten_content(body)
    body.setdefault("choices", [])
    for choice in body["choices"]:
        if not isinstance(choice, dict):
            continue
        if choice.get("finish_reason") is not None:
            choice["finish_reason"] = _FINISH.get(str(choice["finish_reason"]), "stop")
        message = choice.get(part)
        if not isinstance(message, dict):
            continue
        if part == "message" and message.get("tool_calls") and choice.get("finish_reason") == "stop":
            choice["finish_reason"] = "tool_calls"  # as litellm says of a whole reply with calls
        message.setdefault("content", None)  # what litellm's message objects always have
        message.setdefault("tool_calls", None)
        if message.get("reasoning_content") is None and isinstance(message.get("reasoning"), str):
            message["reasoning_content"] = message.pop("reasoning")
        text = message.get("content")
        if part == "message" and message.get("reasoning_content") is None and isinstance(text, str):
            if match := _THINK_FIRST.match(text):
                message["reasoning_content"], message["content"] = match.group(1), match.group(2)
    return _ns(body)


def counted_usage(messages: list[dict[str, Any]], reply: Any) -> Any:
    """The usage litellm gives a stream whose server sent none: its own count (cl100k; 3 tokens a message and
    1 a name, 3 to prime the reply; of the reply, its text and each call as JSON; litellm_core_utils/
    token_counter.py and streaming_chunk_builder_utils.py), so the ledger reads alike on both paths."""
    from memory.tokens import count_text

    prompt = 3
    for message in messages:
        prompt += 3
        for key, value in message.items():
            if isinstance(value, str):
                prompt += count_text(value) + (key == "name")
            elif key == "content" and isinstance(value, list):
                prompt += sum(count_text(p["text"]) for p in value if isinstance(p, dict)
                              and isinstance(p.get("text"), str))
            elif key == "tool_calls" and isinstance(value, list):  # their arguments only, as litellm counts
                prompt += sum(count_text(str(c.get("function", {}).get("arguments", ""))) for c in value
                              if isinstance(c, dict))
    completion = (reply.content or "") + "".join(
        json.dumps({"function": {"arguments": c.function.arguments, "name": c.function.name}, "id": c.id,
                    "type": "function"}, separators=(",", ":")) for c in reply.tool_calls or ())
    done = count_text(completion) if completion else 0
    return SimpleNamespace(prompt_tokens=prompt, completion_tokens=done, total_tokens=prompt + done)


class DirectClient:
    """The requests of one `LLM`. Each has an aiohttp session of its own, closed with it (a stream's when the
    stream ends): nothing outlives a request, nor the event loop that made it, and nothing needs closing."""

    def __init__(self, api_key: str | None) -> None:
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "none"

    def _session(self) -> Any:
        import aiohttp  # already loaded by `tusk run`'s HTTP side; a terminal chat pays for it here

        headers = {"Authorization": f"Bearer {self.api_key}", "User-Agent": "tusk-direct"}
        if organization := os.environ.get("OPENAI_ORGANIZATION"):
            headers["OpenAI-Organization"] = organization
        # no connection kept: closing it is how a cut-off request stops a local server's generation
        # (bot/llm/slots.py)
        return aiohttp.ClientSession(headers=headers, connector=aiohttp.TCPConnector(force_close=True))

    async def aclose(self) -> None:
        """Nothing to release (each request closes its own session)."""

    async def send(self, base: str, body: dict[str, Any], timeout: float) -> Any:
        """The reply (a whole chat completion), or for a streamed body an async iterator of its chunks."""
        import aiohttp
        from yarl import URL  # aiohttp's

        parsed = URL(base)  # the path joined before any query; a user and password in it are not sent
        url = parsed.with_user(None).with_path(parsed.path.rstrip("/") + "/chat/completions")
        limits = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
        http = self._session()
        resp = None
        try:
            try:
                resp = await http.post(url, json=body, timeout=limits)
            except aiohttp.ClientError as exc:
                raise WireError(f"Connection error: {type(exc).__name__}: {exc}") from exc
            kind = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if kind in ("text/html", "application/xhtml+xml") and resp.status in (200, 404):
                raise WireError(f"HTTP {resp.status}: {WEB_PAGE} ({kind})") from NotAnApi(WEB_PAGE)
            if resp.status != 200:
                text = await resp.text(errors="replace")
                raise WireError(f"HTTP {resp.status}: {text[:500]}", resp.status, text, dict(resp.headers))
            if body.get("stream") and kind == "text/event-stream":
                events = _events(http, resp)  # it closes both
                http = resp = None
                return events
            text = await resp.text(errors="replace")
        except aiohttp.ClientError as exc:
            raise WireError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            if resp is not None:
                resp.close()
            if http is not None:
                await http.close()
        try:
            whole = json.loads(text)
        except ValueError as exc:
            raise WireError(f"unreadable reply: {text[:200]!r}") from exc
        if not isinstance(whole, dict):
            raise WireError(f"unreadable reply: {text[:200]!r}")
        if whole.get("error"):  # an error object in a 200
            raise WireError(f"error in the reply: {json.dumps(whole['error'])[:300]}", body=text)
        if body.get("stream"):  # a server that ignored `stream`: its whole answer, as one stream
            return _chunks(as_chunks(whole))
        return _read(whole, "message")


async def _chunks(chunks: list[dict[str, Any]]) -> AsyncIterator[Any]:
    for chunk in chunks:
        yield _read(chunk, "delta")


async def _events(http: Any, resp: Any) -> AsyncIterator[Any]:
    """A Server-Sent Events body's chunks, until `data: [DONE]` or its end; an error event raises. The
    response and its session are closed when it ends, is closed, or is cut off."""
    import aiohttp

    data: list[str] = []
    try:
        async for raw in resp.content:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
                continue
            if line or not data:
                continue
            payload, data = "\n".join(data), []
            if payload.strip() == "[DONE]":
                return
            yield _event(payload)
        if data and (payload := "\n".join(data)).strip() != "[DONE]":
            yield _event(payload)
    except aiohttp.ClientError as exc:
        raise WireError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        resp.close()  # read to its end or not: the connection goes (a cut-off generation stops with it)
        await http.close()


def _event(payload: str) -> Any:
    try:
        chunk = json.loads(payload)
    except ValueError as exc:
        raise WireError(f"unreadable event: {payload[:200]!r}") from exc
    if not isinstance(chunk, dict):
        raise WireError(f"unreadable event: {payload[:200]!r}")
    if chunk.get("error"):
        raise _stream_error(chunk["error"], payload)
    return _read(chunk, "delta")


def _stream_error(error: Any, payload: str) -> WireError:
    """An error event inside a 200 stream, with the status litellm gives it: its `code` where that is an HTTP
    status (a proxy's 429), 400 where it says the prompt is over the window, else none (a broken stream)."""
    text = f"error in the stream: {json.dumps(error)[:300]}"
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
        return WireError(text, code, payload)
    window_error = WireError(text, 400, payload)
    return window_error if overflow_window(window_error) is not None else WireError(text, body=payload)
