"""A real Slack Web API and Socket Mode server on 127.0.0.1, for tests through real slack-bolt / slack_sdk.

    async with FakeSlack() as slack:                  # tokens: slack.bot_token, slack.app_token
        client = AsyncWebClient(slack.bot_token, base_url=slack.api_url)   # api_url ends with "/"
        slack.add_user("U1", "ann", is_admin=True)    # for users.info
        await slack.wait_connected()                  # a Socket Mode client is on the websocket
        envelope = await slack.send_event(slack.dm("hi", user="U1"))       # an events_api envelope
        envelope = await slack.send_command("/status", user="U1", channel="D0DM")
        await slack.wait_acked(envelope)              # the client acknowledged it
        await slack.wait_for(lambda: slack.posted)
        slack.posted      # accepted chat.postMessage params, each with the "ts" it was given
        slack.updates     # accepted chat.update / chat.delete params, each with "method" and "at" (monotonic time)
        slack.stream_calls  # accepted chat.startStream/appendStream/stopStream params, with "method", "ts", "at"
        slack.texts()     # what each of the bot's messages says now, oldest first (edits, streams, deletions applied)
        slack.seen()      # what a Slack client shows of each post and response_url answer, in order (`shown`)
        slack.streaming = False   # chat.startStream answers feature_not_enabled, as a workspace without it
        slack.responses   # JSON bodies posted to response_url (with "response_url" added)
        slack.reactions   # [(method, params)] of accepted reactions.add/remove; slack.reacted: current set
        slack.calls       # (method, params) for every Web API call, rejected ones included
        slack.fail_next("chat.postMessage", error="channel_not_found")       # or status=429, retry_after=0
        slack.fail_next("users.info", status=502, body=("text/html", "<html>Bad Gateway</html>"))  # a proxy's page
        slack.slow_next("users.info", 0.2)            # the next call answers after 0.2 s
        status, text = await slack.deliver(url, slack.event_body(event))     # HTTP mode, signed like Slack
        status, text = await slack.deliver(url, payload, secret="forged")    # a bad signature
        file = slack.add_file("cat.png", b"PNG...", "image/png")             # a file object, bytes served privately
        await slack.send_event(slack.dm("look", subtype="file_share", files=[file]))
        slack.scopes.discard("files:read")            # the app as installed without the scope
        slack.downloads   # (file id, request headers) of private file fetches that got the file
        slack.uploads     # files shared through files_upload_v2's three steps (tests/fakes/slack_files.py)

    Events as real workspaces send them (docs.slack.dev/reference/events/message and its subtypes):
        slack.channel_message("hi", thread_ts=...)   # message.channels: chatter, or the twin of a mention
        slack.as_message(mention)                    # the `message` event Slack sends beside an app_mention
        slack.edited(event, "new text")              # message_changed (hidden, message + previous_message)
        slack.edited_mention(mention, "new text")    # the app_mention Slack sends again for an edit
        slack.deleted(event)                         # message_deleted
        slack.subtyped("channel_join", "<@U0ANN> has joined the channel")  # any other subtype
        await slack.send_body(body, retry_attempt=1) # any events_api payload, verbatim
        slack.event_body(event, enterprise_id="E1")  # wrapper fields overridden or added
        slack.add_user("U0EXT", "eve", team="T0OTHER")   # a Slack Connect user from another workspace
        slack.refuse_channel("C0OLD", "is_archived") # every chat.* / reactions.* call there fails so
        slack.echo_own = True                        # the bot's posts and edits come back as message events

Web API calls accept JSON, form or query parameters, and the token as a bearer header or a
`token` parameter, as slack_sdk sends them. Every method but apps.connections.open needs the
bot token; that one needs the app-level token. A response_url takes five posts, as Slack's does.
Every Web API answer carries the token's scopes in `x-oauth-scopes`, as Slack's do. A file's
`url_private(_download)` serves the bytes only with `Authorization: Bearer <bot token>` and the
files:read scope; otherwise it redirects to an HTML sign-in page, as Slack does.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import re
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.loopback import serve, wait_until
from tests.fakes.slack_events import SlackEvents
from tests.fakes.slack_files import SlackUploads

MAX_TEXT = 40_000
SCOPES = ("app_mentions:read", "channels:history", "chat:write", "commands", "files:read", "groups:history",
          "im:history", "reactions:write", "users:read", "files:write")
MAX_STREAM_TEXT = 12_000  # markdown_text per chat.*Stream call
STREAM_CHUNKS = frozenset({"markdown_text", "task_update", "plan_update"})
RESPONSE_URL_USES = 5
_CONTROL = re.compile(r"<([^<>]*)>")  # Slack's control sequences: <url|label>, <@U…>, <#C…|name>, <!here>
_EMPHASIS = [re.compile(rf"(?<![\w{m}]){re.escape(m)}(?=\S)(.+?)(?<=\S){re.escape(m)}(?![\w{m}])") for m in "*_~`"]


def shown(text: str, mrkdwn: bool = True) -> str:
    """What a Slack client shows of a message `text`, as plain characters (docs.slack.dev "Formatting text for
    app surfaces"): every `<...>` is a control sequence shown as its label or target (so an unescaped
    `<persona>` loses its brackets), `&lt;`, `&gt;`, `&amp;` are unescaped; with mrkdwn (the default; a post's
    `mrkdwn: false` turns it off) the markers of *bold*, _italic_, ~strike~ and `code` and a leading `>`
    quote go. Lists are not rendered: mrkdwn has none."""
    text = _CONTROL.sub(lambda m: m[1].partition("|")[2] or m[1].lstrip("@#!"), text)
    if mrkdwn:
        text = re.sub(r"(?m)^(?:>|&gt;) ?", "", text)
        for pattern in _EMPHASIS:
            text = pattern.sub(r"\1", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _mrkdwn(params: dict[str, Any]) -> bool:
    """A post's `mrkdwn` flag as Slack reads it (JSON false, or "false"/"0" in a form)."""
    return str(params.get("mrkdwn", True)).lower() not in ("false", "0")


@dataclass
class Failure:
    error: str
    status: int = 200
    retry_after: int | None = None
    body: tuple[str, str] | None = None  # (content type, text): a raw answer, as from a proxy in front of Slack


class ApiError(Exception):
    def __init__(self, error: str, status: int = 200, headers: dict[str, str] | None = None,
                 body: tuple[str, str] | None = None) -> None:
        super().__init__(error)
        self.error, self.status, self.headers, self.body = error, status, headers or {}, body


class FakeSlack(SlackEvents, SlackUploads):
    def __init__(self, *, bot_token: str = "xoxb-fake-bot-token", app_token: str = "xapp-fake-app-token",
                 signing_secret: str = "fake-signing-secret", team_id: str = "T0FAKE",
                 bot_user_id: str = "U0TUSK", bot_id: str = "B0TUSK") -> None:
        self.bot_token, self.app_token, self.signing_secret = bot_token, app_token, signing_secret
        self.team_id, self.bot_user_id, self.bot_id = team_id, bot_user_id, bot_id
        self.users: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.posted: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []
        self.stream_calls: list[dict[str, Any]] = []
        self.streaming = True
        self.messages: dict[str, dict[str, Any]] = {}  # ts -> the bot's message as it is now
        self.responses: list[dict[str, Any]] = []
        self.reactions: list[tuple[str, dict[str, Any]]] = []
        self.reacted: set[tuple[str, str, str]] = set()  # (channel, ts, name)
        self.acks: dict[str, dict[str, Any] | None] = {}  # envelope_id -> the payload acknowledged with
        self.connections = 0
        self._sockets: list[web.WebSocketResponse] = []
        self._failures: dict[str, deque[Failure]] = {}
        self._refused: dict[str, str] = {}  # channel -> the error every message call there gets
        self.echo_own = False  # True: the bot's own posts and edits come back as events, as Slack sends them
        self._echoes: set[asyncio.Task[Any]] = set()
        self._delays: dict[str, deque[float]] = {}
        self._response_uses: dict[str, int] = {}
        self._tickets: set[str] = set()  # issued by apps.connections.open
        self._ids = itertools.count(1)
        self._clock = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        self.scopes: set[str] = set(SCOPES)
        self.files: dict[str, tuple[dict[str, Any], bytes]] = {}  # file id -> (file object, bytes)
        self.downloads: list[tuple[str, dict[str, str]]] = []
        self._uploads_init()  # files_upload_v2's three steps (tests/fakes/slack_files.py)

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> FakeSlack:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link/", self._socket)
        app.router.add_post("/respond/{id}", self._respond)
        app.router.add_get("/files-pri/{team}-{id}/{name}", self._file)
        app.router.add_get("/files-pri/{team}-{id}/download/{name}", self._file)
        app.router.add_get("/signin", self._signin)
        self._uploads_routes(app)
        self._runner, self.base_url = await serve(app)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.gather(*self._echoes, return_exceptions=True)
        for ws in list(self._sockets):
            await ws.close()
        assert self._runner is not None
        await self._runner.cleanup()

    # -- test controls -----------------------------------------------------------------------

    def add_user(self, user_id: str, name: str = "", *, is_admin: bool = False, is_owner: bool = False,
                 team: str | None = None) -> None:
        name = name or user_id.lower()
        self.users[user_id] = {"id": user_id, "team_id": team or self.team_id, "name": name, "real_name": name.title(),
                               "is_admin": is_admin, "is_owner": is_owner, "is_primary_owner": False,
                               "is_bot": False, "deleted": False,
                               "profile": {"display_name": name, "real_name": name.title()}}

    def add_file(self, name: str, data: bytes, mimetype: str = "application/octet-stream", *, user: str = "U0ANN",
                 size: int | None = None, subtype: str | None = None, duration_ms: int | None = None) -> dict[str, Any]:
        """A file object as a `file_share` event carries it; its bytes are served at its private URLs.
        `size` is what Slack declares (default: the bytes' length); `subtype` slack_audio for a recorded clip."""
        file_id = f"F{next(self._ids):08d}"
        url = f"{self.base_url}/files-pri/{self.team_id}-{file_id}"
        now = int(time.time())
        file: dict[str, Any] = {
            "id": file_id, "created": now, "timestamp": now, "name": name, "title": name, "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1] if "." in name else "binary", "pretty_type": mimetype, "user": user,
            "user_team": self.team_id, "editable": False, "size": len(data) if size is None else size,
            "mode": "hosted", "is_external": False, "external_type": "", "is_public": False,
            "public_url_shared": False, "display_as_bot": False, "username": "",
            "url_private": f"{url}/{name}", "url_private_download": f"{url}/download/{name}",
            "permalink": f"https://fake.slack.com/files/{user}/{file_id}/{name}", "has_rich_preview": False,
            "file_access": "visible"}
        if subtype:
            file["subtype"] = subtype
        if duration_ms is not None:
            file["duration_ms"] = duration_ms
        self.files[file_id] = (file, data)
        return file

    def fail_next(self, method: str, error: str = "ratelimited", *, status: int = 200,
                  retry_after: int | None = None, body: tuple[str, str] | None = None) -> None:
        """The next call to `method` fails with Slack's `error` (status 429 plus Retry-After for rate limits),
        or with `body`, a raw (content type, text) answer such as a proxy's HTML 502 page."""
        self._failures.setdefault(method, deque()).append(Failure(error, status, retry_after, body))

    def refuse_channel(self, channel: str, error: str = "is_archived") -> None:
        """From now on every chat.* and reactions.* call in `channel` fails with `error` (channel_not_found,
        not_in_channel, is_archived), as Slack keeps refusing a place until someone fixes it."""
        self._refused[channel] = error

    def slow_next(self, method: str, seconds: float) -> None:
        self._delays.setdefault(method, deque()).append(seconds)

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == method]

    async def wait_for(self, predicate: Callable[[], object], timeout: float = 5.0) -> None:
        await wait_until(predicate, timeout, lambda: "on the fake Slack")

    async def wait_connected(self, count: int = 1, timeout: float = 5.0) -> None:
        await self.wait_for(lambda: self.connections >= count and self._open(), timeout)

    async def wait_acked(self, envelope_id: str, timeout: float = 5.0) -> dict[str, Any] | None:
        await self.wait_for(lambda: envelope_id in self.acks, timeout)
        return self.acks[envelope_id]

    # -- Socket Mode ---------------------------------------------------------------------------

    def _open(self) -> list[web.WebSocketResponse]:
        return [ws for ws in self._sockets if not ws.closed]

    async def send_envelope(self, kind: str, payload: dict[str, Any], **extra: Any) -> str:
        """Send one envelope to the newest connection; returns its envelope_id."""
        sockets = self._open()
        if not sockets:
            raise RuntimeError("no Socket Mode client is connected")
        envelope_id = f"env-{next(self._ids)}"
        await sockets[-1].send_json({"envelope_id": envelope_id, "type": kind, "payload": payload, **extra})
        return envelope_id

    async def send_event(self, event: dict[str, Any], *, event_id: str | None = None, retry_attempt: int = 0,
                         retry_reason: str = "") -> str:
        """An events_api envelope; a retry repeats `event_id` with retry_attempt > 0, as Slack does."""
        return await self.send_body(self.event_body(event, event_id), retry_attempt=retry_attempt,
                                    retry_reason=retry_reason)

    async def send_body(self, body: dict[str, Any], *, retry_attempt: int = 0, retry_reason: str = "") -> str:
        """Any events_api payload (an `event_callback` body, as Slack documents or a workspace sent it), verbatim."""
        return await self.send_envelope("events_api", body, accepts_response_payload=False,
                                        retry_attempt=retry_attempt, retry_reason=retry_reason)

    async def send_command(self, command: str, text: str = "", **kw: Any) -> str:
        return await self.send_envelope("slash_commands", self.command_payload(command, text, **kw),
                                        accepts_response_payload=True)

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask the connected client to reconnect, as Slack does every few hours."""
        for ws in self._open():
            await ws.send_json({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}})

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        if request.query.get("ticket") not in self._tickets:
            raise web.HTTPUnauthorized(text="bad ticket")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        self.connections += 1
        await ws.send_json({"type": "hello", "num_connections": len(self._open()),
                            "debug_info": {"host": "fake", "approximate_connection_time": 18060},
                            "connection_info": {"app_id": "A0TUSK"}})
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                data = json.loads(message.data)
                if "envelope_id" in data:
                    self.acks[data["envelope_id"]] = data.get("payload")
        return ws

    # -- HTTP mode -----------------------------------------------------------------------------

    def sign(self, body: bytes, timestamp: int | None = None, secret: str | None = None) -> dict[str, str]:
        ts = str(timestamp if timestamp is not None else int(time.time()))
        base = b"v0:" + ts.encode() + b":" + body
        digest = hmac.new((secret or self.signing_secret).encode(), base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}

    async def deliver(self, url: str, payload: dict[str, Any], *, form: bool = False, secret: str | None = None,
                      retry_num: int | None = None) -> tuple[int, str]:
        """POST `payload` to an app's events URL as Slack would (JSON, or form for slash commands), signed."""
        if form:
            body, ctype = urllib.parse.urlencode(payload).encode(), "application/x-www-form-urlencoded"
        else:
            body, ctype = json.dumps(payload).encode(), "application/json"
        headers = {"Content-Type": ctype, **self.sign(body, secret=secret)}
        if retry_num is not None:
            headers.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"})
        async with aiohttp.ClientSession() as client, client.post(url, data=body, headers=headers) as resp:
            return resp.status, await resp.text()

    # -- Web API -------------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.method == "POST" and request.can_read_body:
            if request.content_type == "application/json":
                params.update(await request.json())
            else:
                params.update(dict(await request.post()))
        return params

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else params.pop("token", None)
        self.calls.append((method, params))
        if self._delays.get(method):
            await asyncio.sleep(self._delays[method].popleft())
        try:
            self._check(method, token)
            if method.startswith(("chat.", "reactions.")) and params.get("channel") in self._refused:
                raise ApiError(self._refused[params["channel"]])
            handler = getattr(self, "_m_" + method.replace(".", "_"), None)
            if handler is None:
                raise ApiError("unknown_method", 404)
            return web.json_response({"ok": True, **handler(params)}, headers=self._scope_header())
        except ApiError as exc:
            if exc.body is not None:
                return web.Response(text=exc.body[1], status=exc.status, content_type=exc.body[0])
            return web.json_response({"ok": False, "error": exc.error}, status=exc.status,
                                     headers={**exc.headers, **self._scope_header()})

    def _scope_header(self) -> dict[str, str]:
        return {"x-oauth-scopes": ",".join(sorted(self.scopes))}

    async def _file(self, request: web.Request) -> web.StreamResponse:
        """A private file URL: the bytes for the bot token with files:read, else a redirect to the sign-in page."""
        known = self.files.get(request.match_info["id"])
        if request.match_info["team"] != self.team_id or known is None:
            return web.Response(status=404, text="file not found")
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}" or "files:read" not in self.scopes:
            raise web.HTTPFound(f"/signin?redir={urllib.parse.quote(request.path)}")
        file, data = known
        self.downloads.append((file["id"], dict(request.headers)))
        response = web.StreamResponse(headers={"Content-Type": file["mimetype"], "Content-Length": str(len(data))})
        await response.prepare(request)
        for start in range(0, len(data), 1 << 16):
            await response.write(data[start:start + (1 << 16)])
        await response.write_eof()
        return response

    async def _signin(self, request: web.Request) -> web.Response:
        return web.Response(text="<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to Fake"
                                 "</body></html>", content_type="text/html")

    def _check(self, method: str, token: str | None) -> None:
        failures = self._failures.get(method)
        if failures:
            f = failures.popleft()
            headers = {"Retry-After": str(f.retry_after)} if f.retry_after is not None else {}
            raise ApiError(f.error, f.status, headers, f.body)
        if not token:
            raise ApiError("not_authed")
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != wanted:
            other = self.bot_token if wanted == self.app_token else self.app_token
            raise ApiError("not_allowed_token_type" if token == other else "invalid_auth")

    def _m_auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"url": "https://fake.slack.com/", "team": "Fake", "user": "tusk", "team_id": self.team_id,
                "user_id": self.bot_user_id, "bot_id": self.bot_id, "is_enterprise_install": False}

    def _m_apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        ticket = f"t{next(self._ids)}"
        self._tickets.add(ticket)
        return {"url": f"{self.base_url.replace('http', 'ws', 1)}/link/?ticket={ticket}"}

    def _m_chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, text = p.get("channel"), p.get("text")
        if not channel:
            raise ApiError("channel_not_found")
        if not text and not p.get("blocks"):
            raise ApiError("no_text")
        if text and len(text) > MAX_TEXT:
            raise ApiError("msg_too_long")
        ts = self.next_ts()
        self.posted.append({**p, "ts": ts, "at": time.monotonic()})
        message = {"type": "message", "user": self.bot_user_id, "bot_id": self.bot_id, "text": text, "ts": ts}
        self.messages[ts] = {**message, "channel": channel, "thread_ts": p.get("thread_ts")}
        self._echo({**message, "app_id": "A0TUSK", "bot_profile": {"id": self.bot_id, "name": "tusk"},
                    "channel": channel, "channel_type": "im" if str(channel).startswith("D") else "channel",
                    **({"thread_ts": p["thread_ts"]} if p.get("thread_ts") else {})})
        return {"channel": channel, "ts": ts, "message": message}

    def _echo(self, event: dict[str, Any]) -> None:
        """With echo_own, the event Slack sends every subscriber for a message the bot itself posted or edited."""
        if self.echo_own and self._open():
            task = asyncio.get_running_loop().create_task(self.send_event({**event, "event_ts": self.next_ts()}))
            self._echoes.add(task)
            task.add_done_callback(self._echoes.discard)

    def texts(self, channel: str | None = None) -> list[str]:
        return [m["text"] for m in self.messages.values() if channel is None or m["channel"] == channel]

    def seen(self) -> list[str]:
        """What the user is shown of each chat.postMessage and response_url answer, in the order they came."""
        sent = sorted([(p["at"], p) for p in self.posted] + [(r["at"], r) for r in self.responses],
                      key=lambda at_p: at_p[0])
        return [shown(p["text"], _mrkdwn(p)) for _, p in sent]

    def _own(self, p: dict[str, Any], streaming: bool | None = None) -> dict[str, Any]:
        if not p.get("channel") or not p.get("ts"):
            raise ApiError("invalid_arguments")
        message = self.messages.get(p["ts"])
        if message is None or message["channel"] != p["channel"]:
            raise ApiError("message_not_found")
        if streaming is not None and message.get("streaming", False) != streaming:
            raise ApiError("message_not_in_streaming_state" if streaming else "cant_update_message")
        return message

    def _m_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._own(p, streaming=False)
        text = p.get("text")
        if not text and not p.get("blocks"):
            raise ApiError("no_text")
        if text and len(text) > MAX_TEXT:
            raise ApiError("msg_too_long")
        before = {k: v for k, v in message.items() if k not in ("channel", "streaming")}
        message["text"] = text
        self.updates.append({**p, "method": "chat.update", "at": time.monotonic()})
        self._echo({"type": "message", "subtype": "message_changed", "hidden": True, "channel": p["channel"],
                    "ts": self.next_ts(), "previous_message": before,
                    "message": {**before, "text": text, "edited": {"user": self.bot_user_id, "ts": self.next_ts()}}})
        return {"channel": p["channel"], "ts": p["ts"], "text": text}

    def _m_chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        self._own(p)
        del self.messages[p["ts"]]
        self.updates.append({**p, "method": "chat.delete", "at": time.monotonic()})
        return {"channel": p["channel"], "ts": p["ts"]}

    @staticmethod
    def _stream_text(p: dict[str, Any], required: bool) -> str:
        """The Markdown a stream call carries, checked as Slack documents it: `markdown_text` (at most
        12,000 characters) or `chunks` of markdown_text / task_update / plan_update."""
        text, chunks = p.get("markdown_text"), p.get("chunks")
        if isinstance(chunks, str):
            chunks = json.loads(chunks)
        if text is not None and chunks is not None:
            raise ApiError("invalid_arguments")
        if chunks is not None:
            if not isinstance(chunks, list) or not all(isinstance(c, dict) and c.get("type") in STREAM_CHUNKS
                                                       for c in chunks):
                raise ApiError("invalid_chunks")
            parts = [c.get("text") for c in chunks if c["type"] == "markdown_text"]
            if not all(isinstance(t, str) for t in parts):
                raise ApiError("invalid_chunks")
            text = "".join(parts)
        if text is not None and (not isinstance(text, str) or len(text) > MAX_STREAM_TEXT):
            raise ApiError("msg_too_long")
        if required and not text and not chunks:
            raise ApiError("no_text")
        return text or ""

    def _stream_call(self, method: str, p: dict[str, Any], ts: str) -> None:
        self.stream_calls.append({**p, "method": method, "ts": ts, "at": time.monotonic()})

    def _m_chat_startStream(self, p: dict[str, Any]) -> dict[str, Any]:
        if not self.streaming:
            raise ApiError("feature_not_enabled")
        channel = p.get("channel")
        if not channel or not p.get("thread_ts"):
            raise ApiError("invalid_arguments")
        if not str(channel).startswith("D") and not (p.get("recipient_team_id") and p.get("recipient_user_id")):
            raise ApiError("missing_recipient")  # required when streaming to channels
        text = self._stream_text(p, required=False)
        ts = self.next_ts()
        self.messages[ts] = {"type": "message", "user": self.bot_user_id, "bot_id": self.bot_id, "text": text,
                             "ts": ts, "channel": channel, "thread_ts": p["thread_ts"], "streaming": True}
        self._stream_call("chat.startStream", p, ts)
        return {"channel": channel, "ts": ts}

    def _m_chat_appendStream(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._own(p, streaming=True)
        message["text"] += self._stream_text(p, required=True)
        self._stream_call("chat.appendStream", p, p["ts"])
        return {"channel": p["channel"], "ts": p["ts"]}

    def _m_chat_stopStream(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._own(p, streaming=True)
        message["text"] += self._stream_text(p, required=False)
        message["streaming"] = False
        self._stream_call("chat.stopStream", p, p["ts"])
        return {"channel": p["channel"], "ts": p["ts"], "message": {k: v for k, v in message.items()
                                                                     if k != "streaming"}}

    def _reaction(self, p: dict[str, Any]) -> tuple[str, str, str]:
        if not p.get("channel") or not p.get("timestamp") or not p.get("name"):
            raise ApiError("invalid_arguments")
        return p["channel"], p["timestamp"], p["name"]

    def _m_reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        key = self._reaction(p)
        if key in self.reacted:
            raise ApiError("already_reacted")
        self.reacted.add(key)
        self.reactions.append(("reactions.add", p))
        return {}

    def _m_reactions_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        key = self._reaction(p)
        if key not in self.reacted:
            raise ApiError("no_reaction")
        self.reacted.discard(key)
        self.reactions.append(("reactions.remove", p))
        return {}

    def _m_users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(p.get("user", ""))
        if user is None:
            raise ApiError("user_not_found")
        return {"user": user}

    # -- response_url --------------------------------------------------------------------------

    async def _respond(self, request: web.Request) -> web.Response:
        url = str(request.url)
        uses = self._response_uses[url] = self._response_uses.get(url, 0) + 1
        if uses > RESPONSE_URL_USES:
            return web.Response(status=404, text="used_url")
        body = await request.json()
        if not body.get("text") and not body.get("blocks"):
            return web.Response(status=400, text="no_text")
        self.responses.append({**body, "response_url": url, "at": time.monotonic()})
        return web.Response(text="ok")
