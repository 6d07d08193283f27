"""The local HTTP API: chat with Tusk from scripts, tests or the web console, no account needed.

    POST /v1/chats/{chat_id}/messages   {"text": "...", "user": "optional sender id"}
                                        -> 200 {"replies": ["...", ...]} once the turn is done
    GET  /healthz                       -> 200 {"ok": true} (never needs the token)

With a token configured, API requests need `Authorization: Bearer <token>`. Every
error is a JSON body `{"error": "..."}` with a 4xx status: bad JSON, missing text, bodies
over 1 MiB, chat ids that are empty or too long.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass

import pydantic
from aiohttp import web

from bot.errors import BusClosed
from bot.events import ChatKey, InboundMessage, OutboundMessage
from channels.base import Publish

logger = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024


@dataclass(frozen=True, slots=True)
class HttpSettings:
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None


class MessageBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    text: str = pydantic.Field(min_length=1)
    user: str = pydantic.Field("http", min_length=1, max_length=200)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class HttpChannel:
    name = "http"

    def __init__(self, settings: HttpSettings, publish: Publish) -> None:
        self.settings = settings
        self._publish = publish
        self._waiting: dict[int, list[str]] = {}  # InboundMessage.id -> replies of that turn so far
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._errors_as_json, self._auth])
        app.router.add_get("/healthz", self._health)
        app.router.add_post("/v1/chats/{chat_id}/messages", self._post_message)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.settings.host, self.settings.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        logger.info("HTTP channel listening on http://%s:%d", self.settings.host, self.port)

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
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return _error(exc.status, exc.text or exc.reason)

    @web.middleware
    async def _auth(self, request: web.Request, handler) -> web.StreamResponse:
        token = self.settings.token
        if token and request.path != "/healthz":
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return _error(401, "missing or wrong token: send 'Authorization: Bearer <TUSK_HTTP_TOKEN>'")
        return await handler(request)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _post_message(self, request: web.Request) -> web.Response:
        try:
            key = ChatKey(self.name, request.match_info["chat_id"])
        except ValueError as exc:
            return _error(400, f"bad chat id: {exc}")
        try:
            body = MessageBody.model_validate_json(await request.read())
        except pydantic.ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
            return _error(400, f"expected JSON {{\"text\": \"...\", \"user\": \"optional\"}}: {problems}")
        msg = InboundMessage(key, body.text, sender_id=body.user)
        self._waiting[msg.id] = replies = []
        try:
            await self._publish(msg)
        except BusClosed as exc:
            return _error(503, str(exc))
        finally:
            del self._waiting[msg.id]
        return web.json_response({"replies": replies})
