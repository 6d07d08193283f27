"""getUpdates answers sieved before python-telegram-bot reads them: one update it cannot parse never stalls polling.

PTB parses a getUpdates answer whole (`Update.de_list`); one update it cannot read (a field of the wrong type,
a message without a date) fails the whole batch, the offset is never moved past it, and the same batch is
fetched again and again: every update after it is lost. `SievingRequest` is the getUpdates request PTB is
built with (`ApplicationBuilder.get_updates_request`, PTB's documented seam): it checks each update of an
answer on its own and puts a bare `{"update_id": n}` in the place of one that does not parse, so PTB
confirms it (the offset moves on) and the channel skips it. The skip is logged once per update, with its
kinds and the parser's error, never its content (message text stays out of the logs).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from telegram import Update
from telegram.request import HTTPXRequest, RequestData

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
