"""The LLM boundary: litellm in, Tusk's own types and errors out.

`LLM.complete` sends one chat request, retrying transient failures (429, 5xx, timeouts,
connection errors, unreadable replies) with exponential backoff that honours
`Retry-After`, then each fallback model in turn. litellm's exceptions never leave this
module: they become `LLMUnavailable` or `LLMRejected` (bot/errors.py).

litellm is imported on first use: the import costs seconds, and without
`LITELLM_LOCAL_MODEL_COST_MAP` it would block on a network fetch of a price list.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from bot import logs
from bot.errors import LLMError, LLMRejected, LLMUnavailable

logger = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 409, 425, 429}) | frozenset(range(500, 600))


@functools.cache
def litellm() -> ModuleType:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm as lib

    lib.suppress_debug_info = True
    lib.telemetry = False
    lib.drop_params = True  # a provider that lacks a parameter (e.g. tool_choice) gets it dropped, not an error
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return lib


def model_window(model: str) -> int | None:
    """The model's input window from litellm's bundled model list, if it knows the model."""
    try:
        info = litellm().get_model_info(model)
    except Exception:  # litellm raises plain Exception for unknown models
        return None
    return info.get("max_input_tokens") or info.get("max_tokens") or None


@dataclass(frozen=True, slots=True)
class LLMSettings:
    model: str
    api_base: str | None = None
    api_key: str | None = None  # None: the provider's usual variable (OPENAI_API_KEY, ...)
    fallbacks: tuple[str, ...] = ()
    timeout: float = 120.0
    retries: int = 3  # extra attempts per model after the first
    backoff: float = 1.0  # first retry delay in seconds, doubled each time
    max_backoff: float = 60.0
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text as the model wrote it; validated by the tool box

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class LLMReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLM:
    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        tool_choice: str | dict[str, Any] | None = None,
        model: str | None = None,
    ) -> LLMReply:
        """One reply for `messages`; raises LLMUnavailable / LLMRejected when none can be had."""
        models = (model or self.settings.model, *self.settings.fallbacks)
        error: LLMError | None = None
        for name in models:
            try:
                return await self._with_retries(name, messages, tools, tool_choice)
            except LLMUnavailable as exc:
                error = exc
                logger.warning("model %s unavailable: %s", name, exc)
        assert error is not None
        raise error

    async def _with_retries(self, model: str, messages, tools, tool_choice) -> LLMReply:
        s = self.settings
        for attempt in range(s.retries + 1):
            try:
                return await self._once(model, messages, tools, tool_choice)
            except LLMUnavailable as exc:
                if attempt == s.retries:
                    raise
                delay = min(s.max_backoff, exc.retry_after or s.backoff * 2**attempt)
                logger.info("LLM attempt %d failed (%s); retrying in %.1fs", attempt + 1, exc, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _once(self, model: str, messages, tools, tool_choice) -> LLMReply:
        lib = litellm()
        s = self.settings
        kwargs: dict[str, Any] = {"timeout": s.timeout, "num_retries": 0, "max_retries": 0}
        for key, value in (("api_base", s.api_base), ("api_key", s.api_key), ("max_tokens", s.max_tokens),
                           ("tools", tools or None), ("tool_choice", tool_choice if tools else None)):
            if value is not None:
                kwargs[key] = value
        started = time.monotonic()
        try:
            response = await lib.acompletion(model=model, messages=messages, **kwargs)
        except Exception as exc:  # litellm raises many types; all are translated here
            raise _translate(exc) from exc
        try:
            reply = _parse(response, model)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise LLMUnavailable(f"unreadable reply from {model}: {exc!r}") from exc
        if (stats := logs.current_stats()) is not None:
            stats.add_call(reply.prompt_tokens, reply.completion_tokens, (time.monotonic() - started) * 1000)
        return reply


def _translate(exc: Exception) -> LLMError:
    status = getattr(exc, "status_code", None)
    lib = litellm()
    transient = (lib.Timeout, lib.APIConnectionError, lib.RateLimitError, lib.ServiceUnavailableError,
                 lib.InternalServerError)
    text = f"{type(exc).__name__}: {str(exc)[:300]}"
    if isinstance(exc, transient) or status in TRANSIENT_STATUS or not isinstance(status, int):
        return LLMUnavailable(text, retry_after=_retry_after(exc))
    return LLMRejected(text)


def _retry_after(exc: Exception) -> float | None:
    for headers in (getattr(getattr(exc, "response", None), "headers", None),
                    getattr(exc, "litellm_response_headers", None)):
        try:
            value = headers.get("retry-after") if headers is not None else None
            if value is not None:
                return max(0.0, float(value))
        except (TypeError, ValueError, AttributeError):
            continue
    return None


def _parse(response: Any, model: str) -> LLMReply:
    message = response.choices[0].message
    calls = tuple(
        ToolCall(id=str(c.id), name=str(c.function.name), arguments=c.function.arguments or "{}")
        for c in (message.tool_calls or ())
    )
    usage = getattr(response, "usage", None)
    return LLMReply(
        content=message.content if isinstance(message.content, str) else None,
        tool_calls=calls,
        model=getattr(response, "model", None) or model,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
    )
