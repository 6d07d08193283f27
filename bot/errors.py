"""Tusk's exceptions. Library errors are translated into these at the boundary that meets them.

    TuskError
    ├── ConfigError          settings missing or invalid; the message says what to set
    ├── BusClosed            a message arrived while shutting down
    ├── DeliveryError        a platform refused a reply or stayed unreachable after retries
    ├── LLMError             the model call failed after retries
    │   ├── LLMUnavailable   5xx, timeouts, connection errors, rate limits that outlast retries
    │   └── LLMRejected      the request itself was refused (auth, bad request)
    │       ├── ContextOverflow  the prompt is over the model's real window (`window`: the size it named)
    │       ├── LLMFiltered      the provider's content filter refused (no choices, content_filter)
    │       ├── ToolsUnsupported the model or server takes no tools ("does not support tools")
    │       └── ModelNotFound    the server does not serve the model named in TUSK_MODEL
    ├── McpToolError         one MCP tool call failed (server down, timeout, crash, malformed reply)
    └── MediaRefused         a file Tusk will not take (over a size cap, a type it cannot read, corrupt)
            └── MediaUnreachable the platform did not hand the file over (network, HTTP error, login page)

`LLMError.user_message` is the one sentence a chat user sees; details go to the log.
"""

from __future__ import annotations


class TuskError(Exception):
    """Base of every error Tusk raises on purpose."""


class ConfigError(TuskError):
    pass


class BusClosed(TuskError):
    pass


class DeliveryError(TuskError):
    pass


class LLMError(TuskError):
    user_message = "The model is unavailable right now, try again in a minute."


class LLMUnavailable(LLMError):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # seconds the provider asked us to wait, if it said


class LLMRejected(LLMError):
    user_message = "The model refused this request; the operator can find the reason in Tusk's log."


class ContextOverflow(LLMRejected):
    user_message = ("This conversation no longer fits in the model's window, even after condensing it. "
                    "Try /new to start afresh; your memory is kept.")

    def __init__(self, message: str, window: int | None = None) -> None:
        super().__init__(message)
        self.window = window  # the window the server named, if it did


class LLMFiltered(LLMRejected):
    user_message = "The model provider's content filter refused to answer that message."


class ToolsUnsupported(LLMRejected):
    user_message = "The model cannot use tools; I will answer without them."


class ModelNotFound(LLMRejected):
    user_message = "The model server does not know the configured model. The operator can run `tusk doctor`."


class McpToolError(TuskError):
    """A call to an MCP server's tool failed (not running, timed out, crashed, malformed reply). It costs
    that call only: the model sees the message as the tool's error result."""


class MediaRefused(TuskError):
    """A file that came with a message is not taken: over a cap, a type Tusk cannot read, corrupt, or
    not readable without a setting. `str(exc)` is the one sentence the user sees (it names the limit
    or the setting); nothing of the file is kept."""


class MediaUnreachable(MediaRefused):
    """A file could not be fetched from the platform (network error, an HTTP error, a login page where the
    file should be: a missing scope). `str(exc)` is the user's sentence; the cause goes to the log."""
