"""What real servers send, read before and beside litellm: window errors, list content, `<think>`.

- `overflow_window(exc)`: is this error a prompt over the window, and what window did the
  server name? Each server words it its own way (the fake in tests/fakes/fake_llm.py has
  each wording as its docs or code give it).
- `wants_readable_client(...)`: the `openai/` route with a base URL (vLLM, LM Studio, llama.cpp,
  a proxy) gets bot/llm/readable.py's client, which reads what those servers really send.
- `strip_think(text)`: `<think>...</think>` blocks never reach users or the session.
- `provider_base(model, api_base)`, `thinking_options(...)`: what Anthropic's Messages API and Gemini's
  generateContent need of a request that litellm does not see to (see the functions); `for_model(...)`
  keeps Gemini's thought signatures for Gemini; `retry_delay(exc)` reads a Google 429's RetryInfo.
- `web_page(exc)`: the server answered with a web page (HTML), not the API: a misconfigured base URL.
- `unreachable_reason(exc)`: no connection at all (refused, host not found, no route), read from
  the chain of causes litellm keeps; `public_url(url)`: an address fit to show (no credentials).
"""

from __future__ import annotations

import errno
import re
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"<think>.*\Z", re.DOTALL | re.IGNORECASE)

# (pattern, does its first group name the window?)
_OVERFLOW = (
    (re.compile(r"maximum context length is (\d+)", re.I), True),  # OpenAI, vLLM, llama-cpp-python
    (re.compile(r"context length of only (\d+)", re.I), True),  # LM Studio
    (re.compile(r"tokens? > (\d+) maximum", re.I), True),  # Anthropic "prompt is too long: N tokens > M maximum"
    (re.compile(r"maximum number of tokens allowed \((\d+)\)", re.I), True),  # Gemini "The input token count (N) ..."
    (re.compile(r'"n_ctx"\s*:\s*"?(\d+)', re.I), True),  # llama.cpp server's error body
    (re.compile(r"context_length_exceeded|exceed(?:s|ed)? (?:the )?(?:available |max(?:imum)? )?context"
                r"|prompt (?:is )?too long|context window|input is too long|too many tokens", re.I), False),
)


def _error_texts(exc: BaseException) -> str:
    """Everything an exception says of the server's answer (litellm keeps the body in different places)."""
    parts = [str(exc), str(getattr(exc, "message", "") or ""), str(getattr(exc, "body", "") or "")]
    response = getattr(exc, "response", None)
    try:
        parts.append(response.text if response is not None else "")
    except Exception:  # a streamed or closed response has no text to give
        pass
    return "\n".join(parts)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what caused it, and so on down the chain (litellm wraps the server's error a few layers
    down); each once, so a chain that loops ends."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        cause = cause.__cause__ or cause.__context__


def overflow_window(exc: BaseException, known_overflow: bool = False) -> int | None:
    """None if `exc` is not a context overflow; else the window the server named, or 0 if it named none."""
    status = getattr(exc, "status_code", None)
    if not known_overflow and status not in (400, 413, 422, 500):
        return None
    text = _error_texts(exc)
    for pattern, names_window in _OVERFLOW:
        if match := pattern.search(text):
            return int(match.group(1)) if names_window else 0
    return 0 if known_overflow else None


_TOOLS_REFUSED = re.compile(r"does not support tools|tools? (?:are|is) not supported|"
                            r"does not support (?:function|tool) call|tool_choice.*not supported|"
                            r"tool use is not supported", re.I)
_MODEL_MISSING = re.compile(r"model\W+\S+\W+not found|model .{0,80} does not exist|model_not_found|"
                            r"no such model|unknown model|model .{0,80} is not (?:loaded|available)|"
                            r"not_found_error\W+message\W+model: |"  # Anthropic: 404 "model: <name>"
                            r"models/\S+ is not found for API version", re.I)  # Gemini: 404 NOT_FOUND


class NotAnApi(Exception):
    """A chat request was answered with a web page: the base URL points at a web server, not a model API
    (raised by bot/llm/readable.py's transport, found in the chain of causes litellm keeps)."""


WEB_PAGE = "a web page where the chat completions API should be"  # NotAnApi's words (litellm keeps no chain)
_HTML = re.compile(r"<!doctype html|<html[\s>]|<head>|<body[\s>]", re.I)


def web_page(exc: BaseException, html_counts: bool = True) -> bool:
    """Whether the server answered with a web page where the model API should be: NotAnApi, or (where
    `html_counts`: not for a proxy's 502 page, an outage) HTML in the error."""
    if any(isinstance(cause, NotAnApi) for cause in _causes(exc)):
        return True
    text = _error_texts(exc)
    return WEB_PAGE in text or html_counts and bool(_HTML.search(text[:4000]))


_NO_ROUTE = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH})


def unreachable_reason(exc: BaseException) -> str | None:
    """Why no connection could be made ("connection refused", "host not found", "no route to host"), or
    None if `exc` is not that. litellm wraps the socket error a few layers down: the chain is walked."""
    for cause in _causes(exc):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "host not found"
        if isinstance(cause, OSError) and cause.errno in _NO_ROUTE:
            return "no route to host"
    return None


def public_url(url: str) -> str:
    """`url` without user, password, query or fragment: what a reply may show of the server's address."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


_RETRY_DELAY = re.compile(r"""["']retryDelay["']\s*:\s*["'](\d+(?:\.\d+)?)s["']""")


def retry_delay(exc: BaseException) -> float | None:
    """The seconds a Google 429's `RetryInfo` detail asks to wait (`"retryDelay": "37s"`), if it names any:
    Gemini sends no Retry-After header."""
    match = _RETRY_DELAY.search(_error_texts(exc))
    return float(match.group(1)) if match else None


def tools_refused(exc: BaseException) -> bool:
    """Ollama's 400 "<model> does not support tools" and its kin."""
    return bool(_TOOLS_REFUSED.search(_error_texts(exc)))


def model_missing(exc: BaseException) -> bool:
    """Ollama's "model 'x' not found, try pulling it first", vLLM's and OpenAI's "does not exist",
    Anthropic's 404 not_found_error "model: x", Gemini's 404 "models/x is not found for API version ..."."""
    return bool(_MODEL_MISSING.search(_error_texts(exc)))


def model_name(model: str) -> str:
    """The name the server knows: the litellm model string without its route."""
    return model.split("/", 1)[1] if "/" in model else model


def strip_think(text: str | None) -> str | None:
    """The text without `<think>` blocks (a block never closed runs to the end)."""
    if not text or "<think" not in text.lower():
        return text
    return _OPEN_THINK.sub("", _THINK.sub("", text)).strip()


def wants_readable_client(model: str, api_base: str | None) -> bool:
    """Whether litellm should get bot/llm/readable.py's client for `model`: the `openai/` route to a base URL."""
    return bool(api_base) and model.startswith("openai/")


def provider_base(model: str, api_base: str | None) -> str | None:
    """The base URL to hand litellm for `model`. litellm's anthropic/ route appends `/v1/messages` to it, so
    an OpenAI-style base (`https://api.anthropic.com/v1`, as the other providers' docs write it) would post to
    `/v1/v1/messages`, a 404: the `/v1` is dropped. Its gemini/ route appends `/models/<model>:generateContent`
    to it, so a bare server root (`https://generativelanguage.googleapis.com`) gets Google's `/v1beta`."""
    if api_base and model.startswith("anthropic/"):
        return api_base.rstrip("/").removesuffix("/v1") or api_base
    if api_base and model.startswith("gemini/") and urlsplit(api_base).path.strip("/") == "":
        return api_base.rstrip("/") + "/v1beta"
    return api_base


GEMINI_ROUTES = ("gemini/", "vertex_ai/", "vertex_ai_beta/")


def for_model(model: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` as `model`'s route takes them: a stored call's Gemini thought signature
    (`provider_specific_fields`, memory/wire.py) goes to Gemini only; no other provider is sent the key."""
    if model.startswith(GEMINI_ROUTES):
        return messages
    return [m if not any("provider_specific_fields" in c for c in m.get("tool_calls") or ()) else
            {**m, "tool_calls": [{k: v for k, v in c.items() if k != "provider_specific_fields"}
                                 for c in m["tool_calls"]]} for m in messages]


ANTHROPIC_MIN_THINKING = 1024  # Anthropic's least budget_tokens


def thinking_options(model: str, budget: int | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`thinking` (and the max_tokens it needs) for an anthropic/ request when TUSK_THINKING_BUDGET is set.
    Anthropic answers 400 to thinking with a forced tool_choice (consolidation forces save_memory), and
    wants max_tokens above budget_tokens (max_tokens counts the thinking): the reply's own bound is kept
    and the budget added to it."""
    if model.startswith(GEMINI_ROUTES):
        return gemini_thinking(model, budget, kwargs)
    if not budget or not model.startswith("anthropic/"):
        return {}
    if (kwargs.get("tool_choice") or {}) not in ({}, "auto", "none", {"type": "auto"}, {"type": "none"}):
        return {}
    out: dict[str, Any] = {"thinking": {"type": "enabled", "budget_tokens": max(budget, ANTHROPIC_MIN_THINKING)}}
    if kwargs.get("max_tokens"):
        out["max_tokens"] = kwargs["max_tokens"] + out["thinking"]["budget_tokens"]
    return out


GEMINI_THINKING_ROOM = 8192  # tokens a Gemini 2.5 / 3 model may think before it answers, when no budget is set
GEMINI_MAX_OUTPUT = 65536  # the most these models write in one reply (thoughts included)
_GEMINI_VERSION = re.compile(r"gemini-(\d+)")


def gemini_thinking(model: str, budget: int | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Gemini 2.5 and 3 think by default, and their thoughts count in maxOutputTokens: a reply bound of
    1,024 can be spent thinking, leaving an empty reply cut at MAX_TOKENS. The bound is sent with room to
    think added (TUSK_THINKING_BUDGET, else GEMINI_THINKING_ROOM). The budget itself goes as litellm's
    `thinking` (thinkingBudget) to 2.5 models only: Gemini 3 sets thinking by level, and litellm drops a
    budget for it with a warning each request."""
    out: dict[str, Any] = {}
    if kwargs.get("max_tokens"):
        out["max_tokens"] = min(GEMINI_MAX_OUTPUT, kwargs["max_tokens"] + (budget or GEMINI_THINKING_ROOM))
    version = _GEMINI_VERSION.search(model)
    if budget and version is not None and int(version.group(1)) < 3:
        out["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return out
