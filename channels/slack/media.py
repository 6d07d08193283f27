"""The files of a Slack message event (`file_share`, or an `app_mention` with files), as `Remote`s.

Each file is fetched from its `url_private_download` with `Authorization: Bearer <bot token>`; the
token goes only to Slack's own hosts (`*.slack.com`) or to SLACK_API_URL's domain (GovSlack, the tests),
never to a host named by a payload otherwise. Without the `files:read` scope Slack answers with its
HTML sign-in page instead of the file: that is refused with a reply naming the scope. A voice or video
clip recorded in Slack (`subtype` slack_audio / slack_video) is kind voice. The file id is the source id.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from bot.errors import MediaUnreachable
from channels.media_in import UNREACHABLE, MediaIntake, Remote

logger = logging.getLogger(__name__)

SCOPE = "files:read"
NO_SCOPE = (f"Slack sent its sign-in page instead of the file: this app lacks the {SCOPE} scope. "
            f"Ask the workspace admin to add {SCOPE} (OAuth & Permissions -> Bot Token Scopes) and reinstall the app.")
CLIPS = frozenset({"slack_audio", "slack_video"})


def token_may_go_to(url: str, api_url: str) -> bool:
    """Is `url` on Slack's hosts or SLACK_API_URL's domain (GovSlack: slack-gov.com), where the bot token may go?"""
    host = (urlsplit(url).hostname or "").lower()
    domains = {"slack.com", (urlsplit(api_url).hostname or "").lower()} - {""}
    return any(host == domain or host.endswith(f".{domain}") for domain in domains)


def files_of(event: dict[str, Any], intake: MediaIntake, token: str, api_url: str) -> list[Remote]:
    """The files an event carries (Slack's file objects in `files`)."""
    found = []
    for file in event.get("files") or []:
        if not isinstance(file, dict) or not file.get("id"):
            continue
        name = file.get("name") or file.get("title") or "file"
        duration = file.get("duration_ms")
        found.append(Remote(str(file["id"]), name, file.get("mimetype") or "application/octet-stream",
                            functools.partial(_download, file, intake, token, api_url),
                            kind="voice" if file.get("subtype") in CLIPS else None,
                            size=file.get("size") if isinstance(file.get("size"), int) else None,
                            duration=duration / 1000 if isinstance(duration, (int, float)) else None))
    return found


async def _download(file: dict[str, Any], intake: MediaIntake, token: str, api_url: str) -> AsyncIterator[bytes]:
    url = file.get("url_private_download") or file.get("url_private")
    if not url or file.get("mode") in ("tombstone", "hidden_by_limit") or file.get("file_access") == "access_denied":
        raise MediaUnreachable(UNREACHABLE.format(platform="Slack"))
    if not token_may_go_to(url, api_url):
        logger.warning("a Slack file is on %s: the bot token is not sent there", urlsplit(url).hostname)
        raise MediaUnreachable(UNREACHABLE.format(platform="Slack"))
    login_page = None if str(file.get("mimetype", "")).startswith("text/html") else NO_SCOPE
    async for chunk in intake.stream(url, headers={"Authorization": f"Bearer {token}"}, login_page=login_page):
        yield chunk
