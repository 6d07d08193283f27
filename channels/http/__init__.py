"""The local HTTP channel: chat with Tusk from scripts, tests or the web console, no account needed.

    GET  /                              the web console (channels/console/, served from the package)
    GET  /console/{asset}               its scripts and styles
    POST /v1/chats/{chat_id}/messages   {"text": "...", "user": "optional sender id"}
                                        -> 200 {"replies": ["...", ...], "formats": ["markdown" | "plain", ...]}
                                        once the turn is done; `formats` says how to show each reply: the
                                        model's Markdown, or Tusk's own words (a command's answer), as written
                                        (and "voice": links to the spoken replies when a reply was read out:
                                        voice.py)
                                        or multipart/form-data: text, user, file or voice (channels/http/files.py);
                                        with TUSK_DATABASE_URL an `Idempotency-Key` header makes a repeat (to
                                        any process) get the first one's answer, running nothing again
    GET  /v1/chats/{chat_id}/voice/{name}   a spoken reply's OGG/Opus file (channels/http/voice.py)
                                        {"stream": true, ...} -> Server-Sent Events while it runs
                                        (channels/http/stream.py: delta, tool, done, error)
    POST /v1/chats/{chat_id}/stop       {"user": "optional sender id"} -> 200 {"replies": [...]}: the chat's
                                        running reply stopped (bot/stop.py), as /stop in the chat would;
                                        [] when a reply was stopped (its own request gets it, marked
                                        stopped), else the sentence saying what was (or that nothing ran)
    GET  /healthz                       -> 200 {"ok": true} (never needs the token)
    GET  /readyz                        -> 200 {"ready": true}, or 503 with the reason (never needs the token;
                                        mounted by the caller: channels/http/health.py)
    + the routes mounted with `add_routes` (the console's JSON API, bot/ops/console.py; OpenAI's
      /v1/chat/completions and /v1/models, channels/http/openai_api.py, which the owner's API keys may
      reach too; /metrics, channels/http/metrics_route.py, open to loopback peers with TUSK_METRICS=open;
      the terminal chats for a `tusk chat` beside this Tusk, channels/http/terminal.py)

API requests need `Authorization: Bearer <token>` (the console page and its assets load
without it, then take it from the URL fragment or ask for it); `token=None` (TUSK_HTTP_TOKEN=off)
is allowed on a loopback address only, and then only requests addressed to a loopback name are
answered (no DNS rebinding). A token for any other address must be at least 32 characters
(`bind_problem`, the rule `tusk run` and `tusk doctor` share). Requests that change state
(POST, PUT, DELETE, ...) need `Content-Type: application/json` and may not come from another
origin (a foreign `Origin` or `Sec-Fetch-Site` is refused), so no other site open in the same browser
can send them (CSRF: channels/http/requests.py); with a bearer token that is all (API clients send no
`Origin`), without one (TUSK_HTTP_TOKEN=off) they must say they come from this server's own pages.
Connections are bounded in number and idle time (channels/http/limits.py).
Every error is a JSON body `{"error": "..."}` with a 4xx status: bad
JSON, missing text, bodies over 1 MiB, chat ids that are empty, too long or hold control characters.
The one exception to "JSON only": a message with files may be multipart/form-data (same origin
rules), streamed to disk within the upload deadline (channels/http/limits.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pydantic
from aiohttp import web

from bot.access.api_keys import ApiKey, ApiKeys
from bot.errors import BusClosed, ConfigError, DeliveryError, MediaRefused
from bot.events import ChatKey, InboundMessage, OutboundMessage, OutboundVoice, TurnResult
from channels.base import Publish
from channels.http.binding import (bind_error, bind_problem, host_name, is_loopback,  # bind_problem: for doctor
                                   local_url)
from channels.http.files import MAX_FILES, read_upload
from channels.http.limits import ConnectionLimit, upload_deadline
from channels.http import voice as voice_files
from channels.http.stream import MARKDOWN, PLAIN, EventStream
from channels.http.requests import (ASSET_NAME, CONSOLE_DIR, CONTENT_TYPES, CONTROL, MESSAGES_PATH,  # noqa: F401
                                    OPENAI_PATHS, MessageBody, StopBody, chat_key, error, is_upload,
                                    load_assets, problems, write_refusal)
from memory.media import MediaStore
from store.errors import StorageUnavailable

if TYPE_CHECKING:
    from bot.stream import Draft

logger = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
MAX_IDEMPOTENCY_KEY = 255  # characters of an Idempotency-Key header (a UUID is 36)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
API_KEY = web.RequestKey("api_key", ApiKey)  # the owner's API key a request came with (bot/access/api_keys.py)
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; media-src 'self' blob:; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",  # media: the console's player of spoken replies
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True)
class HttpSettings:
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None  # None: no token (TUSK_HTTP_TOKEN=off), loopback only
    max_connections: int = 256
    idle_timeout: float = 15.0  # seconds to send a request's head (or its body), and idle keep-alive

    def check(self) -> None:
        """Refuse to serve chats and memory to the network without a long token."""
        if problem := bind_problem(self.host, self.token):
            raise ConfigError(problem)


class HttpChannel:
    name = "http"

    def __init__(self, settings: HttpSettings, publish: Publish, media: MediaStore | None = None) -> None:
        settings.check()
        self.settings = settings
        self.media = media  # where uploaded files go (None: uploads are refused)
        self.voice = self  # spoken replies are kept and linked from the answer (send_voice)
        self._publish = publish
        self._waiting: dict[int, list[str]] = {}  # InboundMessage.id -> replies of that turn so far
        self._formats: dict[int, list[str]] = {}  # InboundMessage.id -> each reply's format, if the route says them
        self._voices: dict[int, list[dict]] = {}  # InboundMessage.id -> its spoken replies' references
        self._streams: dict[int, Draft] = {}  # InboundMessage.id -> its event stream, if it asked for one
        self._routes: list[web.AbstractRouteDef] = []
        self._assets = load_assets()
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._limit = ConnectionLimit(settings.max_connections)
        self.port: int | None = None
        self.loopback_open: set[str] = set()  # paths a loopback peer reaches without the token (TUSK_METRICS=open)
        self.api_keys: ApiKeys | None = None  # the owner's keys for the OpenAI routes only (bot/access/api_keys.py)

    def add_routes(self, routes: Iterable[web.AbstractRouteDef]) -> None:
        """Mount more routes (before `start`); they get the same token check and JSON errors."""
        self._routes.extend(routes)

    @property
    def url(self) -> str:
        host = self.settings.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def local_url(self) -> str:
        """Where a client on this machine reaches it (`tusk chat` beside a running Tusk, bot/running.py)."""
        return local_url(self.settings.host, self.port or 0)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._limit.track, self._errors_as_json,
                                                                     self._guard, self._auth, self._body_in_time])
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/", self._index)
        app.router.add_get("/console/{name}", self._asset)
        app.router.add_post("/v1/chats/{chat_id}/messages", self._post_message)
        app.router.add_post("/v1/chats/{chat_id}/stop", self._post_stop)
        app.router.add_get("/v1/chats/{chat_id}/voice/{name}", self._voice_file)
        app.router.add_routes(self._routes)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, keepalive_timeout=self.settings.idle_timeout)
        await self._runner.setup()
        assert self._runner.server is not None  # setup() made it
        factory = self._limit.factory(self._runner.server)
        try:
            self._server = await asyncio.get_running_loop().create_server(
                factory, self.settings.host or None, self.settings.port, reuse_address=True)
        except OSError as exc:
            await self._runner.cleanup()
            self._runner = None
            raise bind_error(exc, self.settings.host, self.settings.port) from None
        self.port = self._server.sockets[0].getsockname()[1]
        logger.info("HTTP channel and web console on %s (at most %d connections)", self.url, self._limit.limit)

    async def pause(self) -> None:
        """Nothing to pause: a request after this gets a 503 answer, so none is lost."""

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def draft(self, msg: InboundMessage) -> Draft | None:
        """The event stream of the request that `msg` came from, if it asked for one."""
        return self._streams.get(msg.id)

    async def run_turn(self, msg: InboundMessage, replies: list[str], draft: Draft | None = None,
                       formats: list[str] | None = None, voices: list[dict] | None = None) -> TurnResult:
        """Publish `msg` and wait until its turn is done, its replies put in `replies` and their formats in
        `formats` if given (MARKDOWN, PLAIN), the reply written to `draft` as it comes if given, the spoken
        replies' references in `voices`: the path every route of this channel takes (BusClosed at shutdown).
        How it ended: its `TurnResult` (a plain "ok" when no turn ran: /stop is answered at once)."""
        self._waiting[msg.id] = replies
        if formats is not None:
            self._formats[msg.id] = formats
        if draft is not None:
            self._streams[msg.id] = draft
        if voices is not None:
            self._voices[msg.id] = voices
        try:
            return await self._publish(msg) or TurnResult()
        finally:
            del self._waiting[msg.id]
            self._formats.pop(msg.id, None)
            self._streams.pop(msg.id, None)
            self._voices.pop(msg.id, None)

    def voice_caption(self, text: str) -> bool:
        """A spoken reply's text always goes in the same answer, beside the link to its audio."""
        return True

    async def send_voice(self, msg: OutboundVoice) -> None:
        """Keep the spoken reply in the chat's media/ and link it from the answer of the request that waits."""
        voices = self._voices.get(msg.reply_to) if msg.reply_to is not None else None
        replies = self._waiting.get(msg.reply_to) if msg.reply_to is not None else None
        if msg.reply_to is None or voices is None or replies is None:
            raise DeliveryError("no request is waiting for this spoken reply")
        voices.append(await voice_files.keep(self.media, msg))
        if msg.caption is not None:
            replies.append(msg.caption)
            if (formats := self._formats.get(msg.reply_to)) is not None:
                formats.append(MARKDOWN)

    async def _voice_file(self, request: web.Request) -> web.Response:
        key = chat_key(self.name, request.match_info["chat_id"])
        return await voice_files.serve(self.media, key, request.match_info["name"])

    async def send(self, msg: OutboundMessage) -> None:
        replies = self._waiting.get(msg.reply_to) if msg.reply_to is not None else None
        if msg.reply_to is None or replies is None:
            logger.info("no request is waiting for a message to %s; it is kept in the session only", msg.key)
            return
        replies.append(msg.text)
        if (formats := self._formats.get(msg.reply_to)) is not None:
            formats.append(PLAIN if msg.verbatim else MARKDOWN)

    @web.middleware
    async def _errors_as_json(self, request: web.Request, handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = error(exc.status, exc.text or exc.reason)
        if not response.prepared:  # an event stream sent its headers (these among them) when it opened
            response.headers.update(SECURITY_HEADERS)
        return response

    @web.middleware
    async def _guard(self, request: web.Request, handler) -> web.StreamResponse:
        """No DNS rebinding without a token; writes only as JSON from this server's own pages."""
        if request.path in ("/healthz", "/readyz"):
            return await handler(request)
        if not self.settings.token and not is_loopback(host_name(request.host)):
            return error(403, f"this Tusk answers only requests to 127.0.0.1 or localhost (got Host: {request.host}); "
                              "to reach it under another name, set TUSK_HTTP_TOKEN")
        bearer = bool(self.settings.token) and request.headers.get("Authorization", "").startswith("Bearer ")
        if request.method not in SAFE_METHODS and (refused := write_refusal(request, bearer)):
            return error(*refused, request)
        return await handler(request)

    @web.middleware
    async def _auth(self, request: web.Request, handler) -> web.StreamResponse:
        token = self.settings.token
        public = request.path in ("/healthz", "/readyz", "/") or request.path.startswith("/console/") or (
            request.path in self.loopback_open and is_loopback(request.remote or ""))
        if token and not public:
            try:
                given = request.headers.get("Authorization", "").encode()
            except UnicodeEncodeError:  # bytes that are not UTF-8 arrive as surrogates
                return error(400, "the Authorization header is not valid UTF-8: send 'Authorization: Bearer <token>'")
            if not hmac.compare_digest(given, f"Bearer {token}".encode()) and not self._keyed(request, given):
                return error(401, "missing or wrong token: send 'Authorization: Bearer <token>' with the "
                                  "console token (`tusk console-url` shows it) or TUSK_HTTP_TOKEN", request)
        return await handler(request)

    def _keyed(self, request: web.Request, given: bytes) -> bool:
        """An API key on an OpenAI route: let in, the key noted for the route (it limits the chats); on a spoken
        reply's file, only in the chats its prefix names (the links its answers gave)."""
        voice = voice_files.PATH.fullmatch(request.path) if request.method in SAFE_METHODS else None
        if self.api_keys is None or (request.path not in OPENAI_PATHS and voice is None) \
                or not given.startswith(b"Bearer "):
            return False
        key = self.api_keys.find(given[7:].decode())
        if key is not None and voice is not None:
            return voice[1].startswith(key.prefix)
        if key is not None:
            request[API_KEY] = key
        return key is not None

    @web.middleware
    async def _body_in_time(self, request: web.Request, handler) -> web.StreamResponse:
        """Read a request's body within the idle timeout (a body sent a byte a minute holds nothing for long)."""
        if request.can_read_body and not is_upload(request):  # an upload streams, within its own deadline
            try:
                async with asyncio.timeout(self.settings.idle_timeout):
                    await request.read()  # kept by aiohttp: the handler's read() gets it at once
            except TimeoutError:
                return error(408, f"the request body did not arrive within {self.settings.idle_timeout:g} s")
        return await handler(request)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _index(self, request: web.Request) -> web.Response:
        return self._serve("index.html")

    async def _asset(self, request: web.Request) -> web.Response:
        return self._serve(request.match_info["name"])

    def _serve(self, name: str) -> web.Response:
        asset = self._assets.get(name)
        if asset is None:
            raise web.HTTPNotFound(text=f"no console file {name!r}")
        body, content_type = asset
        return web.Response(body=body, content_type=content_type, charset="utf-8")

    async def _post_message(self, request: web.Request) -> web.StreamResponse:
        key = chat_key(self.name, request.match_info["chat_id"])
        stream = False  # uploads are answered whole; JSON bodies may ask for Server-Sent Events
        if is_upload(request):
            msg = await self._upload(request, key)
            if isinstance(msg, web.Response):
                return msg
        else:
            try:
                body = MessageBody.model_validate_json(await request.read())
            except pydantic.ValidationError as exc:
                return error(400, f"expected JSON {{\"text\": \"...\", \"user\": \"optional\"}}: {problems(exc)}")
            msg, stream = InboundMessage(key, body.text, sender_id=body.user), body.stream
        if (idem := request.headers.get("Idempotency-Key")) is not None:
            if not 0 < len(idem) <= MAX_IDEMPOTENCY_KEY:
                return error(400, f"Idempotency-Key: 1 to {MAX_IDEMPOTENCY_KEY} characters")
            msg = dataclasses.replace(msg, idempotency_key=idem)  # a repeat gets the first one's answer
        if stream:
            return await self._stream_turn(request, msg)
        replies: list[str] = []
        formats: list[str] = []
        voices: list[dict] = []
        try:
            await self.run_turn(msg, replies, formats=formats, voices=voices)
        except BusClosed as exc:
            return error(503, str(exc))
        except StorageUnavailable:  # the database is down: not taken; the client may send it again
            return error(503, "the database does not answer: not taken, send it again in a moment")
        return web.json_response({"replies": replies, "formats": formats, **({"voice": voices} if voices else {})})

    async def _post_stop(self, request: web.Request) -> web.Response:
        """/stop for this chat, answered at once (the bus takes it before the chat's queue)."""
        key = chat_key(self.name, request.match_info["chat_id"])
        raw = await request.read()
        try:
            body = StopBody.model_validate_json(raw or b"{}")
        except pydantic.ValidationError as exc:
            return error(400, f"expected JSON {{\"user\": \"optional\"}} or no body: {problems(exc)}")
        replies: list[str] = []
        try:
            await self.run_turn(InboundMessage(key, "/stop", sender_id=body.user), replies)
        except BusClosed as exc:
            return error(503, str(exc))
        return web.json_response({"replies": replies})

    async def _upload(self, request: web.Request, key: ChatKey) -> InboundMessage | web.Response:
        """The message a multipart upload stands for; a refused file is the turn's one reply (200), as on the
        platforms, and a form that is broken or too slow a 4xx."""
        if self.media is None:
            return error(415, "this server takes no files: send JSON {\"text\": \"...\"}")
        limit = self.media.limits.file_bytes
        try:
            async with asyncio.timeout(upload_deadline(limit * MAX_FILES, self.settings.idle_timeout)):
                upload = await read_upload(request, key, self.media)
        except TimeoutError:
            return error(408, "the upload did not arrive in time")
        except MediaRefused as exc:
            return web.json_response({"replies": [str(exc)], "formats": [PLAIN]})
        except ValueError as exc:  # a malformed multipart body (aiohttp's parser)
            return error(400, f"malformed multipart/form-data body: {exc}")
        return InboundMessage(key, upload.text, sender_id=upload.user, attachments=upload.attachments)

    async def _stream_turn(self, request: web.Request, msg: InboundMessage) -> web.StreamResponse:
        """The turn as Server-Sent Events: the reply while it is written, then `done` with the replies."""
        events = EventStream(request, SECURITY_HEADERS)
        try:
            await events.open()
            try:
                await self.run_turn(msg, events.replies, events, events.formats, voices=events.voices)
            except BusClosed as exc:
                await events.error(str(exc))
            else:
                await events.done()
        except ConnectionResetError:  # the client went away: the turn still ran and its reply is saved
            logger.info("a streaming client left before its reply was done")
        return events.response
