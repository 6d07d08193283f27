"""The local HTTP channel: chat with Tusk from scripts, tests or the web console, no account needed.

    GET  /                              the web console (channels/console/, served from the package)
    GET  /console/{asset}               its scripts and styles
    POST /v1/chats/{chat_id}/messages   {"text": "...", "user": "optional sender id"}
                                        -> 200 {"replies": ["...", ...]} once the turn is done
    GET  /healthz                       -> 200 {"ok": true} (never needs the token)
    + the routes mounted with `add_routes` (the console's JSON API, bot/ops/console.py)

With a token configured, API requests need `Authorization: Bearer <token>` (the console page
and its assets load without it, then ask for it). Without a token the channel only binds to a
loopback address, answers only requests addressed to a loopback name (no DNS rebinding) and
refuses cross-origin writes (no CSRF from another site open in the same browser). Every error
is a JSON body `{"error": "..."}` with a 4xx status: bad JSON, missing text, bodies over 1 MiB,
chat ids that are empty, too long or hold control characters.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pydantic
from aiohttp import web

from bot.errors import BusClosed, ConfigError
from bot.events import ChatKey, InboundMessage, OutboundMessage
from channels.base import Publish

logger = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
CONSOLE_DIR = Path(__file__).parent / "console"
ASSET_NAME = re.compile(r"[a-z0-9_-]+\.(js|css|html|svg)")
CONTENT_TYPES = {"js": "text/javascript", "css": "text/css", "html": "text/html", "svg": "image/svg+xml"}
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def host_name(host: str) -> str:
    """The name in a Host header, without its port: `[::1]:8765` -> `::1`, `localhost:80` -> `localhost`."""
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback(host: str) -> bool:
    """True for `localhost`, `127.x.x.x` and `::1` (with or without brackets)."""
    host = host.strip().strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class HttpSettings:
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None

    def check(self) -> None:
        """Refuse to serve chats and memory to the network without a token."""
        if not self.token and not is_loopback(self.host):
            raise ConfigError(f"TUSK_HTTP_HOST={self.host or '(all interfaces)'} exposes the HTTP API and the web "
                              "console beyond this machine, but TUSK_HTTP_TOKEN is not set: set TUSK_HTTP_TOKEN to a "
                              "long random secret (e.g. `openssl rand -hex 32`), or TUSK_HTTP_HOST=127.0.0.1.")


class MessageBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    text: str = pydantic.Field(min_length=1)
    user: str = pydantic.Field("http", min_length=1, max_length=200)


def error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def problems(exc: pydantic.ValidationError) -> str:
    """A validation error as one line: `text: Input should be a valid string; ...`."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())


def chat_key(channel: str, chat_id: str) -> ChatKey:
    """The key for a chat named in a URL; raises web.HTTPBadRequest with the reason."""
    if CONTROL.search(chat_id):
        raise web.HTTPBadRequest(text="bad chat id: control characters (NUL, newlines, ...) are not allowed")
    try:
        return ChatKey(channel, chat_id)
    except ValueError as exc:
        raise web.HTTPBadRequest(text=f"bad chat: {exc}") from exc


def load_assets(folder: Path = CONSOLE_DIR) -> dict[str, tuple[bytes, str]]:
    """The console's files by name: (content, content type). Only plain names are ever served."""
    if not folder.is_dir():
        return {}
    return {p.name: (p.read_bytes(), CONTENT_TYPES[p.suffix[1:]]) for p in sorted(folder.iterdir())
            if p.is_file() and ASSET_NAME.fullmatch(p.name)}


class HttpChannel:
    name = "http"

    def __init__(self, settings: HttpSettings, publish: Publish) -> None:
        settings.check()
        self.settings = settings
        self._publish = publish
        self._waiting: dict[int, list[str]] = {}  # InboundMessage.id -> replies of that turn so far
        self._routes: list[web.AbstractRouteDef] = []
        self._assets = load_assets()
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    def add_routes(self, routes: Iterable[web.AbstractRouteDef]) -> None:
        """Mount more routes (before `start`); they get the same token check and JSON errors."""
        self._routes.extend(routes)

    @property
    def url(self) -> str:
        host = self.settings.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._errors_as_json, self._guard, self._auth])
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/", self._index)
        app.router.add_get("/console/{name}", self._asset)
        app.router.add_post("/v1/chats/{chat_id}/messages", self._post_message)
        app.router.add_routes(self._routes)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.settings.host, self.settings.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        logger.info("HTTP channel and web console on %s", self.url)

    async def pause(self) -> None:
        """Nothing to pause: a request after this gets a 503 answer, so none is lost."""

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def send(self, msg: OutboundMessage) -> None:
        replies = self._waiting.get(msg.reply_to) if msg.reply_to is not None else None
        if replies is None:
            logger.info("no request is waiting for a message to %s; it is kept in the session only", msg.key)
            return
        replies.append(msg.text)

    @web.middleware
    async def _errors_as_json(self, request: web.Request, handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = error(exc.status, exc.text or exc.reason)
        response.headers.update(SECURITY_HEADERS)
        return response

    @web.middleware
    async def _guard(self, request: web.Request, handler) -> web.StreamResponse:
        """Without a token, only this machine's own pages may talk to the API."""
        if self.settings.token or request.path == "/healthz":
            return await handler(request)
        if not is_loopback(host_name(request.host)):
            return error(403, f"this Tusk answers only requests to 127.0.0.1 or localhost (got Host: {request.host}); "
                              "to reach it under another name, set TUSK_HTTP_TOKEN")
        origin = request.headers.get("Origin")
        if request.method not in SAFE_METHODS and origin is not None and origin != f"http://{request.host}":
            return error(403, f"cross-origin request from {origin} refused")
        return await handler(request)

    @web.middleware
    async def _auth(self, request: web.Request, handler) -> web.StreamResponse:
        token = self.settings.token
        public = request.path in ("/healthz", "/") or request.path.startswith("/console/")
        if token and not public:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return error(401, "missing or wrong token: send 'Authorization: Bearer <TUSK_HTTP_TOKEN>'")
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

    async def _post_message(self, request: web.Request) -> web.Response:
        key = chat_key(self.name, request.match_info["chat_id"])
        try:
            body = MessageBody.model_validate_json(await request.read())
        except pydantic.ValidationError as exc:
            return error(400, f"expected JSON {{\"text\": \"...\", \"user\": \"optional\"}}: {problems(exc)}")
        msg = InboundMessage(key, body.text, sender_id=body.user)
        self._waiting[msg.id] = replies = []
        try:
            await self._publish(msg)
        except BusClosed as exc:
            return error(503, str(exc))
        finally:
            del self._waiting[msg.id]
        return web.json_response({"replies": replies})
