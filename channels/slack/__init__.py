"""Slack through slack-bolt's AsyncApp: Socket Mode (SLACK_APP_TOKEN) or HTTP events (SLACK_SIGNING_SECRET).

    DM (`message`, channel_type im)     every message is a turn       key D…              reply in the DM
    channel mention (`app_mention`)     the bot's mention stripped    key C…-<thread ts>  reply in that thread
    /memory /forget /new /status /help  any other name: `/tusk <sub>` key = the channel   reply ephemeral

With SLACK_THREAD_SESSIONS=false a channel is one chat (key C…) and replies go where the
mention was. /stop (bot/stop.py) comes as a mention in the reply's thread, or as `/tusk stop` (or
`/stop`) in the channel: Slack gives slash commands no thread, so in a channel with thread sessions it
stops the reply its sender asked for there, the latest if several are running.
Bot messages, edits, deletions and other subtypes are not answered (the list: channels/slack/events.py);
a retried or doubled event (same channel and ts) is answered once, also across a restart (bot/dedupe.py).
Mentions of people reach the model as `@name` (channels/slack/people.py); Web API errors are
read in channels/slack/api.py. An hourglass reaction marks a message while its turn runs.
Messages take the intake chain (channels/intake.py); senders outside SLACK_ALLOW_FROM cost no API or LLM
call. `send` finds a reply's place from the inbound message it answers, else from the chat key
alone (`C123` or `C123-1700000000.000100`), so reminders work with no message to answer.
Payload mapping: channels/slack/events.py; Markdown to mrkdwn: channels/slack/format.py; replies read out
are uploaded as audio files: channels/slack/voice.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import re
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot import dedupe
from bot.errors import ConfigError
from bot.events import ChatKey, InboundMessage, OutboundMessage, OutboundVoice
from channels.slack import media as slack_media
from channels.slack import voice as slack_voice
from channels.base import Access, Done, Publish, tell
from channels.intake import Arrival, Intake
from channels.media_in import Remote
from channels.slack.api import (GONE, ConnectionRetry, ServerErrorRetry, SlackError, error_code as _error_code, failure,
                                library_log as _library_log, scope_hint as _scope_hint)
from channels.slack.events import Route, Seen, command_to_inbound, route_of, to_inbound
from channels.slack.format import LIMIT, escape, escaped_len, mrkdwn_len, to_mrkdwn
from channels.slack.people import People
from channels.split import split_message
from channels.slack.stream import SlackDraft
from memory.media import MediaStore

logger = logging.getLogger(__name__)


EVENTS_PATH = "/slack/events"
THINKING = "hourglass_flowing_sand"
MIN_PIECE = 500  # characters: below this a piece Slack calls too long is not cut again
CONNECT_TIMEOUT = 30.0
_NET_ERRORS = (SlackApiError, aiohttp.ClientError, asyncio.TimeoutError)


@dataclass(frozen=True, slots=True)
class SlackSettings:
    bot_token: str
    app_token: str | None = None
    signing_secret: str | None = None
    api_url: str = "https://slack.com/api/"
    allow_from: frozenset[str] = frozenset()
    admins: frozenset[str] = frozenset()
    thread_sessions: bool = True
    http_host: str = "127.0.0.1"
    http_port: int = 3000


class SlackChannel:
    """With `receive=False` the channel only sends (a worker of a cluster): `start` makes the Web API client and
    signs in (auth.test: the token, the team for streamed replies) and nothing else: no Socket Mode connection,
    no HTTP events route. Replies, drafts (chat streaming, chat.update) and voice go by the chat key and the
    ReplyRef alone, as from a receiving channel."""

    name = "slack"

    def __init__(self, settings: SlackSettings, publish: Publish, menu: Iterable[tuple[str, str]] = (),
                 access: Access = Access(), media: MediaStore | None = None,
                 seen: dedupe.Seen | None = None, receive: bool = True) -> None:
        self.settings = settings
        self.receive = receive
        self._commands = frozenset(name for name, _ in menu)
        allow = access.allow_list(settings.allow_from, "SLACK_ALLOW_FROM", self.name)
        self._intake = Intake("Slack", self, allow, publish, media, seen, self._tell)  # the way in
        self._running: dict[int, InboundMessage] = {}  # InboundMessage.id -> it, while its turn runs (/stop's thread)
        self.team_id: str | None = None  # from auth.test
        self._streaming = True  # False once the workspace refused chat streaming
        self._seen = Seen()  # events of one message (a retry, `message` and `app_mention`), in this process
        self._people: People | None = None  # users.info, cached: once started
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self.bot_user_id: str | None = None
        self.port: int | None = None  # the HTTP events port once started (HTTP mode)
        self.voice = self  # replies read out are uploaded as audio files (send_voice)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            self._client = self._web_client()
            self._people = People(self._client)
            await self._sign_in(self._client)
            if not self.receive:
                return
            bolt = self._bolt(self._client)
            if self.settings.app_token:
                await self._connect(bolt, self.settings.app_token)
            else:
                await self._serve(bolt)
        except BaseException:
            await self.stop()
            raise

    def _web_client(self) -> AsyncWebClient:
        url = self.settings.api_url if self.settings.api_url.endswith("/") else self.settings.api_url + "/"
        self._session = aiohttp.ClientSession()
        retries = [ConnectionRetry(max_retry_count=1), AsyncRateLimitErrorRetryHandler(max_retry_count=2),
                   ServerErrorRetry(max_retry_count=2)]
        return AsyncWebClient(token=self.settings.bot_token, base_url=url, session=self._session,
                              logger=_library_log, retry_handlers=retries)

    async def _sign_in(self, client: AsyncWebClient) -> None:
        """auth.test: a wrong token or API URL stops Tusk at start, with the fix in the message."""
        try:
            auth = await client.auth_test()
        except SlackApiError as exc:
            raise ConfigError(f"Slack refused SLACK_BOT_TOKEN ({_error_code(exc)}): use the Bot User OAuth Token "
                              "(xoxb-...) from the app's OAuth & Permissions page.") from exc
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise ConfigError(f"could not reach the Slack API at {client.base_url} ({_error_code(exc)}): "
                              "check SLACK_API_URL and the network.") from exc
        self.bot_user_id = auth.get("user_id")
        scopes = next((v for k, v in (auth.headers or {}).items() if k.lower() == "x-oauth-scopes"), None)
        if self._intake.media is not None and scopes is not None and slack_media.SCOPE not in scopes.split(","):
            logger.warning("Slack: the app lacks the %s scope: files people share cannot be read (add it under "
                           "OAuth & Permissions -> Bot Token Scopes, then reinstall the app)", slack_media.SCOPE)
        self.team_id = auth.get("team_id")
        logger.info("Slack: signed in as %s (%s) in team %s%s", auth.get("user"), self.bot_user_id, auth.get("team_id"),
                    "" if self.receive else ", sending only (receiving elsewhere)")

    def _bolt(self, client: AsyncWebClient) -> AsyncApp:
        bolt = AsyncApp(name="tusk", client=client, signing_secret=self.settings.signing_secret or "",
                        logger=_library_log)
        bolt.event("message")(self._on_event)
        bolt.event("app_mention")(self._on_event)
        bolt.command(re.compile(r"^/"))(self._on_command)
        bolt.event(re.compile(".*"))(self._on_other_event)  # else bolt logs each unhandled payload in full
        return bolt

    async def _connect(self, bolt: AsyncApp, app_token: str) -> None:
        assert self._client is not None
        self._socket = AsyncSocketModeHandler(bolt, app_token, logger=_library_log, web_client=self._client)
        try:
            opened = await self._client.apps_connections_open(app_token=app_token)
        except SlackApiError as exc:
            raise ConfigError(f"Slack refused SLACK_APP_TOKEN ({_error_code(exc)}): create an app-level token "
                              "(xapp-...) with the connections:write scope under Basic Information, and turn on "
                              "Socket Mode.") from exc
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise SlackError(f"apps.connections.open failed: {_error_code(exc)}") from exc
        self._socket.client.wss_uri = opened["url"]
        try:
            await asyncio.wait_for(self._socket.connect_async(), CONNECT_TIMEOUT)
        except asyncio.TimeoutError as exc:
            raise SlackError(f"no Socket Mode connection within {CONNECT_TIMEOUT:.0f}s") from exc
        logger.info("Slack: connected over Socket Mode")

    async def _serve(self, bolt: AsyncApp) -> None:
        async def events(request: web.Request) -> web.Response:
            return await to_aiohttp_response(await bolt.async_dispatch(await to_bolt_request(request)))

        app = web.Application()
        app.router.add_post(EVENTS_PATH, events)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        host, port = self.settings.http_host, self.settings.http_port
        try:
            await web.TCPSite(self._runner, host, port).start()
        except OSError as exc:
            raise ConfigError(f"cannot take Slack events on {host}:{port} ({exc.strerror}): "
                              "set SLACK_HTTP_HOST / SLACK_HTTP_PORT to a free address.") from exc
        self.port = self._runner.addresses[0][1]
        logger.info("Slack: taking events on http://%s:%d%s", self.settings.http_host, self.port, EVENTS_PATH)

    async def pause(self) -> None:
        """Stop taking events (Slack redelivers what it was not acknowledged); replies can still be sent."""
        if self._socket is not None:
            client, self._socket = self._socket.client, None
            await client.close()
            loops = (client.message_processor, client.current_session_monitor, client.message_receiver)
            await asyncio.gather(*(t for t in loops if t is not None), return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._intake.drain()  # messages still being taken (names, files) are published

    async def stop(self) -> None:
        await self.pause()
        await self._intake.aclose(grace=5)  # thinking markers still being taken off
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._client = None

    # -- inbound -----------------------------------------------------------------------------

    async def _on_event(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        msg = to_inbound(event, bot_user_id=self.bot_user_id, thread_sessions=self.settings.thread_sessions)
        if msg is None:
            return
        # one message arrives as `message` and `app_mention`, and again on a retry: answered once; a message
        # overheard (kept, not answered) may still be answered once an edit adds Tusk's mention
        keys = [("ts", event["channel"], event["ts"], msg.addressed)]
        if not self._seen.first(*keys, *([("event", body["event_id"])] if body.get("event_id") else [])):
            logger.info("Slack event %s for a message already taken: ignored", body.get("event_id"))
            return
        origin = f"{event['channel']}:{event['ts']}" + ("" if msg.addressed else ":overheard")
        await self._intake.take(Arrival(msg, origin, event["channel"] if msg.is_group else None,
                                        files=functools.partial(self._files, event), lookup=self._named))

    def _files(self, event: dict[str, Any]) -> list[Remote]:
        """The event's files, to download if the chat keeps them (the intake chain asks)."""
        if self._intake.media is None or not event.get("files"):
            return []
        return slack_media.files_of(event, self._intake.media, self.settings.bot_token, self.settings.api_url)

    async def _named(self, msg: InboundMessage) -> InboundMessage:
        """Who sent `msg` (users.info: name, workspace admin, or in SLACK_ADMINS) and the names of those it
        mentions."""
        assert self._people is not None
        sender = await self._people.sender(msg.sender_id)
        return dataclasses.replace(msg, text=await self._people.named(msg.text), sender_name=sender.name,
                                   sender_is_admin=sender.is_admin or msg.sender_id in self.settings.admins)

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        await ack()  # within Slack's 3 seconds; the answer follows through response_url
        msg = command_to_inbound(command, self._commands)
        if msg is None or not self._seen.first(("command", command.get("trigger_id") or msg.id)):
            return
        if msg.text == "/stop" and (thread := self._asked_in(msg.key.chat_id, msg.sender_id)) is not None:
            msg = dataclasses.replace(msg, key=thread)  # a slash command has no thread: the sender's reply there
        await self._intake.take(Arrival(msg, f"command:{command.get('trigger_id') or msg.id}",
                                        command.get("channel_id", "") if msg.is_group else None, lookup=self._named))

    def _asked_in(self, channel: str, user: str) -> ChatKey | None:
        """With thread sessions, the chat of the latest running reply `user` asked for in `channel`'s threads."""
        if not self.settings.thread_sessions:
            return None
        asked = [msg for msg in self._running.values() if msg.sender_id == user and msg.ref is not None
                 and msg.ref.thread and not msg.ref.interaction and route_of(msg.key).channel == channel]
        return max(asked, key=lambda msg: msg.id).key if asked else None

    async def _tell(self, msg: InboundMessage, text: str) -> None:
        """Tusk's own words about `msg` (a pairing code, a file not taken): to a slash command's asker alone
        (its response_url), else in the chat."""
        if msg.ref is None or not msg.ref.interaction:
            await tell(self.send, msg.key, text)
            return
        try:
            await self._respond(msg.ref.interaction, escape(text), verbatim=True)
        except SlackError as exc:
            logger.warning("could not answer a slash command in %s: %s", msg.key, exc)

    async def _on_other_event(self) -> None:
        return None

    def typing(self, msg: InboundMessage, done: Done) -> Awaitable[None]:
        """While the turn runs: the turn known to /stop from the moment it is published (a `/tusk stop` right
        after finds it), and the thinking marker on the user's message."""
        self._running[msg.id] = msg
        return self._marked(msg, done)

    async def _marked(self, msg: InboundMessage, done: Done) -> None:
        marker = (route_of(msg.key).channel, msg.ref.message) if msg.ref is not None and msg.ref.message else None
        marked = False
        try:
            if marker is not None:
                marked = await self._react("reactions_add", *marker)
            await asyncio.wait([done])
        finally:
            self._running.pop(msg.id, None)
            if marked:
                assert marker is not None
                await self._react("reactions_remove", *marker)

    async def _react(self, method: str, channel: str, ts: str) -> bool:
        try:
            assert self._client is not None
            await getattr(self._client, method)(channel=channel, timestamp=ts, name=THINKING)
            return True
        except _NET_ERRORS as exc:  # a missing marker is cosmetic: the turn goes on
            code = _error_code(exc)  # a place refusing everything is told once, by the reply's failure
            logger.log(logging.DEBUG if code in GONE else logging.WARNING, "%s failed (%s)%s",
                       method.replace("_", "."), code, _scope_hint(exc, "reactions:write"))
            return False

    # -- outbound ----------------------------------------------------------------------------

    def draft(self, msg: InboundMessage) -> SlackDraft | None:
        """The reply while it is written (channels/slack/stream.py); slash commands answer at once, and a
        message with no place of its own (a reminder) gets its reply whole."""
        if msg.ref is None or msg.ref.interaction or self._client is None:
            return None

        def refused() -> None:
            self._streaming = False

        team = (msg.ref.team or self.team_id) if self._streaming else None  # Slack Connect: the sender's own
        return SlackDraft(self._client, route_of(msg.key, msg.ref), team, msg.sender_id, refused)

    async def send(self, msg: OutboundMessage) -> None:
        """Post the reply (as mrkdwn, in pieces of at most 3,000 characters; Tusk's own words escaped, not
        converted, and posted with `mrkdwn: false`); raises SlackError on failure."""
        await self._send_pieces(route_of(msg.key, msg.ref), msg.text, LIMIT, msg.verbatim)

    def voice_caption(self, text: str) -> bool:
        return slack_voice.fits_caption(text)

    async def send_voice(self, msg: OutboundVoice) -> None:
        """A reply read out, uploaded as an audio file where the reply goes (channels/slack/voice.py)."""
        if self._client is None:
            raise SlackError("the Slack channel is not running")
        await slack_voice.send(self._client, route_of(msg.key, msg.ref), msg.audio, msg.caption)

    async def _send_pieces(self, route: Route, text: str, limit: int, verbatim: bool = False) -> None:
        """`text` in pieces of at most `limit` characters once made Slack text; a piece Slack calls too long is
        sent again in smaller pieces."""
        for piece in split_message(text, limit, escaped_len if verbatim else mrkdwn_len, verbatim=verbatim):
            out = escape(piece) if verbatim else to_mrkdwn(piece)
            if route.response_url:
                await self._respond(route.response_url, out, verbatim)
                continue
            try:
                await self._post(route, out, verbatim)
            except SlackError as exc:
                if exc.code != "msg_too_long" or limit <= MIN_PIECE:
                    raise
                logger.info("Slack found a %d-character message too long: sending it in smaller pieces", len(piece))
                await self._send_pieces(route, piece, max(MIN_PIECE, limit // 4), verbatim)

    async def _post(self, route: Route, piece: str, verbatim: bool = False) -> None:
        if self._client is None:
            raise SlackError("the Slack channel is not running")
        # Tusk's own words: no *bold* or _italic_ read into them
        plain: dict[str, Any] = {"mrkdwn": False} if verbatim else {}
        try:
            await self._client.chat_postMessage(channel=route.channel, thread_ts=route.thread_ts, text=piece, **plain)
        except _NET_ERRORS as exc:
            raise failure("chat.postMessage", route.channel, exc) from exc

    async def _respond(self, url: str, piece: str, verbatim: bool = False) -> None:
        """An ephemeral answer to a slash command, through its response_url."""
        if self._session is None:
            raise SlackError("the Slack channel is not running")
        body = {"response_type": "ephemeral", "replace_original": False, "text": piece,
                **({"mrkdwn": False} if verbatim else {})}
        try:
            async with self._session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=30)) as resp:
                if resp.status != 200:
                    raise SlackError(f"the slash command's response_url answered {resp.status}")
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise SlackError(f"the slash command's response_url failed: {_error_code(exc)}") from exc
