"""A reply read out, on Slack: the OGG/Opus file uploaded where the reply goes (files_upload_v2), which Slack
shows with its audio player; the reply's text as the upload's comment when it fits a message (3,000
characters of mrkdwn, as a reply's pieces), else after it as messages (bot/speech/replies.py).

The upload takes slack_sdk's three steps (files.getUploadURLExternal, the bytes to the URL it gives,
files.completeUploadExternal with the channel and thread) and the files:write scope; without it, or on
any refusal, the reply goes as text and the log names the scope or Slack's error.
"""

from __future__ import annotations

import asyncio

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from bot.events import SpokenAudio
from channels.slack.api import SlackError, failure, scope_hint
from channels.slack.events import Route
from channels.slack.format import LIMIT, mrkdwn_len, to_mrkdwn

FILE_NAME = "reply.ogg"
TITLE = "Spoken reply"
_ERRORS = (SlackApiError, SlackRequestError, aiohttp.ClientError, asyncio.TimeoutError)


def fits_caption(text: str) -> bool:
    return mrkdwn_len(to_mrkdwn(text)) <= LIMIT


async def send(client: AsyncWebClient, route: Route, audio: SpokenAudio, caption: str | None) -> None:
    """Upload the voice to the reply's place; SlackError (a DeliveryError) when Slack refuses it."""
    if route.response_url:
        raise SlackError("a slash command's answer takes no files")
    try:
        await client.files_upload_v2(channel=route.channel, thread_ts=route.thread_ts, file=audio.data,
                                     filename=FILE_NAME, title=TITLE,
                                     initial_comment=to_mrkdwn(caption) if caption else None)
    except _ERRORS as exc:
        error = failure("files_upload_v2", route.channel, exc)
        raise SlackError(f"{error}{scope_hint(exc, 'files:write')}", error.code) from exc
