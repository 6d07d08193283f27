"""Tusk's exceptions. Library errors are translated into these at the boundary that meets them.

    TuskError
    ├── ConfigError          settings missing or invalid; the message says what to set
    ├── StorageDown          the database (TUSK_DATABASE_URL) does not answer now; the message says where
    ├── BusClosed            a message arrived while shutting down
    ├── HomeBusy             another Tusk holds this home (bot/running.py); the message names it
    ├── RemoteTuskError      the Tusk running on this home did not answer as asked (its local API)
    ├── DeliveryError        a platform refused a reply or stayed unreachable after retries
    ├── LLMError             the model call failed after retries
    │   ├── LLMUnavailable   5xx, timeouts, connection errors, rate limits that outlast retries
    │   │   └── LLMUnreachable   no connection at all: refused, host not found, no route (TUSK_API_BASE)
    │   └── LLMRejected      the request itself was refused (auth, bad request)
    │       ├── LLMAuthFailed    401/403: the key is wrong, expired or lacks access (TUSK_API_KEY)
    │       ├── ContextOverflow  the prompt is over the model's real window (`window`: the size it named)
    │       ├── LLMFiltered      the provider's content filter refused (no choices, content_filter)
    │       ├── ToolsUnsupported the model or server takes no tools ("does not support tools")
    │       ├── ModelNotFound    the server does not serve the model named in TUSK_MODEL
    │       └── NotAModelServer  the address answers with a web page, not a model API (TUSK_API_BASE)
    ├── McpToolError         one MCP tool call failed (server down, timeout, crash, malformed reply)
    ├── SpeechError          a reply could not be read out (engine down, slow, refused; audio unreadable)
    ├── MediaRefused         a file Tusk will not take (over a size cap, a type it cannot read, corrupt)
    │       └── MediaUnreachable the platform did not hand the file over (network, HTTP error, login page)
    ├── WebError             web_fetch / web_search failed (HTTP error, timeout, unreadable page, search backend)
    │       └── WebRefused   the network guard refused a URL (inside address, scheme, port, credentials, robots.txt)
    └── SkillRefused         read_skill refused: no such skill here, or a file outside its folder (bot/skills/)

`LLMError.user_message` is the one sentence a chat user sees; details go to the log. `owner_message`
is what the owner's own channels (the terminal, the console and HTTP API) show instead: the cause
class and the way to check it (`tusk doctor`), still without secrets or server internals.
"""

from __future__ import annotations


class TuskError(Exception):
    """Base of every error Tusk raises on purpose."""


class ConfigError(TuskError):
    pass


class StorageDown(TuskError):
    pass


class BusClosed(TuskError):
    pass


class HomeBusy(TuskError):
    def __init__(self, message: str, holder: object = None) -> None:
        super().__init__(message)
        self.holder = holder  # bot/running.py's Holder: who has the home


class RemoteTuskError(TuskError):
    pass


class DeliveryError(TuskError):
    pass


DOCTOR_HINT = "`tusk doctor` checks the model settings."


class LLMError(TuskError):
    user_message = "The model is unavailable right now, try again in a minute."
    cause = "unavailable"  # the cause class the owner is told: unavailable, unreachable, auth, unknown-model, ...
    doctor_helps = True  # False where the settings are not the cause (window, filter): no `tusk doctor` hint

    @property
    def owner_message(self) -> str:
        """The wording for the owner's own channels: the user's sentence, then where to look."""
        return f"{self.user_message} {DOCTOR_HINT}" if self.doctor_helps else self.user_message


class LLMUnavailable(LLMError):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # seconds the provider asked us to wait, if it said


class LLMUnreachable(LLMUnavailable):
    """No connection could be made (refused, DNS, no route). `reason` is the short cause ("connection
    refused", "host not found"); `where` the server's address without credentials and `server` its kind
    ("Ollama", "the model server"), where bot/llm/client.py knows them."""

    cause = "unreachable"
    user_message = "I can't reach the model server right now; the operator can run `tusk doctor`."
    where: str | None = None
    server = "the model server"

    def __init__(self, message: str, reason: str = "no connection") -> None:
        super().__init__(message)
        self.reason = reason

    @property
    def owner_message(self) -> str:
        question = (f"is {self.server} running at {self.where}? Check TUSK_API_BASE." if self.where else
                    "is this machine online, and does the provider's address resolve?")
        return f"LLM failure (unreachable URL: {self.reason}): {question} {DOCTOR_HINT}"


class LLMRejected(LLMError):
    user_message = "The model refused this request; the operator can find the reason in Tusk's log."
    cause = "rejected"


class LLMAuthFailed(LLMRejected):
    """The provider refused the credentials (401) or their access (403); `status` says which."""

    cause = "auth"
    user_message = "The model provider refused Tusk's API key; the operator can run `tusk doctor`."

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def owner_message(self) -> str:
        if self.status == 403:
            what = "refused access (403): the key is valid but may not use this model or endpoint"
        else:
            what = f"refused the API key ({self.status or 401}): it is wrong, expired or revoked"
        return (f"LLM failure (wrong key): the model provider {what}. Check TUSK_API_KEY (or the provider's "
                f"usual key variable). {DOCTOR_HINT}")


class ContextOverflow(LLMRejected):
    doctor_helps = False
    learned = False  # set by the LLM boundary: the model's profile took a smaller window from it (bot/llm/profile.py)
    user_message = ("This conversation no longer fits in the model's window, even after condensing it. "
                    "Try /new to start afresh; your memory is kept.")

    def __init__(self, message: str, window: int | None = None) -> None:
        super().__init__(message)
        self.window = window  # the window the server named, if it did


class LLMFiltered(LLMRejected):
    doctor_helps = False
    user_message = "The model provider's content filter refused to answer that message."


class ToolsUnsupported(LLMRejected):
    doctor_helps = False
    learned = False  # set by the LLM boundary: the model's profile now offers it no tools (bot/llm/profile.py)
    user_message = "The model cannot use tools; I will answer without them."


class ModelNotFound(LLMRejected):
    cause = "unknown-model"
    user_message = "The model server does not know the configured model. The operator can run `tusk doctor`."
    model: str | None = None  # the name the server was asked for (set where it is known: bot/llm/client.py)
    served: tuple[str, ...] = ()  # what the server lists instead, if it lists anything

    @property
    def owner_message(self) -> str:
        named = f" {self.model!r}" if self.model else ""
        listing = f" It serves: {', '.join(self.served[:10])}." if self.served else ""
        return (f"LLM failure (unknown model): the model server does not know the model{named}.{listing} "
                "Set TUSK_MODEL to one it serves; `tusk doctor` lists them.")


class NotAModelServer(LLMRejected):
    """The address in TUSK_API_BASE answered a chat request with a web page (HTML) instead of the model API:
    a misconfigured base URL (a web server's front page, a login page, a path without `/v1`). `where` is
    the address without credentials, where bot/llm/client.py knows it."""

    cause = "not-a-model-server"
    user_message = ("The model server is misconfigured (it answered with a web page); "
                    "the operator can run `tusk doctor`.")
    where: str | None = None

    @property
    def owner_message(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return (f"LLM failure (misconfigured server): the address{at} answered with a web page, not a model API. "
                f"Check TUSK_API_BASE (OpenAI-compatible servers usually end in /v1). {DOCTOR_HINT}")


class McpToolError(TuskError):
    """A call to an MCP server's tool failed (not running, timed out, crashed, malformed reply). It costs
    that call only: the model sees the message as the tool's error result."""


class SpeechError(TuskError):
    """The speech engine failed: the reply goes out as text alone (bot/speech/replies.py)."""


class MediaRefused(TuskError):
    """A file that came with a message is not taken: over a cap, a type Tusk cannot read, corrupt, or
    not readable without a setting. `str(exc)` is the one sentence the user sees (it names the limit
    or the setting); nothing of the file is kept."""


class MediaUnreachable(MediaRefused):
    """A file could not be fetched from the platform (network error, an HTTP error, a login page where the
    file should be: a missing scope). `str(exc)` is the user's sentence; the cause goes to the log."""


class WebError(TuskError):
    pass


class WebRefused(WebError):
    pass


class SkillRefused(TuskError):
    """read_skill will not give this: a skill the chat does not have, or a path outside the skill's folder."""
