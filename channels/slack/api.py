"""Slack Web API answers that are not Slack's: reading an error whatever its body, and retrying 5xx.

A proxy or load balancer in front of the API (or Slack itself in an outage) can answer with an
HTML page or plain text instead of Slack's JSON; slack_sdk then raises `SlackApiError` with a text
body, or with the raw aiohttp response. Nothing here assumes JSON.

Errors Slack sends as `ok: false`: `ratelimited` (HTTP 429 + Retry-After) and 5xx are retried by the
client's handlers, as is a connection that failed; the others are final and become one `SlackError` that
says what to do (`failure`). A call that posts (`POSTING`: a message, a piece of a stream) is not sent
again after a 5xx or a connection lost mid-call: Slack may have carried it out, and a reply must never
show twice; only a connection that never opened (and a 429, which Slack did not carry out) is retried.

    channel_not_found / not_in_channel   invite the app to the channel
    is_archived                          unarchive the channel
    msg_too_long                         (send retries in smaller pieces first)
    invalid_auth / token_revoked / ...   reinstall the app, update SLACK_BOT_TOKEN
"""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from bot.errors import DeliveryError

logger = logging.getLogger(__name__)

class _Quiet(logging.Filter):
    """Drops bolt's start-up warning about SLACK_BOT_TOKEN in the environment: we pass a configured client."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("As you gave `client` as well")


# slack_sdk and slack-bolt log whole payloads (message text) at DEBUG: they log through this one,
# which bot/logs.py caps at INFO (and at the configured level when that is higher)
library_log = logging.getLogger("channels.slack.library")
library_log.addFilter(_Quiet())

GONE = frozenset({"channel_not_found", "not_in_channel", "is_archived"})  # the place refuses every message
_INVITE = "invite the app to that channel (/invite @ the app's name in it)"
ADVICE = {
    "channel_not_found": f"the channel was deleted, or is private and the app is not in it: {_INVITE}",
    "not_in_channel": f"the app is not a member of the channel: {_INVITE}",
    "is_archived": "the channel is archived: unarchive it to talk with Tusk there",
    "msg_too_long": "Slack found the message too long even in small pieces",
    "ratelimited": "Slack still rate-limited after the waits it asked for: the reply was not posted",
    "invalid_auth": "reinstall the Slack app and update SLACK_BOT_TOKEN",
    "token_revoked": "the app's token was revoked: reinstall the Slack app and update SLACK_BOT_TOKEN",
    "account_inactive": "the app was uninstalled: reinstall it and update SLACK_BOT_TOKEN",
}


class SlackError(DeliveryError):
    """A Slack Web API call failed (the message names the method, Slack's error code and what to do)."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


def failure(method: str, where: str, exc: BaseException) -> SlackError:
    """The SlackError for a failed call, naming Slack's error code and the fix if there is one (never the text)."""
    code = error_code(exc)
    advice = ADVICE.get(code)
    return SlackError(f"{method} to {where} failed: {code}" + (f" ({advice})" if advice else ""), code)


def error_code(exc: BaseException) -> str:
    """Slack's error code, else the HTTP status: a proxy's HTML page carries no JSON to read a code from
    (slack_sdk then hands over a text body, or the raw aiohttp response)."""
    if isinstance(exc, SlackApiError):
        data = getattr(exc.response, "data", None)
        if isinstance(data, dict) and data.get("error"):
            return str(data["error"])
        status = getattr(exc.response, "status_code", None) or getattr(exc.response, "status", None)
        return f"HTTP {status}, not a Slack answer" if status else "an unreadable answer"
    return type(exc).__name__


def _status(response: HttpResponse | None, error: Exception | None) -> int:
    if response is not None:
        return response.status_code
    return getattr(getattr(error, "response", None), "status", 0) if isinstance(error, SlackApiError) else 0


POSTING = frozenset({"chat.postMessage", "chat.postEphemeral", "chat.startStream", "chat.appendStream",
                     "chat.stopStream"})


def _method(request: HttpRequest) -> str:
    return request.url.rsplit("/", 1)[-1].split("?", 1)[0]


class ConnectionRetry(AsyncRetryHandler):
    """A connection that failed is retried: always when it never opened, and for calls that post nothing also
    when it broke mid-call (for those that post, Slack may have carried the first one out)."""

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None, error: Exception | None = None) -> bool:
        if isinstance(error, aiohttp.ClientConnectorError):  # the request never left
            return True
        lost = isinstance(error, (aiohttp.ServerConnectionError, aiohttp.ClientOSError))
        if lost and _method(request) in POSTING:
            logger.warning("the connection to Slack broke during %s: not sent again (it may have arrived; a reply "
                           "must never show twice)", _method(request))
            return False
        return lost


class ServerErrorRetry(AsyncRetryHandler):
    """5xx answers are retried with backoff, whatever their body: Slack's JSON, or a proxy's HTML 502 page
    (which slack_sdk reports as an error without a response when the proxy calls it JSON); not for a call
    that posts (`POSTING`), which Slack may have carried out all the same."""

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None, error: Exception | None = None) -> bool:
        status = _status(response, error)
        if status < 500:
            return False
        if _method(request) in POSTING:
            logger.warning("Slack answered HTTP %d to %s: not sent again (it may have been posted; a reply must "
                           "never show twice)", status, _method(request))
            return False
        logger.warning("Slack answered HTTP %d to %s (attempt %d); retrying", status,
                       request.url.rsplit("/", 1)[-1], state.current_attempt + 1)
        return True


def scope_hint(exc: BaseException, scope: str) -> str:
    return f"; add the {scope} scope to the Slack app" if error_code(exc) == "missing_scope" else ""
