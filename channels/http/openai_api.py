"""OpenAI's Chat Completions API on the HTTP channel's port: Open WebUI, LibreChat, scripts, Home Assistant.

    POST /v1/chat/completions   a turn of the chat `http:<X-Tusk-Chat>` (without the header: one chat per key,
                                `openai-<hash of the key>`; never the `user` field, which names the person)
    GET  /v1/models             TUSK_MODEL and the TUSK_MODELS labels the owner allows

Same token as the rest of the API (`Authorization: Bearer ...`: what `api_key` is in a client). The turn
runs through the bus like any message (channels/http/__init__.py `run_turn`): memory, commands, limits, media
and /forget behave as in any chat. What is stored (channels/http/openai_wire.py `reconcile`):
  - a new message: the trailing user message(s) after the client's last assistant message, and the answer;
    the rest of what the client resends is its copy of the session, never stored again
  - a regenerate (the last user message sent again without the answer the session has for it): answered
    again without the last exchange in the prompt; nothing is stored (the session keeps the first answer)
  - a `system` (or `developer`) message: for that request only, under the owner's instructions; not stored
`max_tokens` bounds the reply within the reply reserve; `temperature` is applied to that request.
Errors are OpenAI's body with its status codes: 400 (the field named), 401, 404 (unknown model), 429 (a spend
limit), 503 (the model unavailable or Tusk shutting down), 502 (the model refused), 500 (a crash).
A reply read out (the chat's /voice: bot/speech/) is linked from the answer's message as `tusk_voice`
(`{"url", "mime_type", "duration_secs", "bytes"}`, channels/http/voice.py); streamed, in the last delta
before the stop. Clients that do not know the field ignore it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence

from aiohttp import web

from bot.errors import BusClosed, MediaRefused
from bot.events import Attachment, ChatKey, ClientTurn, InboundMessage, TurnResult
from channels.http import API_KEY, CONTROL, SECURITY_HEADERS, HttpChannel
from channels.http.openai_wire import ApiError, ChatRequest, chunk, completion, parse, reconcile, usage_body
from memory.media import chunks_of

History = Callable[[ChatKey], Awaitable[Sequence[tuple[str, str]]]]  # the chat's unconsolidated (role, text) messages
DATA_URI = re.compile(r"data:(image/[a-z0-9.+-]+);base64,(.*)", re.S)
OUTCOMES = {  # a turn that ended without the model's answer -> (status, type, code)
    "spend_limit": (429, "insufficient_quota", "spend_limit_reached"),
    "llm_unavailable": (503, "server_error", "model_unavailable"),
    "llm_error": (502, "server_error", "model_error"),
    "crash": (500, "server_error", None),
    "too_long": (400, "invalid_request_error", "context_length_exceeded"),
}


def completion_id() -> str:
    """A completion's id, unique across restarts and processes (96 random bits), in OpenAI's `chatcmpl-` form."""
    return f"chatcmpl-tusk{secrets.token_hex(12)}"


def default_chat(authorization: str) -> str:
    """One chat per key: `openai-` and a short hash of the bearer token (the key itself is never stored)."""
    return "openai-" + hashlib.sha256(authorization.encode()).hexdigest()[:12]


class CompletionStream:
    """A streaming request's response, and the draft (bot/stream.py) the agent writes the reply to: OpenAI's
    chunks. Opened at the first text, so a turn that fails before any still gets its error status."""

    interval = 0.05

    def __init__(self, request: web.Request, id_: str, model: str) -> None:
        self.request, self.id, self.model = request, id_, model
        self.response = web.StreamResponse(headers={**SECURITY_HEADERS, "Content-Type": "text/event-stream",
                                                    "X-Accel-Buffering": "no"})
        self.replies: list[str] = []
        self.voices: list[dict] = []  # the spoken reply's link (channels/http/voice.py)
        self._part = ""  # the reply being written, as far as it was sent
        self._sent = 0  # replies already sent whole
        self._started = False

    async def _data(self, payload: object) -> None:
        if not self.response.prepared:
            await self.response.prepare(self.request)
        await self.response.write(f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode())

    async def _text(self, text: str) -> None:
        if not text:
            return
        delta = {"content": text} if self._started else {"role": "assistant", "content": text}
        self._started = True
        await self._data(chunk(self.id, self.model, delta))

    async def show(self, text: str) -> None:
        if text.startswith(self._part):  # a preview that started over is not taken back: `finish` settles it
            await self._text(("\n\n" if self._sent and not self._part else "") + text[len(self._part):])
            self._part = text

    async def status(self, text: str) -> None:
        """A tool step: the reply is written afresh after it (what was sent stays)."""
        if self._part:
            await self._text("\n\n")
        self._part = ""

    async def finish(self, text: str, verbatim: bool = False) -> None:  # OpenAI's content is text either way
        if text.startswith(self._part):
            await self._text(("\n\n" if self._sent and not self._part else "") + text[len(self._part):])
        self.replies.append(text)
        self._sent, self._part = len(self.replies), ""

    async def end(self, prompt: int, done: int, include_usage: bool) -> None:
        """The replies not written through the draft (short ones, commands), the stop, the usage, [DONE]."""
        for reply in self.replies[self._sent:]:
            await self._text(("\n\n" if self._started else "") + reply)
        if not self._started:
            await self._text(" ")  # an empty answer is still an answer with its role
        if self.voices:
            await self._data(chunk(self.id, self.model, {"tusk_voice": self.voices[-1]}))
        await self._data(chunk(self.id, self.model, {}, "stop"))
        if include_usage:
            await self._data(chunk(self.id, self.model, None, usage=usage_body(prompt, done)))
        await self.response.write(b"data: [DONE]\n\n")
        await self.response.write_eof()


class OpenAIApi:
    def __init__(self, channel: HttpChannel, default_model: str, labels: Mapping[str, str],
                 history: History) -> None:
        self.channel = channel
        self.default_model = default_model  # TUSK_MODEL: a request naming it uses it
        self.labels = dict(labels)  # TUSK_MODELS: label -> litellm model string
        self.history = history

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/chat/completions", self.complete), web.get("/v1/models", self.models)]

    async def models(self, request: web.Request) -> web.Response:
        names = [self.default_model, *(label for label in self.labels if label != self.default_model)]
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "tusk"} for name in names]})

    async def complete(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._complete(request)
        except ApiError as exc:
            return web.json_response(exc.body(), status=exc.status)

    def _chat(self, request: web.Request) -> ChatKey:
        """The chat: X-Tusk-Chat, else the key's own; an owner's API key (bot/access/api_keys.py) only reaches
        the chats named with its prefix."""
        key = request.get(API_KEY)
        prefix = key.prefix if key is not None else ""
        name = request.headers.get("X-Tusk-Chat", "").strip()
        name = name or prefix + default_chat(request.headers.get("Authorization", ""))
        if not name.startswith(prefix):
            raise ApiError(403, f"X-Tusk-Chat: this key reaches only the chats whose names start with {prefix!r}",
                           "permission_error", param="X-Tusk-Chat", code="chat_not_allowed")
        if CONTROL.search(name):
            raise ApiError(400, "X-Tusk-Chat: control characters are not allowed", param="X-Tusk-Chat")
        try:
            return ChatKey(self.channel.name, name)
        except ValueError as exc:
            raise ApiError(400, f"X-Tusk-Chat: {exc}", param="X-Tusk-Chat") from exc

    def _model(self, req: ChatRequest) -> str:
        if req.model == self.default_model:
            return self.default_model
        if req.model in self.labels:
            return self.labels[req.model]
        allowed = ", ".join([self.default_model, *self.labels])
        raise ApiError(404, f"The model '{req.model}' does not exist here: use one of {allowed} (GET /v1/models)",
                       param="model", code="model_not_found")

    async def _images(self, key: ChatKey, urls: Sequence[str]) -> tuple[Attachment, ...]:
        if urls and self.channel.media is None:
            raise ApiError(400, "this server takes no images", param="messages")
        kept = []
        for n, url in enumerate(urls, 1):
            match = DATA_URI.fullmatch(url)
            if match is None:
                raise ApiError(400, "image_url: only data: URIs (base64 images) are taken, not links",
                               param="messages")
            try:
                data = base64.b64decode(match[2], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ApiError(400, f"image_url: bad base64 data ({exc})", param="messages") from exc
            mime = match[1]
            assert self.channel.media is not None  # checked above: urls are taken only with a media store
            try:
                kept.append(await self.channel.media.keep(key, chunks_of(data), name=f"image-{n}.{mime[6:]}",
                                                          mime=mime, size=len(data)))
            except MediaRefused as exc:
                raise ApiError(400, f"image_url: {exc}", param="messages") from exc
        return tuple(kept)

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        req = parse(await request.read())
        key = self._chat(request)
        model = self._model(req)
        turn = reconcile(req.messages, await self.history(key))
        if not turn.text.strip() and not turn.images:
            raise ApiError(400, "'messages': the last user message has no text", param="messages")
        attachments = await self._images(key, turn.images)
        client = ClientTurn(system=turn.system, model=model, regenerate=turn.regenerate,
                            max_tokens=req.max_completion_tokens or req.max_tokens, temperature=req.temperature)
        msg = InboundMessage(key, turn.text, sender_id=req.user or "openai", attachments=attachments, client=client)
        id_ = completion_id()
        if req.stream:
            return await self._streamed(request, msg, req, id_)
        replies: list[str] = []
        voices: list[dict] = []
        try:
            result = await self.channel.run_turn(msg, replies, voices=voices)
        except BusClosed as exc:
            raise ApiError(503, str(exc), "server_error", code="shutting_down") from exc
        self._refused(result, replies)
        answer = completion(id_, req.model, "\n\n".join(replies), result.tokens_in, result.tokens_out)
        if voices:
            answer["choices"][0]["message"]["tusk_voice"] = voices[-1]
        return web.json_response(answer)

    @staticmethod
    def _refused(result: TurnResult, replies: Sequence[str]) -> None:
        """The turn's failure as OpenAI's error (its reply, the reason with the fix, is the message)."""
        if (failed := OUTCOMES.get(result.outcome)) is not None:
            status, kind, code = failed
            raise ApiError(status, "\n\n".join(replies) or result.outcome, kind, code=code)

    async def _streamed(self, request: web.Request, msg: InboundMessage, req: ChatRequest,
                        id_: str) -> web.StreamResponse:
        out = CompletionStream(request, id_, req.model)
        result = TurnResult()
        try:
            result = await self.channel.run_turn(msg, out.replies, out, voices=out.voices)
        except BusClosed as exc:
            if not out.response.prepared:
                raise ApiError(503, str(exc), "server_error", code="shutting_down") from exc
        if not out.response.prepared:
            self._refused(result, out.replies)
        try:
            await out.end(result.tokens_in, result.tokens_out,
                          bool(req.stream_options and req.stream_options.include_usage))
        except ConnectionResetError:  # the client went away: the turn ran and its answer is saved
            pass
        return out.response
