"""Who is who on Slack: users.info answers (a display name, workspace admin status), cached.

    people = People(client)
    await people.sender("U123")                         -> Sender(name="ann", is_admin=False)
    await people.named("ask <@U123> and <@U456|bob>")   -> "ask @ann and @bob"

An unknown user, or users.info failing (no users:read scope, a Slack Connect user Slack will not
describe, an outage), is a nameless non-admin, logged once per lookup; the message goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError

from channels.slack.api import error_code, scope_hint
from channels.slack.events import Sender, sender_of
from channels.slack.format import name_mentions, unnamed_mentions

logger = logging.getLogger(__name__)

USER_TTL = 600.0  # seconds a users.info answer (name, admin) is trusted
MAX_NAMED = 20  # user mentions named per message (each may cost a users.info call)
MAX_CACHED = 1000


class People:
    def __init__(self, client: Any) -> None:
        self.client = client  # AsyncWebClient
        self._cache: dict[str, tuple[float, Sender]] = {}  # user id -> (valid until, sender)

    async def sender(self, user_id: str) -> Sender:
        """Name and admin status from users.info (cached); an unknown user is a nameless non-admin."""
        now = time.monotonic()
        cached = self._cache.get(user_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        found = Sender()
        try:
            found = sender_of((await self.client.users_info(user=user_id))["user"])
        except (SlackApiError, aiohttp.ClientError, asyncio.TimeoutError) as exc:
            logger.warning("users.info for %s failed (%s): taken as a nameless non-admin%s",
                           user_id, error_code(exc), scope_hint(exc, "users:read"))
        if len(self._cache) > MAX_CACHED:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        self._cache[user_id] = (now + USER_TTL, found)
        return found

    async def named(self, text: str) -> str:
        """`<@U123>` mentions as `@name` (at most MAX_NAMED looked up a message; the others by their id)."""
        ids = unnamed_mentions(text)[:MAX_NAMED]
        found = await asyncio.gather(*(self.sender(user_id) for user_id in ids))
        return name_mentions(text, {user_id: s.name for user_id, s in zip(ids, found) if s.name})
