"""getUpdates answers sieved before python-telegram-bot reads them: one update it cannot parse never stalls polling.

PTB parses a getUpdates answer whole (`Update.de_list`); one update it cannot read (a field of the wrong type,
a message without a date) fails the whole batch, the offset is never moved past it, and the same batch is
fetched again and again: every update after it is lost. `SievingRequest` is the getUpdates request PTB is
built with (`ApplicationBuilder.get_updates_request`, PTB's documented seam): it checks each update of an
answer on its own and puts a bare `{"update_id": n}` in the place of one that does not parse, so PTB
confirms it (the offset moves on) and the channel skips it. The skip is logged once per update, with its
kinds and the parser's error, never its content (message text stays out of the logs).

Webhook mode has the same seam one level down: PTB's webhook handler answers an update it cannot parse with
400 (so Telegram delivers it again and again) and logs the whole body, message text included, as CRITICAL.
`SievingServer` is the tornado HTTPServer PTB's webhook runs on (channels/telegram/__init__.py configures it):
each request body that is an update goes through `sieve` before the handler reads it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from telegram import Update
from telegram.request import HTTPXRequest, RequestData
from tornado import httputil
from tornado.httpserver import HTTPServer

logger = logging.getLogger(__name__)


def sieve(updates: list[Any]) -> list[Any]:
    """`updates` with each one PTB cannot parse replaced by its bare update_id (dropped if it has none)."""
    kept = []
    for update in updates:
        try:
            Update.de_json(update, None)
        except Exception as exc:  # any parse failure: PTB raises whatever the bad field makes it raise
            update_id = update.get("update_id") if isinstance(update, dict) else None
            kinds = sorted(k for k in update if k != "update_id") if isinstance(update, dict) else []
            logger.warning("skipping a Telegram update Tusk cannot read (update %s, %s): %s: %s", update_id,
                           ", ".join(kinds) or "no content", type(exc).__name__, exc)
            if type(update_id) is int:  # noqa: E721 (bool is no id)
                kept.append({"update_id": update_id})
            continue
        kept.append(update)
    return kept


class SievingRequest(HTTPXRequest):
    """PTB's HTTPX request, whose getUpdates answers go through `sieve` before PTB parses them."""

    async def do_request(self, url: str, method: str, request_data: RequestData | None = None,
                         *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        status, payload = await super().do_request(url, method, request_data, *args, **kwargs)
        if not url.rstrip("/").lower().endswith("/getupdates") or status != 200:
            return status, payload
        try:
            answer = json.loads(payload)
            result = answer["result"]
        except (ValueError, KeyError, TypeError):
            return status, payload  # PTB reports what is wrong with the answer as a whole
        if not isinstance(result, list):
            return status, payload
        sieved = sieve(result)
        if sieved == result:
            return status, payload
        return status, json.dumps({**answer, "result": sieved}).encode()


def sieve_body(body: bytes) -> bytes:
    """A webhook request's body, with the update replaced by its bare update_id if PTB cannot parse it."""
    try:
        update = json.loads(body)
    except ValueError:
        return body  # not JSON: PTB's handler refuses it as it does
    if not isinstance(update, dict) or "update_id" not in update:
        return body
    (kept,) = sieve([update]) or [None]
    return body if kept is update else json.dumps(kept).encode()


class _SievedRequest(httputil.HTTPMessageDelegate):
    """A request whose body is gathered, sieved, then handed to the handler whole (bodies are capped:
    WEBHOOK_MAX_BODY)."""

    def __init__(self, inner: httputil.HTTPMessageDelegate) -> None:
        self.inner = inner
        self.chunks: list[bytes] = []

    def headers_received(self, start_line: Any, headers: httputil.HTTPHeaders) -> Any:
        return self.inner.headers_received(start_line, headers)

    def data_received(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    def finish(self) -> None:
        if self.chunks:
            self.inner.data_received(sieve_body(b"".join(self.chunks)))
        self.inner.finish()

    def on_connection_close(self) -> None:
        self.inner.on_connection_close()


class SievingServer(HTTPServer):
    """tornado's HTTPServer, each request's body sieved (`sieve_body`) before PTB's webhook handler parses it."""

    def start_request(self, server_conn: object, request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        return _SievedRequest(super().start_request(server_conn, request_conn))
