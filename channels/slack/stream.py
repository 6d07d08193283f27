"""A Slack reply while it is written (bot/stream.py's `Draft`).

    in a thread (a channel mention with thread sessions)   Slack's chat streaming: slack_sdk's
        `chat_stream` helper (chat.startStream, chat.appendStream, chat.stopStream) with the asker
        as recipient; the text goes as Markdown, appended as it comes
    in a DM, or where the workspace refuses streaming        chat.postMessage, then chat.update
        (mrkdwn, 3,000 characters a message, as `send` splits it; new messages past that)

Streamed text can only grow: if the reply starts over (the model wrote a little, then called a
tool), the streamed message is stopped and deleted and a new one begins. A tool step's status is
shown only on the chat.update path (a stream takes text alone). One update a second keeps well
under the Web API's tiers; slack_sdk's retry handler waits out any 429.

Tusk's own words as the final text (`verbatim`: a failure's sentence after a tool step showed) replace
what was shown by a new message, posted as `send` posts them (escaped, `mrkdwn: false`).

A place that refuses every message (archived, deleted, the app not in it: api.GONE) stops the draft
quietly; `finish` then raises the one SlackError that says what to do.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError

from channels.slack.api import GONE, SlackError, error_code, failure
from channels.slack.events import Route
from channels.slack.format import split_for_slack

logger = logging.getLogger(__name__)

INTERVAL = 1.0  # seconds between updates
MAX_APPEND = 12_000  # characters of markdown_text per stream call (Slack's documented limit)
REFUSED = frozenset({"unknown_method", "not_allowed", "not_allowed_token_type", "missing_scope", "invalid_arguments",
                     "feature_not_enabled", "method_not_supported_for_channel_type"})


class SlackDraft:
    def __init__(self, client: Any, route: Route, team_id: str | None, user_id: str | None,
                 on_refused: Any = None) -> None:
        self.client = client  # AsyncWebClient
        self.route = route
        self.recipient = (team_id, user_id)
        self.streaming = bool(route.thread_ts and team_id and user_id)
        self.on_refused = on_refused  # called once if the workspace refuses chat streaming
        self.interval = INTERVAL
        self._stream: Any = None  # slack_sdk's AsyncChatStream while one is open
        self._stream_ts: str | None = None
        self._streamed = ""
        self._posted: list[str] = []  # chat.update path: the ts of each message so far
        self._texts: list[str] = []
        self.failed: SlackError | None = None  # the place refuses every message: nothing more is tried

    async def show(self, text: str) -> None:
        await self._quietly(self._show, text)

    async def status(self, text: str) -> None:
        if not self.streaming:
            await self._quietly(self._put_all, [text])

    async def _quietly(self, step: Any, arg: Any) -> None:
        """One update; a place that refuses every message ends the updates without an error (finish says it)."""
        if self.failed is not None:
            return
        try:
            await step(arg)
        except SlackApiError as exc:
            if error_code(exc) not in GONE:
                raise
            self.failed = failure("a reply", self.route.channel, exc)

    async def _show(self, text: str) -> None:
        if self.streaming:
            try:
                await self._stream_to(text)
                return
            except SlackApiError as exc:
                if self._stream_ts or error_code(exc) not in REFUSED:
                    raise
                logger.info("Slack refused chat streaming (%s); updating a message instead", error_code(exc))
                self.streaming, self._stream = False, None
                if self.on_refused is not None:
                    self.on_refused()
        await self._put_all(split_for_slack(text))

    async def finish(self, text: str, verbatim: bool = False) -> None:
        if self.failed is not None:
            raise self.failed
        try:
            await self._finish(text, verbatim)
        except SlackApiError as exc:
            raise failure("a reply", self.route.channel, exc) from exc

    async def _finish(self, text: str, verbatim: bool = False) -> None:
        """The final text: the stream ends on it, or it replaces the messages shown."""
        if verbatim:
            await self._replace_with_own(text)
            return
        if self.streaming and (self._stream is None or text.startswith(self._streamed)):
            await self._stream_to(text)
            if self._stream is not None:
                await self._stream.stop()
            return
        if self._stream is not None:  # the final text is not what was streamed: it replaces the message
            await self._stream.stop()
            self._posted, self._texts = [self._stream_ts or ""], [""]
        pieces = split_for_slack(text)
        await self._put_all(pieces)
        for ts in self._posted[len(pieces):]:
            await self.client.chat_delete(channel=self.route.channel, ts=ts)

    async def _replace_with_own(self, text: str) -> None:
        """Tusk's own words (a failure's sentence after a tool step showed) take the messages' place, posted as
        `send` posts them (escaped, `mrkdwn: false`, which chat.update does not take): the messages shown go."""
        if self._stream is not None:
            await self._stream.stop()
            self._posted = [self._stream_ts or ""]
        for ts in self._posted:
            if ts:
                await self.client.chat_delete(channel=self.route.channel, ts=ts)
        self._posted, self._texts, self._stream = [], [], None
        for piece in split_for_slack(text, verbatim=True):
            await self.client.chat_postMessage(channel=self.route.channel, thread_ts=self.route.thread_ts,
                                               text=piece, mrkdwn=False)

    async def _stream_to(self, text: str) -> None:
        """The stream shows `text`: the new part appended, or a new stream if the text started over."""
        if self._stream is not None and not text.startswith(self._streamed):
            await self._stream.stop()
            await self.client.chat_delete(channel=self.route.channel, ts=self._stream_ts)
            self._stream, self._stream_ts, self._streamed = None, None, ""
        if self._stream is None:
            team, user = self.recipient
            self._stream = await self.client.chat_stream(channel=self.route.channel, thread_ts=self.route.thread_ts,
                                                         recipient_team_id=team, recipient_user_id=user,
                                                         buffer_size=1)
        new = text[len(self._streamed):]
        for i in range(0, len(new), MAX_APPEND):
            response = await self._stream.append(markdown_text=new[i:i + MAX_APPEND])
            if response is not None and self._stream_ts is None:
                self._stream_ts = response.get("ts")
        self._streamed = text

    async def _put_all(self, pieces: list[str]) -> None:
        for i, piece in enumerate(pieces):
            if i >= len(self._posted):
                sent = await self.client.chat_postMessage(channel=self.route.channel, thread_ts=self.route.thread_ts,
                                                          text=piece)
                self._posted.append(sent["ts"])
                self._texts.append(piece)
            elif self._texts[i] != piece:
                await self.client.chat_update(channel=self.route.channel, ts=self._posted[i], text=piece)
                self._texts[i] = piece
