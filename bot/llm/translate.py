"""litellm's exceptions translated into Tusk's (bot/errors.py): what the caller may retry, and what it may not.

    a prompt over the window     ContextOverflow (with the window the server named, if it did)
    a web page, not the API      NotAModelServer
    tools refused                ToolsUnsupported
    the model unknown            ModelNotFound
    401 / 403                    LLMAuthFailed
    no connection at all         LLMUnreachable (connection refused, host not found, no route)
    the provider's filter        LLMFiltered
    429, 5xx, timeouts           LLMUnavailable (retried; `retry_after` from Retry-After or Google's RetryInfo)
    anything else                LLMRejected

What the servers' words mean is read in bot/llm/wire.py. The direct client's errors (bot/llm/direct.py's
`WireError`, the first requests while litellm loads) are read by the same rules: what litellm's exception
type says there, the HTTP status says here.
"""

from __future__ import annotations

from bot.errors import (ContextOverflow, LLMAuthFailed, LLMError, LLMFiltered, LLMRejected, LLMUnavailable,
                        LLMUnreachable, ModelNotFound, NotAModelServer, ToolsUnsupported)
from bot.llm.direct import WireError
from bot.llm.loader import litellm
from bot.llm.wire import model_missing, overflow_window, retry_delay, tools_refused, unreachable_reason, web_page

TRANSIENT_STATUS = frozenset({408, 409, 425, 429}) | frozenset(range(500, 600))


def translate(exc: Exception) -> LLMError:
    """Tusk's error for one of litellm's (or the server's, as litellm hands it on)."""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, WireError):
        overflow_type = auth_type = filter_type = transient_type = False
    else:
        lib = litellm()
        overflow_type = isinstance(exc, lib.ContextWindowExceededError)
        auth_type = isinstance(exc, lib.AuthenticationError)
        filter_type = isinstance(exc, lib.ContentPolicyViolationError)
        transient_type = isinstance(exc, (lib.Timeout, lib.APIConnectionError, lib.RateLimitError,
                                          lib.ServiceUnavailableError, lib.InternalServerError))
    text = f"{type(exc).__name__}: {str(exc)[:300]}"
    overflow = overflow_window(exc, overflow_type)
    if overflow is not None:
        return ContextOverflow(text, window=overflow or None)
    if web_page(exc, html_counts=status not in TRANSIENT_STATUS):  # a proxy's 502 page is an outage
        return NotAModelServer(text)
    if status in (400, 404, 500) and tools_refused(exc):
        return ToolsUnsupported(text)
    if status in (400, 404) and model_missing(exc):
        return ModelNotFound(text)
    if status in (401, 403) or auth_type:
        return LLMAuthFailed(text, status=status if isinstance(status, int) else None)
    if (reason := unreachable_reason(exc)) is not None:
        return LLMUnreachable(text, reason=reason)
    if filter_type:
        return LLMFiltered(text)
    if transient_type or status in TRANSIENT_STATUS or not isinstance(status, int):
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
    return retry_delay(exc)
