"""A real Discord REST API and gateway on 127.0.0.1, for tests through real discord.py.

    async with FakeDiscord(token="fake-token") as dc:   # point DISCORD_API_BASE, DISCORD_GATEWAY_URL here:
        dc.api_base, dc.gateway_url                     # http://127.0.0.1:<port>/api/v10, ws://127.0.0.1:<port>/gateway
        guild = dc.add_guild()                          # sent in GUILD_CREATE when the bot connects
        dc.add_guild(id=guild_on(1, 2))                 # a server whose events go to shard 1 of 2
        channel, thread = guild.add_channel(), guild.add_thread(parent)
        mods = guild.add_role("mods", MANAGE_MESSAGES)
        alice = dc.add_user("alice")                    # user payloads; dc.bot is the bot's own
        await dc.wait_connected()                       # IDENTIFY seen, READY and GUILD_CREATEs sent
        await dc.message(channel, alice, f"{dc.mention} hi", guild=guild, roles=(mods,))  # MESSAGE_CREATE
        await dc.command("memory", channel, alice, "undo", guild=guild, permissions=MANAGE_MESSAGES)
        await dc.wait_for(lambda: dc.sent)              # messages the bot posted (the JSON bodies, plus channel_id)
        await dc.message(channel, alice, "and?", guild=guild, reply_to=dc.created[-1])  # a reply to the bot
        dc.typing, dc.callbacks, dc.followups, dc.commands, dc.identify, dc.requests
        dc.connections                                  # gateway websockets opened so far
        dc.shards, dc.starts.max_concurrency = 4, 2     # GET /gateway/bot's recommended shards and session limit
        await dc.wait_sessions(0, 1)                    # sessions of those shards identified (READY sent)
        dc.identifies, dc.invalid_sessions              # IDENTIFYs that started a session, and those refused (op 9)
        dc.repeats                                      # creates an enforced nonce answered with the message made
        dc.fail_next("POST", "/channels/", status=403)  # the next matching request is refused
        dc.message_content_enabled = False              # as if the intent were off in the Developer Portal
        dc.fail_next("POST", "/messages", status=429, retry_after=0.1, is_global=True)  # Discord's error bodies
        await dc.edit(msg, "new"); await dc.delete(msg); await dc.remove_guild(guild)  # UPDATE, DELETE, GUILD_DELETE
        await dc.dispatch("MESSAGE_CREATE", {...})      # any gateway payload, as a real server sends it
        await dc.message(dc_channel, alice, "look", attachments=(dc.attachment("cat.png", b"PNG..."),))
        dc.downloads                                    # CDN requests: (filename, headers) in order
        await dc.press(dc.created[-1], "tusk:stop", alice, guild=guild)   # a button under a bot message pressed:
                                                        # INTERACTION_CREATE (type 3, the message as it is now,
                                                        # or `as_shown=` components a stale client still shows)
        dc.components(message_id)                       # the components a bot message carries now
        dc.lose_answer_next("POST", "/messages", status=502)   # done, but the answer is an error: a retry follows
        await dc.replay(message_payload)                # a MESSAGE_CREATE sent again (a gateway RESUME's replay)
        shown(dc.sent[0]["content"])                    # what a Discord client shows of it (its Markdown rendered)
        dc.voices                                       # voice messages posted (checked as Discord checks them:
                                                        # tests/fakes/discord_voice.py): the body, "audio", "ogg", "at"
        dc.no_voice.add(channel_id)                     # that channel refuses voice messages (50173)

Attachments are served by the fake's CDN (`/attachments/<channel>/<id>/<name>?ex=&is=&hm=`, signed like
Discord's links: a wrong signature is a 404); it needs no token, as the real CDN.

Without the Message Content intent in IDENTIFY, guild messages that do not mention the bot arrive with
empty `content`, `embeds`, `attachments` and `components`, as Discord sends them; the application's
`flags` (GET /applications/@me) say whether the intent is enabled (GATEWAY_MESSAGE_CONTENT_LIMITED).

Sharding as Discord does it (tests/fakes/discord_shards.py): `shard: [id, count]` in IDENTIFY (4010 Invalid shard
for an id not below the count), a server's events only on its shard `(guild_id >> 22) % count`, DMs only on shard
0, 4011 Sharding required past 2,500 servers on one session, and one IDENTIFY per bucket
(`id % max_concurrency`) every 5 s, another answered with op 9 Invalid Session; without `shard` a session is shard
0 of 1, under the same rules.

Replies are JSON with `Content-Type` exactly `application/json` (discord.py parses nothing else).
Gateway frames are plain JSON text, whatever `compress=` the client asks for; discord.py accepts them.
Interaction callbacks answer as with `with_response=1`; followups are webhook messages, taken only at the
application's id with a token an interaction was given (else 10015 Unknown Webhook, 50027 Invalid Webhook
Token). An interaction takes one callback (a second is Discord's 40060 "already acknowledged"), of a type its
kind allows (a command: 4, 5; a component: 4-7). Components are checked as Discord checks them (action rows of at
most 5 buttons; a button has a style, a label or emoji, and a custom id of 1-100 characters unless
it is a link); an edit without `components` keeps them, `[]` removes them.

Nonces as Discord documents them (Create Message: `nonce`, an integer or a string of at most 25 characters,
else 400 Invalid Form Body; `enforce_nonce`: "if another message was created by the same author with the same
nonce, that message will be returned and no new message will be created", for a few minutes: NONCE_TTL). Scoped
to the author, not the channel, which is the stricter reading: a nonce reused in another channel answers the
first channel's message. Text and voice messages alike; `dc.repeats` lists the bodies answered so (with
"channel_id" and the "id" of the message returned).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.discord_shards import (  # noqa: F401 (guild_on, shard_of: re-exported)
    MAX_GUILDS, Session, SessionStarts, guild_of, guild_on, shard_field, shard_of)
from tests.fakes.discord_payloads import (  # noqa: F401 (re-exported: tests import them from here)
    CONTENT_FIELDS, EVERYONE, GATEWAY_MESSAGE_CONTENT, GATEWAY_MESSAGE_CONTENT_LIMITED, IS_VOICE_MESSAGE,
    MANAGE_MESSAGES, MESSAGE_CONTENT, Guild, member, now, snowflake, user)
from tests.fakes.discord_voice import read_form, voice_attachment, voice_refusal
from tests.fakes.loopback import serve, wait_until
from tests.fakes.voice_check import ogg_opus

_CDN_KEY = b"fake cdn signing key"
NONCE_TTL = 300.0  # seconds an enforced nonce answers the message it made ("the past few minutes")
MAX_NONCE = 25  # characters
_ESCAPED = re.compile(r"\\([^\w\s])")  # a backslash before a punctuation mark shows the mark itself
_ORDERED = re.compile(r"^(\s*)(\d{1,9})\. (.*)$")
_INLINE = [re.compile(p) for p in (r"\*\*(?=\S)(.+?)(?<=\S)\*\*", r"__(?=\S)(.+?)(?<=\S)__", r"~~(?=\S)(.+?)(?<=\S)~~",
                                   r"\|\|(.+?)\|\|", r"\*(?=\S)(.+?)(?<=\S)\*", r"(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)",
                                   r"`([^`]+)`")]


def shown(content: str) -> str:
    """What a Discord client shows of a message's content, as plain characters (Discord's "Markdown Text 101"):
    a backslash before a punctuation mark shows the mark and keeps it from formatting anything; `#`, `##`,
    `###` and `-#` headings and `>`/`>>>` quotes lose their marker; `-`/`*` items show a bullet; a run of `N.`
    items (indented lines and blank lines between them belong to the list) is an ordered list numbered from
    its first number on, so items 3 and 5 read 3 and 4; **bold**, *italic*, _italic_, __underline__,
    ~~strike~~, ||spoiler|| and `code` lose their markers."""
    kept: list[str] = []

    def keep(m: re.Match[str]) -> str:
        kept.append(m[1])
        return f"\x00{len(kept) - 1}\x00"

    out: list[str] = []
    number: int | None = None
    for line in _ESCAPED.sub(keep, content).split("\n"):
        if item := _ORDERED.match(line):
            number = int(item[2]) if number is None else number + 1
            out.append(f"{item[1]}{number}. {item[3]}")
            continue
        if number is not None and (not line.strip() or line[:1] in (" ", "\t")):
            out.append(line)  # still inside the list
            continue
        number = None
        line = re.sub(r"^(?:#{1,3}|-#) +", "", line)
        line = re.sub(r"^(?:>>>|>) ", "", line)
        out.append(re.sub(r"^(\s*)[-*] ", r"\1• ", line))
    text = "\n".join(out)
    for pattern in _INLINE:
        text = pattern.sub(r"\1", text)
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m[1])], text)


class FakeDiscord:
    def __init__(self, token: str = "fake-token", bot_name: str = "tusk") -> None:
        self.token = token
        self.bot = user(bot_name, bot=True)
        self.application_id = snowflake()
        self.guilds: list[Guild] = []
        self.identify: dict[str, Any] | None = None  # the last IDENTIFY that started a session
        self.identifies: list[dict[str, Any]] = []  # each IDENTIFY that started one, plus "at" (monotonic)
        self.invalid_sessions: list[dict[str, Any]] = []  # IDENTIFYs refused by the session start limit (op 9), "at"
        self.shards = 1  # the number of shards GET /gateway/bot recommends
        self.starts = SessionStarts()  # max_concurrency, the 5 s window per bucket, the day's allowance
        self.guilds_per_shard = MAX_GUILDS  # a session that would hold more is closed with 4011
        self.requests: list[tuple[str, str]] = []  # (method, path) of every REST request, refused ones included
        self.sent: list[dict[str, Any]] = []  # bodies of POST /channels/{id}/messages, plus "channel_id", "id", "at"
        self.edits: list[dict[str, Any]] = []  # bodies of PATCH .../messages/{id}, plus "channel_id", "id", "at"
        self.deleted: list[str] = []  # ids of the messages the bot deleted
        self.created: list[dict[str, Any]] = []  # the messages Discord answered those with (usable as reply_to)
        self.typing: list[str] = []  # channel ids, one per typing request
        self.callbacks: list[dict[str, Any]] = []  # interaction callback bodies, plus "interaction_id"
        self.followups: list[dict[str, Any]] = []  # followup webhook bodies, plus "token"
        self.commands: dict[str | None, list[dict[str, Any]]] = {}  # None: global, else a guild id
        self.message_content_enabled = True  # False: IDENTIFY asking for it is closed with 4014, as Discord does
        self.application_flags: int | None = None  # None: GATEWAY_MESSAGE_CONTENT_LIMITED iff the intent is enabled
        self.files: dict[str, bytes] = {}  # attachment id -> bytes the CDN serves
        self.voices: list[dict[str, Any]] = []  # voice messages posted: body, "channel_id", "audio", "ogg", "at"
        self.no_voice: set[str] = set()  # channels where voice messages are refused (50173)
        self.downloads: list[tuple[str, dict[str, str]]] = []  # (filename, request headers) of CDN fetches
        self.root = ""
        self._failures: list[tuple[str, str, web.Response]] = []
        self._lost: list[tuple[str, str, web.Response]] = []  # done, then answered with an error
        self._nonces: dict[tuple[str, str], tuple[dict[str, Any], float]] = {}  # (author, nonce) -> (message, when)
        self.repeats: list[dict[str, Any]] = []  # bodies an enforced nonce answered with an earlier message
        self._interactions: dict[str, dict[str, Any]] = {}  # id -> {"type": 2|3, "answered": bool}
        self._tokens: set[str] = set()  # interaction tokens issued: the application's webhook takes these
        self._components: dict[str, list[dict[str, Any]]] = {}  # message id -> its components now
        self._sessions: dict[web.WebSocketResponse, Session] = {}  # identified connections, in order
        self.connections = 0  # gateway websockets opened
        self._runner: web.AppRunner | None = None
        self.api_base = self.gateway_url = ""

    @property
    def mention(self) -> str:
        return f"<@{self.bot['id']}>"

    def add_guild(self, **fields: Any) -> Guild:
        guild = Guild(**fields)
        self.guilds.append(guild)
        return guild

    def add_user(self, name: str, *, bot: bool = False) -> dict[str, Any]:
        return user(name, bot=bot)

    def attachment(self, filename: str, data: bytes | None = None, *, content_type: str | None = None,
                   size: int | None = None, voice: bool = False, id: str | None = None) -> dict[str, Any]:
        """An attachment object as in MESSAGE_CREATE, its bytes on the fake CDN. `size` is what Discord
        declares (default: the bytes' length); `voice`: a voice message (duration and waveform)."""
        data = f"contents of {filename}".encode() if data is None else data
        att_id = id or snowflake()
        self.files[att_id] = data
        expires = f"{int(time.time()) + 86400:x}"
        url = f"{self.root}/attachments/{{channel}}/{att_id}/{filename}"
        attachment: dict[str, Any] = {"id": att_id, "filename": filename, "size": len(data) if size is None else size,
                                      "url": url, "proxy_url": url, "ex": expires}
        if content_type:
            attachment["content_type"] = content_type
        if voice:
            attachment |= {"content_type": content_type or "audio/ogg", "duration_secs": 4.2,
                           "waveform": "AAAAAAAAAAAA", "flags": 0}
        return attachment

    def _signed(self, channel: str, attachment: dict[str, Any]) -> dict[str, Any]:
        """The attachment as sent for `channel`: its URL signed (ex, is, hm), as Discord's CDN links are."""
        path = attachment["url"].replace("{channel}", channel).split(self.root, 1)[1]
        query = f"ex={attachment['ex']}&is={int(time.time()):x}"
        digest = hmac.new(_CDN_KEY, f"{path}?{query}".encode(), hashlib.sha256).hexdigest()
        url = f"{self.root}{path}?{query}&hm={digest}"
        return {k: v for k, v in attachment.items() if k != "ex"} | {"url": url, "proxy_url": url}

    def fail_next(self, method: str, path_part: str, status: int = 403, *, code: int = 50013,
                  message: str = "Missing Permissions", retry_after: float = 1.0, is_global: bool = False) -> None:
        """Refuse the next `method` request whose path contains `path_part` as Discord does: a JSON error
        (`code`: 50013 Missing Permissions, 50001 Missing Access, 10003 Unknown Channel, ...), or for 429 the
        rate-limit body and headers (`retry_after` seconds, `global`, `Via` as Discord's proxies add)."""
        if status == 429:
            body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": is_global}
            headers = {"Retry-After": str(retry_after), "Via": "1.1 google",
                       "X-RateLimit-Scope": "global" if is_global else "user"}
            if is_global:
                headers["X-RateLimit-Global"] = "true"
            response = self._json(body, 429, headers)
        else:
            response = self._json({"message": message, "code": code}, status)
        self._failures.append((method, path_part, response))

    def lose_answer_next(self, method: str, path_part: str, status: int = 502) -> None:
        """The next `method` request whose path contains `path_part` is carried out, but its answer is lost: the
        client gets a bare `status` (as from a proxy whose upstream timed out), and may retry."""
        self._lost.append((method, path_part, web.Response(status=status, text="upstream timed out")))

    def components(self, message_id: str) -> list[dict[str, Any]]:
        return self._components.get(message_id, [])

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
        return await wait_until(predicate, timeout)

    async def wait_connected(self, timeout: float = 5.0) -> None:
        await self.wait_for(lambda: self.identify is not None and self._sessions, timeout)

    async def wait_sessions(self, *shards: int, timeout: float = 5.0) -> None:
        """Until a session of each of these shard ids is identified (its READY and GUILD_CREATEs sent)."""
        await self.wait_for(lambda: set(shards) <= {s.shard for s in self._sessions.values()}, timeout)

    # --- what users do -------------------------------------------------------------------------

    async def message(self, channel: str, author: dict[str, Any], content: str = "", *, guild: Guild | None = None,
                      roles: tuple[str, ...] = (), reply_to: dict[str, Any] | None = None,
                      attachments: tuple[str | dict[str, Any], ...] = (), webhook: bool = False,
                      type: int | None = None, mentions: tuple[dict[str, Any], ...] = (),
                      **fields: Any) -> dict[str, Any]:
        """Dispatch MESSAGE_CREATE. A mention of the bot in `content` is listed in `mentions`, as Discord
        does, with the users in `mentions`; a reply is not (as when the user turns the reply's ping off).
        `attachments`: file names (made-up bytes) or `attachment(...)` objects. `type` (default 0, 19 for
        a reply) and `fields` (embeds, sticker_items, mention_roles, message_reference, ...) as Discord sends."""
        files = [self._signed(channel, a if isinstance(a, dict) else self.attachment(a)) for a in attachments]
        voice = any("waveform" in a for a in files)
        data: dict[str, Any] = {
            "id": snowflake(), "channel_id": channel, "author": author, "content": content, "timestamp": now(),
            "edited_timestamp": None, "tts": False, "mention_everyone": False, "mention_roles": [], "embeds": [],
            "mentions": ([self.bot] if self.mention in content else []) + list(mentions),
            "attachments": files,
            "pinned": False, "type": type if type is not None else 19 if reply_to else 0,
            "flags": IS_VOICE_MESSAGE if voice else 0}
        if guild is not None:
            data.update(guild_id=guild.id, member=member(list(roles)))
        if reply_to is not None:
            data.update(message_reference={"message_id": reply_to["id"], "channel_id": channel,
                                           **({"guild_id": guild.id} if guild else {})}, referenced_message=reply_to)
        if webhook:
            data["webhook_id"] = snowflake()
        data.update(fields)
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    async def edit(self, message: dict[str, Any], content: str) -> None:
        """Dispatch MESSAGE_UPDATE: the user edited `message` (as sent by `message()`)."""
        message |= {"content": content, "edited_timestamp": now()}
        await self.dispatch("MESSAGE_UPDATE", dict(message))

    async def delete(self, message: dict[str, Any]) -> None:
        """Dispatch MESSAGE_DELETE for `message`."""
        await self.dispatch("MESSAGE_DELETE", {"id": message["id"], "channel_id": message["channel_id"],
                                               **({"guild_id": message["guild_id"]} if "guild_id" in message else {})})

    async def ask_reconnect(self) -> None:
        """Op 7 RECONNECT, as Discord sends before moving a session: the bot resumes (refused: op 9), then
        identifies again, meeting `message_content_enabled` as it is now."""
        for ws in list(self._sessions):
            await ws.send_str(json.dumps({"op": 7, "d": None}))

    async def remove_guild(self, guild: Guild) -> None:
        """The bot was kicked or the guild deleted: GUILD_DELETE without `unavailable`; its REST calls now fail."""
        self.guilds.remove(guild)
        await self.dispatch("GUILD_DELETE", {"id": guild.id})

    async def command(self, name: str, channel: str, author: dict[str, Any], text: str | None = None, *,
                      guild: Guild | None = None, permissions: int = EVERYONE) -> dict[str, Any]:
        """Dispatch INTERACTION_CREATE for a slash command; `text` fills its one string option, if given."""
        scope = self.commands.get(guild.id if guild else None) or self.commands.get(None) or []
        spec = next(c for c in scope if c["name"] == name)
        options = [{"name": spec["options"][0]["name"], "type": 3, "value": text}] if text is not None else []
        data: dict[str, Any] = {
            "id": snowflake(), "application_id": self.application_id, "type": 2, "token": f"itoken-{snowflake()}",
            "version": 1, "locale": "en-US", "attachment_size_limit": 10_485_760, "app_permissions": "0",
            "data": {"id": spec["id"], "name": name, "type": 1, "options": options},
            "channel_id": channel, "channel": {"id": channel, "type": 0 if guild else 1}}
        if guild is not None:
            data.update(guild_id=guild.id, context=0,
                        member=member([], user=author, permissions=str(permissions)))
        else:
            data.update(user=author, context=1)
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def press(self, message: dict[str, Any], custom_id: str, author: dict[str, Any], *,
                    guild: Guild | None = None, permissions: int = EVERYONE,
                    as_shown: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Dispatch INTERACTION_CREATE for a press of the button `custom_id` under the bot's `message` (it must be
        there), as Discord sends it: type 3, the message with its components as they are now (`as_shown`: as a
        client that has not caught up still shows them)."""
        components = self._components.get(message["id"], []) if as_shown is None else as_shown
        if not any(c.get("custom_id") == custom_id for row in components for c in row.get("components", [])):
            raise AssertionError(f"message {message['id']} has no button {custom_id!r}: {components}")
        data: dict[str, Any] = {
            "id": snowflake(), "application_id": self.application_id, "type": 3, "token": f"itoken-{snowflake()}",
            "version": 1, "locale": "en-US", "attachment_size_limit": 10_485_760, "app_permissions": "0",
            "data": {"custom_id": custom_id, "component_type": 2},
            "message": {**message, "components": components},
            "channel_id": message["channel_id"], "channel": {"id": message["channel_id"], "type": 0 if guild else 1}}
        if guild is not None:
            data.update(guild_id=guild.id, context=0, member=member([], user=author, permissions=str(permissions)))
        else:
            data.update(user=author, context=1)
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def replay(self, message: dict[str, Any]) -> None:
        """MESSAGE_CREATE for `message` (as `message()` returned it) once more, as a gateway replays events after
        a RESUME: the same id, a new sequence number."""
        await self.dispatch("MESSAGE_CREATE", dict(message))

    def _as_received(self, event: str, data: dict[str, Any], identify: dict[str, Any]) -> dict[str, Any]:
        """What a session is sent: without the Message Content intent, a guild message that does not mention the
        bot (and is not its own) has its content fields emptied, as Discord does."""
        if event not in ("MESSAGE_CREATE", "MESSAGE_UPDATE") or "guild_id" not in data:
            return data
        mentioned = any(u.get("id") == self.bot["id"] for u in data.get("mentions", []))
        if identify.get("intents", 0) & MESSAGE_CONTENT or mentioned or data.get("author") == self.bot:
            return data
        return data | CONTENT_FIELDS

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send any gateway event (`t`, `d`) to the connected bot, as a real gateway would: to the one session
        whose shard holds its server (DMs: shard 0's)."""
        if event == "INTERACTION_CREATE":
            self._interactions[data["id"]] = {"type": data["type"], "answered": False}
            self._tokens.add(data["token"])
        guild = guild_of(event, data)
        for session in list(self._sessions.values()):
            if session.holds(guild):
                await session.ws.send_str(json.dumps({"op": 0, "t": event, "s": session.next_seq(),
                                                      "d": self._as_received(event, data, session.identify)}))

    # --- server ----------------------------------------------------------------------------

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{channel}/{id}/{filename}", self._cdn)
        api = "/api/v{version:\\d+}"
        for method, path, handler in (
            ("GET", "/users/@me", self._me), ("GET", "/oauth2/applications/@me", self._application),
            ("GET", "/applications/@me", self._application),
            ("GET", "/gateway", self._gateway_info), ("GET", "/gateway/bot", self._gateway_info),
            ("PUT", "/applications/{app}/commands", self._sync),
            ("PUT", "/applications/{app}/guilds/{guild}/commands", self._sync),
            ("POST", "/channels/{channel}/messages", self._create_message),
            ("PATCH", "/channels/{channel}/messages/{message}", self._edit_message),
            ("DELETE", "/channels/{channel}/messages/{message}", self._delete_message),
            ("POST", "/channels/{channel}/typing", self._typing),
            ("POST", "/interactions/{interaction}/{token}/callback", self._callback),
            ("POST", "/webhooks/{app}/{token}", self._followup),
        ):
            app.router.add_route(method, api + path, handler)
        self._runner, url = await serve(app)
        self.api_base, self.gateway_url = f"{url}/api/v10", f"ws{url[4:]}/gateway"
        self.root = url
        return self

    async def __aexit__(self, *exc: object) -> None:
        for ws in list(self._sessions):
            await ws.close()
        assert self._runner is not None
        await self._runner.cleanup()

    @staticmethod
    def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        # exactly "application/json": json_response's "; charset=utf-8" makes discord.py read the body as text
        return web.Response(body=json.dumps(data).encode(), status=status,
                            headers={"Content-Type": "application/json", **(headers or {})})

    @web.middleware
    async def _record(self, request: web.Request, handler) -> web.StreamResponse:
        if request.path == "/gateway" or request.path.startswith("/attachments/"):  # not the REST API
            return await handler(request)
        self.requests.append((request.method, request.path))
        for failure in self._failures:
            method, part, response = failure
            if request.method == method and part in request.path:
                self._failures.remove(failure)
                return response
        webhook = request.path.startswith(("/api/v10/webhooks/", "/api/v10/interactions/"))
        if not webhook and request.headers.get("Authorization") != f"Bot {self.token}":
            return self._json({"message": "401: Unauthorized", "code": 0}, 401)
        answer = await handler(request)
        for lost in self._lost:
            method, part, response = lost
            if request.method == method and part in request.path and answer.status < 300:
                self._lost.remove(lost)
                return response
        return answer

    async def _cdn(self, request: web.Request) -> web.StreamResponse:
        """An attachment's bytes, streamed, if the link's signature holds (else 404, as Discord's CDN)."""
        query = f"ex={request.query.get('ex', '')}&is={request.query.get('is', '')}"
        digest = hmac.new(_CDN_KEY, f"{request.path}?{query}".encode(), hashlib.sha256).hexdigest()
        data = self.files.get(request.match_info["id"])
        if data is None or not hmac.compare_digest(digest, request.query.get("hm", "")):
            return web.Response(status=404, text="This content is no longer available.")
        self.downloads.append((request.match_info["filename"], dict(request.headers)))
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream",
                                               "Content-Length": str(len(data))})
        await response.prepare(request)
        for start in range(0, len(data), 1 << 16):
            await response.write(data[start:start + (1 << 16)])
        await response.write_eof()
        return response

    async def _me(self, request: web.Request) -> web.Response:
        return self._json(self.bot)

    async def _application(self, request: web.Request) -> web.Response:
        return self._json({"id": self.application_id, "name": self.bot["username"], "description": "", "icon": None,
                           "bot_public": True, "bot_require_code_grant": False, "verify_key": "00" * 32,
                           "owner": user("owner"), "flags": self._flags(), "bot": self.bot})

    def _flags(self) -> int:
        if self.application_flags is not None:
            return self.application_flags
        return GATEWAY_MESSAGE_CONTENT_LIMITED if self.message_content_enabled else 0

    async def _gateway_info(self, request: web.Request) -> web.Response:
        return self._json({"url": self.gateway_url, "shards": self.shards,
                           "session_start_limit": self.starts.payload()})

    async def _sync(self, request: web.Request) -> web.Response:
        commands = [{**c, "id": snowflake(), "application_id": self.application_id, "version": snowflake(),
                     "type": c.get("type", 1)} for c in await request.json()]
        self.commands[request.match_info.get("guild")] = commands
        return self._json(commands)

    def _message(self, channel: str, body: dict[str, Any], author: dict[str, Any]) -> dict[str, Any]:
        """What Discord answers for a created message (its id and author are the fake's; the text the bot's)."""
        return {"id": snowflake(), "channel_id": channel, "author": author, "content": body.get("content") or "",
                "timestamp": now(), "edited_timestamp": None, "tts": False, "mention_everyone": False,
                "mentions": [], "mention_roles": [], "attachments": [], "embeds": [], "pinned": False,
                "type": 19 if body.get("message_reference") else 0, "flags": body.get("flags", 0)}

    @staticmethod
    def _bad_components(components: Any) -> str | None:
        """Why Discord would refuse these message components (None: it takes them)."""
        if not isinstance(components, list) or len(components) > 5:
            return "components: at most 5 action rows"
        for row in components:
            buttons = row.get("components") if isinstance(row, dict) and row.get("type") == 1 else None
            if not isinstance(buttons, list) or not 1 <= len(buttons) <= 5:
                return "an action row holds 1 to 5 components"
            for button in buttons:
                if not isinstance(button, dict) or button.get("type") != 2 or button.get("style") not in range(1, 7):
                    return "a button needs type 2 and a style of 1-6"
                if not (button.get("label") or button.get("emoji")) or len(button.get("label") or "") > 80:
                    return "a button needs a label (at most 80 characters) or an emoji"
                link = button["style"] == 5
                custom = button.get("custom_id")
                if link != ("url" in button) or not link and not (isinstance(custom, str) and 1 <= len(custom) <= 100):
                    return "a button needs a custom_id of 1-100 characters (a link button a url instead)"
        return None

    def _invalid(self, body: dict[str, Any]) -> web.Response | None:
        """Discord's 400 for a message body it would refuse."""
        if len(body.get("content") or "") > 2000:
            return self._json({"message": "Invalid Form Body", "code": 50035,
                               "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}}}, 400)
        nonce = body.get("nonce")
        if nonce is not None and (isinstance(nonce, bool) or not isinstance(nonce, (str, int))
                                  or len(str(nonce)) > MAX_NONCE):
            return self._json({"message": "Invalid Form Body", "code": 50035,
                               "errors": {"nonce": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH",
                                                                 "message": "Must be 25 or fewer in length."}]}}},
                              400)
        if "components" in body and (problem := self._bad_components(body["components"])):
            return self._json({"message": "Invalid Form Body", "code": 50035,
                               "errors": {"components": {"_errors": [{"code": "COMPONENT_INVALID",
                                                                      "message": problem}]}}}, 400)
        return None

    def _earlier(self, channel: str, body: dict[str, Any]) -> web.Response | None:
        """The message an enforced nonce made within NONCE_TTL, as it is now (None: none, make a new one)."""
        nonce = body.get("nonce")
        if nonce is None or not body.get("enforce_nonce"):
            return None
        earlier = self._nonces.get((self.bot["id"], str(nonce)))
        if earlier is None or time.monotonic() - earlier[1] >= NONCE_TTL:
            return None
        message = earlier[0]
        self.repeats.append({**body, "channel_id": channel, "id": message["id"]})
        return self._json({**message, "components": self._components.get(message["id"], [])})

    def _keep_nonce(self, message: dict[str, Any], body: dict[str, Any]) -> None:
        if body.get("nonce") is not None:
            message["nonce"] = str(body["nonce"])
            self._nonces[(self.bot["id"], str(body["nonce"]))] = (message, time.monotonic())

    async def _create_message(self, request: web.Request) -> web.Response:
        (body, files), channel = await read_form(request), request.match_info["channel"]
        if (refused := self._invalid(body)) is not None:
            return refused
        if (earlier := self._earlier(channel, body)) is not None:
            return earlier
        if int(body.get("flags") or 0) & IS_VOICE_MESSAGE:
            return self._voice_message(channel, body, files)
        message = self._message(channel, body, self.bot)
        self._keep_nonce(message, body)
        if body.get("components"):
            self._components[message["id"]] = body["components"]
        self.sent.append({**body, "channel_id": channel, "id": message["id"], "at": time.monotonic()})
        self.created.append(message)
        return self._json({**message, "components": body.get("components") or []})

    def _voice_message(self, channel: str, body: dict[str, Any], files: dict[str, tuple[str, bytes]]) -> web.Response:
        if channel in self.no_voice:
            return self._json({"message": "Cannot send voice messages in this channel", "code": 50173}, 403)
        if (refusal := voice_refusal(body, files)) is not None:
            return self._json(refusal, 400)
        ((filename, data),) = files.values()
        info = ogg_opus(data)
        message = self._message(channel, body, self.bot)
        message["attachments"] = [voice_attachment(channel, body["attachments"][0], filename, data, info, snowflake())]
        self._keep_nonce(message, body)
        self.voices.append({**body, "channel_id": channel, "id": message["id"], "audio": data, "ogg": info,
                            "at": time.monotonic()})
        self.created.append(message)
        return self._json(message)

    async def _edit_message(self, request: web.Request) -> web.Response:
        body, channel, message_id = await request.json(), request.match_info["channel"], request.match_info["message"]
        original = next((m for m in self.created if m["id"] == message_id and m["channel_id"] == channel), None)
        if original is None or message_id in self.deleted:
            return self._json({"message": "Unknown Message", "code": 10008}, 404)
        if (refused := self._invalid(body)) is not None:
            return refused
        if "content" in body:
            original |= {"content": body.get("content") or "", "edited_timestamp": now()}
        if "components" in body:  # absent: kept as they are
            self._components[message_id] = body["components"] or []
        self.edits.append({**body, "channel_id": channel, "id": message_id, "at": time.monotonic()})
        return self._json({**original, "components": self._components.get(message_id, [])})

    async def _delete_message(self, request: web.Request) -> web.Response:
        self.deleted.append(request.match_info["message"])
        return web.Response(status=204)

    async def _typing(self, request: web.Request) -> web.Response:
        self.typing.append(request.match_info["channel"])
        return web.Response(status=204)

    async def _callback(self, request: web.Request) -> web.Response:
        body = await request.json()
        interaction = self._interactions.get(request.match_info["interaction"])
        if interaction is None:
            return self._json({"message": "Unknown interaction", "code": 10062}, 404)
        if interaction["answered"]:
            return self._json({"message": "Interaction has already been acknowledged.", "code": 40060}, 400)
        allowed = {2: {4, 5, 9}, 3: {4, 5, 6, 7, 9}}.get(interaction["type"], set())
        if body.get("type") not in allowed:
            return self._json({"message": "Invalid Form Body", "code": 50035,
                               "errors": {"type": {"_errors": [{"code": "INTERACTION_RESPONSE_TYPE_INVALID"}]}}}, 400)
        interaction["answered"] = True
        self.callbacks.append({**body, "interaction_id": request.match_info["interaction"]})
        flags = (body.get("data") or {}).get("flags", 0)
        return self._json({"interaction": {"id": request.match_info["interaction"], "type": interaction["type"],
                                           "response_message_loading": body["type"] == 5,
                                           "response_message_ephemeral": bool(flags & 64)}})

    async def _followup(self, request: web.Request) -> web.Response:
        if request.match_info["app"] != self.application_id:
            return self._json({"message": "Unknown Webhook", "code": 10015}, 404)
        if request.match_info["token"] not in self._tokens:
            return self._json({"message": "Invalid Webhook Token", "code": 50027}, 401)
        body = await request.json()
        self.followups.append({**body, "token": request.match_info["token"]})
        return self._json({**self._message("0", body, self.bot), "webhook_id": self.application_id})

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 45_000}}))
        try:
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                payload = json.loads(frame.data)
                if payload["op"] == 1:
                    await ws.send_str(json.dumps({"op": 11}))
                elif payload["op"] == 6:  # RESUME: the fake keeps no sessions, so it is invalid: identify again
                    await ws.send_str(json.dumps({"op": 9, "d": False}))
                elif payload["op"] == 2:
                    await self._identified(ws, payload["d"])
        finally:
            self._sessions.pop(ws, None)
        return ws

    async def _identified(self, ws: web.WebSocketResponse, identify: dict[str, Any]) -> None:
        if identify.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        if (shard := shard_field(identify)) is None:
            await ws.close(code=4010, message=b"Invalid shard.")
            return
        if identify.get("intents", 0) & MESSAGE_CONTENT and not self.message_content_enabled:
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        session = Session(ws, identify, *shard)
        guilds = [g for g in self.guilds if session.holds(g.id)]
        if len(guilds) > self.guilds_per_shard:
            await ws.close(code=4011, message=b"Sharding required.")
            return
        if not self.starts.take(session.shard):  # its bucket started a session less than 5 s ago
            self.invalid_sessions.append({**identify, "at": time.monotonic()})
            await ws.send_str(json.dumps({"op": 9, "d": False}))
            return
        self.identify = identify
        self.identifies.append({**identify, "at": time.monotonic()})
        ready = {"v": 10, "user": self.bot, "session_id": f"session-{snowflake()}",
                 "resume_gateway_url": self.gateway_url,
                 "guilds": [{"id": g.id, "unavailable": True} for g in guilds],
                 "application": {"id": self.application_id, "flags": self._flags()}, "private_channels": [],
                 "relationships": [], **({"shard": list(shard)} if "shard" in identify else {})}
        await ws.send_str(json.dumps({"op": 0, "t": "READY", "s": session.next_seq(), "d": ready}))
        for guild in guilds:
            await ws.send_str(json.dumps({"op": 0, "t": "GUILD_CREATE", "s": session.next_seq(),
                                          "d": guild.payload(self.bot)}))
        self._sessions[ws] = session
