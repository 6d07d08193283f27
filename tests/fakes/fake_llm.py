"""A real OpenAI-compatible chat-completions server on 127.0.0.1, for tests through real litellm.

    async with FakeLLM() as llm:
        llm.script(Reply(text="hi"), Reply(tool_calls=[("c1", "current_time", {})]))
        ... litellm.acompletion(model="openai/fake", api_base=llm.base_url, api_key="sk-test", ...)
        llm.requests   # every request body, in arrival order

Replies come from the script (FIFO), then from `responder(body)` if set, else echo the
last user message as "echo: <text>". Streaming requests get SSE chunks as OpenAI sends them
(a word per chunk; a tool call's id and name first, its arguments in pieces), paced by
`token_delay`, dropped mid-way by `cut_after`, held after `hold_after` chunks until the test sets
`hold` (to look at what a client shows of a reply still being written); the Ollama route streams NDJSON.
A reply's usage, where its `Reply` gives none, bills the whole prompt as a provider does (`prompt_tokens`):
the messages, each image at a fixed figure, and the tool schemas with the preamble a chat template puts
around them.

`attributing_responder` (set it as `responder`) plays a model that keeps a group's memory: a
consolidation request gets `save_memory` with each "my X is Y" filed under its speaker's
`## <Name>` section (plus `## The group`) and a history entry quoting who said what; a
request to erase a person from a history entry gets the entry without the sentences naming
them; anything else is echoed.

A `Reply` can take the shapes real providers send: a verbatim `message` (content as a list
of parts, reasoning fields, odd tool calls), `choices` (e.g. none at all), a
`finish_reason` ("length", "content_filter"), `reasoning` (DeepSeek's `reasoning_content`),
a `raw_body` with any status (an error object in a 200, a vendor's window error: see
`overflow_body`), and `trickle` to send the body a few bytes at a time.

`quirk` makes the OpenAI-compatible endpoint break streams as real servers do, deterministically (the
scripted reply stays queued for the request that asks again): "llamacpp" (with `window`): a prompt over
the window gets llama-cpp-python's 400 unstreamed and, streamed, a 200 event stream closed with no chunk;
"drops_streamed_calls": a streamed request with tools gets empty content and `stop` where its reply
has tool calls (Ollama's /v1, ollama#9632); "ignores_stream": one whole JSON body to a streamed request;
"html": a web server's front page (a base URL that is not the API); "parts_in_deltas": streamed
`delta.content` as a list of parts (Mistral); "one_chunk": the whole reply, calls included, in one
chunk (Ollama with tools, ollama#9092); "error_in_stream": the reply's `raw_body` (an error object)
sent as an event of a 200 stream.

`one_slot` answers chat completions one at a time (a one-slot llama.cpp server, whose `/props` says
`total_slots` when `props` is set); a streamed client that hangs up stops its answer (`hangups`);
`finished` says when each answer was all sent. As llama-cpp-python's server does by default
(`interrupt_requests`), a stream in progress ends at once with `[DONE]` and no finish reason when another
request waits for the slot (`interrupted` counts them; `interrupts = False` turns it off).

Images in a request are checked as OpenAI checks them: every `image_url` part must be a
`data:image/<png|jpeg|gif|webp>;base64,` URI that decodes to an image of at most
`IMAGE_MAX_BYTES`; anything else gets OpenAI's 400 (and is not scripted). Audio sent to
`/v1/audio/transcriptions` (multipart, as OpenAI's API takes it) is "transcribed" as
`heard <first 8 hex of its sha256>` (`heard(data)`); `transcriptions` records each upload.

Anthropic's Messages API is served at `/v1/messages` (an `anthropic/` model with `api_base` =
`root_url`), as strictly as the real one (tests/fakes/anthropic_wire.py): the same `Reply`s
become content blocks (`reasoning` a signed thinking block when the request enables thinking,
`redacted` a redacted_thinking block), streamed as Anthropic's SSE events; a `status` gets
Anthropic's error body; an invalid request its 400 (recorded in `refusals`, script untouched);
`error_after` sends an `error` event (overloaded_error) inside the stream; with `claude_models`
set, another model gets Anthropic's 404 `not_found_error` "model: <name>".

Google's Gemini API is served at `/v1beta/models/<model>:generateContent` and `:streamGenerateContent`
(a `gemini/` model with `api_base` = `root_url + "/v1beta"`), as strictly as the real one
(tests/fakes/gemini_wire.py): the same `Reply`s become parts (the first function call signed),
`block_reason` a blocked prompt; an invalid request gets Google's 400 (in `refusals`, script untouched).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import io
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from PIL import Image, UnidentifiedImageError

from tests.fakes import anthropic_wire as anthropic
from tests.fakes import gemini_wire as gemini
from tests.fakes.loopback import serve, wait_until


INDEX = web.RequestKey("index", int)  # a request's place in FakeLLM.requests
SCRIPTED = web.RequestKey("scripted", bool)  # whether its reply came from the script (not a responder)


@dataclass
class Reply:
    text: str | None = "ok"
    tool_calls: list[tuple[str, str, dict | str]] = field(default_factory=list)  # (id, name, arguments)
    delay: float = 0.0
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None
    message: dict[str, Any] | None = None  # sent as the choice's message verbatim
    choices: list[dict[str, Any]] | None = None  # sent as `choices` verbatim
    finish_reason: str | None = None
    reasoning: str | None = None  # reasoning_content beside the content (DeepSeek, vLLM, OpenRouter via litellm)
    usage: dict[str, int] | None = None
    trickle: float = 0.0  # seconds between 16-byte pieces of the body
    token_delay: float = 0.0  # streamed: seconds between chunks (a token each)
    cut_after: int | None = None  # streamed: the connection drops after this many chunks
    redacted: str | None = None  # Anthropic wire, thinking on: a redacted_thinking block (its data encodes this)
    error_after: int | None = None  # Anthropic wire, streamed: an `error` event (overloaded_error) after this many
    block_reason: str | None = None  # Gemini wire: the prompt is blocked (promptFeedback.blockReason, no candidates)
    hold: asyncio.Event | None = None  # streamed: after `hold_after` chunks, wait until the test sets it
    hold_after: int = 0


# What servers answer when the prompt is over the model's window, as their docs and code give them.
OVERFLOW_BODIES = {
    "openai": (400, {"error": {"message": "This model's maximum context length is {n} tokens. However, your "
                               "messages resulted in {m} tokens. Please reduce the length of the messages.",
                               "type": "invalid_request_error", "param": "messages",
                               "code": "context_length_exceeded"}}),
    "vllm": (400, {"object": "error", "message": "This model's maximum context length is {n} tokens. However, "
                   "you requested {m} tokens ({m} in the messages, 0 in the completion). Please reduce the length "
                   "of the messages or completion.", "type": "BadRequestError", "param": None, "code": 400}),
    "lmstudio": (400, {"error": "Trying to keep the first {m} tokens when context the overflows. However, the "
                       "model is loaded with context length of only {n} tokens, which is not enough. Try to load "
                       "the model with a larger context length, or provide a shorter input"}),
    "llamacpp": (400, {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                 "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": "{m}",
                                 "n_ctx": "{n}"}}),
    "ollama": (400, {"error": {"message": "prompt too long; exceeded max context length by {d} tokens",
                               "type": "api_error", "param": None, "code": None}}),
    "anthropic": (400, {"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": "prompt is too long: {m} tokens > {n} maximum"}}),
    "gemini": (400, {"error": {"code": 400, "message": "The input token count ({m}) exceeds the maximum number "
                                                       "of tokens allowed ({n}).", "status": "INVALID_ARGUMENT"}}),
}


def overflow_body(vendor: str, window: int, prompt: int) -> Reply:
    """The reply `vendor`'s server gives a prompt of `prompt` tokens against a `window`-token window."""
    status, body = OVERFLOW_BODIES[vendor]
    text = json.dumps(body)
    for key, value in (("{n}", window), ("{m}", prompt), ("{d}", prompt - window)):
        text = text.replace(key, str(value))
    text = text.replace('"%d"' % window, str(window)).replace('"%d"' % prompt, str(prompt))
    return Reply(status=status, raw_body=text)


IMAGE_MAX_BYTES = 20 * 1024 * 1024  # OpenAI's limit for one image
IMAGE_URI = re.compile(r"data:image/(png|jpeg|gif|webp);base64,(.*)", re.DOTALL)


def heard(data: bytes) -> str:
    """The fake's transcript of an audio file: derived from its bytes, so a test can predict it."""
    return f"heard {hashlib.sha256(data).hexdigest()[:8]}"


def image_problem(part: Any) -> str | None:
    """Why OpenAI would refuse this image part (None if it would take it)."""
    url = (part.get("image_url") or {}).get("url") if isinstance(part.get("image_url"), dict) else None
    match = IMAGE_URI.fullmatch(url or "")
    if match is None:
        return "Invalid image URL: expected a base64-encoded data URI with an image MIME type (png, jpeg, gif, webp)."
    try:
        data = base64.b64decode(match[2], validate=True)
    except (binascii.Error, ValueError):
        return "Invalid base64 image data."
    if len(data) > IMAGE_MAX_BYTES:
        return f"Image too large: {len(data)} bytes, the limit is {IMAGE_MAX_BYTES}."
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return "You uploaded an unsupported image. Please make sure your image is valid."
    return None


def images_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every image part of a request's messages."""
    return [p for m in body.get("messages", []) if isinstance(m.get("content"), list)
            for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url"]


IMAGE_BILLED = 765  # OpenAI's figure for a 1024x1024 image at high detail (85 + 4 tiles x 170)
TOOLS_TEMPLATE = 120  # what a chat template writes around the schemas (Qwen 2.5's tool preamble: ~120 tokens)


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt as a provider bills it, in the fake's tokens (four characters of JSON each): every message,
    an image as `IMAGE_BILLED` (not its base64 size), and the tool schemas with the template around them."""
    messages = [{**m, "content": [p for p in m["content"] if not (isinstance(p, dict) and p.get("type") == "image_url")]}
                if isinstance(m.get("content"), list) else m for m in body.get("messages", [])]
    tools = body.get("tools") or []
    return (len(json.dumps(messages)) // 4 + IMAGE_BILLED * len(images_in(body))
            + (len(json.dumps(tools)) // 4 + TOOLS_TEMPLATE if tools else 0))


def last_user_text(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages", [])):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return "\n".join(p["text"] for p in content if isinstance(p, dict) and "text" in p)
            return content or ""
    return ""


_LINE = re.compile(r"^\[[^\]]+\] (?P<who>.+?): (?P<text>.*)$")
_FACT = re.compile(r"\bmy ([\w ]+?) is ([^.!?,;]+)", re.IGNORECASE)
_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
GROUP_SECTION = "The group"


def _sections(memory: str) -> dict[str, list[str]]:
    """`## Name` -> its lines (text before the first heading is dropped)."""
    out: dict[str, list[str]] = {}
    parts = _SECTION.split(memory)
    for name, body in zip(parts[1::2], parts[2::2]):
        out[name.strip()] = [line for line in body.strip().splitlines() if line.strip()]
    return out


ENTRY_SENTENCES = 30


def consolidate_by_person(user_text: str) -> dict[str, str]:
    """The save_memory arguments a careful model gives for this consolidation request."""
    memory = user_text.split("## Current MEMORY.md", 1)[-1].split("## Conversation excerpt", 1)[0].strip()
    excerpt = user_text.split("## Conversation excerpt", 1)[-1]
    sections = _sections("" if memory == "(empty)" else memory)
    said = []
    for line in excerpt.splitlines():
        match = _LINE.match(line.strip())
        if not match or match["who"] in ("user", "assistant") or match["who"].startswith("tool"):
            continue
        who, text = match["who"], match["text"].strip()
        said.append(f"{who} said: {text.rstrip('.')}.")
        facts = sections.setdefault(who, [])
        facts += [f"- {key.strip()}: {value.strip()}" for key, value in _FACT.findall(text)]
    if len(said) > ENTRY_SENTENCES:  # a summary, like a real model's within its max_tokens: not the transcript
        said = [*said[:ENTRY_SENTENCES], f"And {len(said) - ENTRY_SENTENCES} more messages."]
    group = sections.pop(GROUP_SECTION, []) or ["- a group chat"]
    sections[GROUP_SECTION] = group
    body = "\n\n".join(f"## {name}\n\n" + "\n".join(lines) for name, lines in sections.items())
    return {"history_entry": " ".join(said) or "Nothing of note.", "memory_update": body + "\n"}


def erase_from_entry(user_text: str) -> str:
    """A history entry without the sentences that name any of the listed names."""
    names_line = next(line for line in user_text.splitlines() if line.startswith("Names:"))
    names = [n.strip() for n in names_line.removeprefix("Names:").split(";") if n.strip()]
    entry = user_text.split("## Entry", 1)[-1].strip()
    sentences = re.split(r"(?<=[.!?])\s+", entry)
    kept = [s for s in sentences if not any(n.lower() in s.lower() for n in names)]
    return " ".join(kept).strip() or "NOTHING"


def attributing_responder(body: dict[str, Any]) -> Reply:
    """A model that keeps memory by person (see the module docstring)."""
    system = next((m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system"), "")
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    if "save_memory" in tools:
        return Reply(text=None, tool_calls=[(f"save{len(system) % 97}", "save_memory",
                                             consolidate_by_person(last_user_text(body)))])
    if system.startswith("You erase a person from"):
        return Reply(text=erase_from_entry(last_user_text(body)))
    return Reply(text=f"echo: {last_user_text(body)}")


class FakeLLM:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self._script: deque[Reply] = deque()
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._ids = itertools.count(1)
        self.base_url = ""
        self.models: list[dict[str, Any]] = [{"id": "fake-model", "object": "model"}]  # what /v1/models lists
        self.ollama_context: int | None = None  # set: /api/show answers as Ollama does, with this context_length
        self.arrivals: list[float] = []  # time.monotonic() of each request in `requests`
        self.api_keys: set[str] | None = None  # set: any other key gets OpenAI's 401 invalid_api_key answer
        self.transcriptions: list[dict[str, Any]] = []  # {"model", "filename", "size", "text"} per audio upload
        self.transcribe_status = 200  # another status: transcription uploads get OpenAI's error body with it
        self.cuts = 0  # streams dropped mid-way (`Reply.cut_after`)
        self.streams = 0  # streamed replies begun
        self.first_tokens: list[float] = []  # time.monotonic() when each stream's first text chunk was written
        self.last_tokens: list[float] = []  # ... and when each complete stream's last chunk was
        self.agents: list[str] = []  # the User-Agent of each chat completions request (the client that sent it)
        self.props: dict[str, Any] | None = None  # set: GET /props answers it, as llama.cpp's server does
        self.one_slot = False  # True: chat completions are answered one at a time, as a one-slot llama.cpp server
        self.hangups = 0  # streams whose client closed the connection before their end
        self.finished: dict[int, float] = {}  # index in `requests` -> time.monotonic() its answer was all sent
        self.interrupts = True  # one_slot: a waiting request ends the stream in progress (llama-cpp-python)
        self.interrupted = 0  # streams so ended
        self._slot = asyncio.Lock()
        self._waiting = 0  # requests waiting for the slot
        self.headers: list[dict[str, str]] = []  # Anthropic wire: each /v1/messages request's headers (lower-case)
        self.refusals: list[str] = []  # Anthropic wire: the 400 message of each request refused as invalid
        self.claude_models: set[str] | None = None  # set: any other model gets Anthropic's 404 not_found_error
        self.gemini_placeholders = 0  # Gemini wire: parts sent with the skip-validator placeholder, not a signature
        self.gemini_models: set[str] | None = None  # set: any other model gets Gemini's 404 NOT_FOUND
        self.quirk: str | None = None  # how the OpenAI-compatible endpoint breaks streams (module docstring)
        self.window: int | None = None  # quirk "llamacpp": the server's context size, in the fake's tokens

    def script(self, *replies: Reply) -> None:
        self._script.extend(replies)

    async def wait_for_requests(self, n: int, timeout: float = 5.0) -> None:
        await wait_until(lambda: len(self.requests) >= n, timeout, lambda: f"{len(self.requests)} requests, wanted {n}")

    async def __aenter__(self) -> FakeLLM:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # requests with images, audio uploads
        app.router.add_post("/v1/chat/completions", self._complete)
        app.router.add_post("/chat/completions", self._complete)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/props", self._props)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/api/chat", self._ollama_chat)  # Ollama's native API (litellm's ollama_chat/ route)
        app.router.add_post("/api/show", self._ollama_show)
        app.router.add_get("/api/tags", self._ollama_tags)
        app.router.add_post("/v1/messages", self._messages)  # Anthropic's Messages API (anthropic/ models)
        app.router.add_post("/v1beta/models/{action}", self._generate)  # Gemini API (gemini/ models)
        self._runner, url = await serve(app)
        self.base_url = f"{url}/v1"
        self.root_url = url  # what an anthropic/ model's api_base is (litellm adds /v1/messages)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing.set()
        assert self._runner is not None
        await self._runner.cleanup()

    def _billed(self, body: dict[str, Any]) -> int:
        """The prompt's tokens as this server counts them: llama-cpp-python (quirk "llamacpp") renders no tool
        schemas into the prompt, so they neither count toward its window nor are billed (as measured)."""
        return len(json.dumps(body.get("messages", []))) // 4 if self.quirk == "llamacpp" else prompt_tokens(body)

    def _next(self, body: dict[str, Any]) -> Reply:
        if self._script:
            return self._script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Reply(text=f"echo: {last_user_text(body)}")

    async def _props(self, request: web.Request) -> web.Response:
        if self.props is None:
            return web.json_response({"error": {"code": 404, "message": "File Not Found"}}, status=404)
        return web.json_response(self.props)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": self.models})

    async def _take(self, request: web.Request, view: Callable[[dict], dict] | None = None
                    ) -> tuple[dict[str, Any], Reply]:
        body = await request.json()
        request[INDEX] = len(self.requests)
        self.requests.append(body)
        self.arrivals.append(time.monotonic())
        request[SCRIPTED] = bool(self._script)
        reply = self._next(view(body) if view else body)  # `view`: the body as responders read it
        if reply.delay:  # cut short when the fake closes, so a test never waits out a slow reply
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), reply.delay)
        return body, reply

    async def _ollama_show(self, request: web.Request) -> web.Response:
        """Ollama's /api/show, as its API docs give it (the parts Tusk reads)."""
        name = (await request.json()).get("model", "")
        if self.ollama_context is None:
            raise web.HTTPNotFound()
        if not any(m["id"] == name for m in self.models):
            return web.json_response({"error": f"model '{name}' not found"}, status=404)
        return web.json_response({"modelfile": "# fake", "parameters": "stop \"<|eot_id|>\"", "template": "",
                                  "details": {"family": "llama"}, "capabilities": ["completion", "tools"],
                                  "model_info": {"general.architecture": "llama",
                                                 "llama.context_length": self.ollama_context}})

    async def _ollama_tags(self, request: web.Request) -> web.Response:
        return web.json_response({"models": [{"name": m["id"], "model": m["id"]} for m in self.models]})

    async def _ollama_chat(self, request: web.Request) -> web.Response:
        """Ollama's native /api/chat: its own reply shape (NDJSON when streamed) and error bodies."""
        body, reply = await self._take(request)
        if not any(m["id"] == body.get("model") for m in self.models):
            return web.json_response({"error": f"model \"{body.get('model')}\" not found, try pulling it first"},
                                     status=404)
        if reply.raw_body is not None or reply.status != 200:
            return await self._send(request, reply, reply.raw_body or json.dumps({"error": "fake error"}))
        calls = [{"function": {"name": name, "arguments": args if isinstance(args, dict) else json.loads(args)}}
                 for _, name, args in reply.tool_calls]
        prompt = self._billed(body)
        last = {"model": body.get("model"), "created_at": "2026-12-03T08:00:00Z",
                "message": {"role": "assistant", "content": reply.text or "", **({"tool_calls": calls} if calls else {})},
                "done": True, "done_reason": reply.finish_reason or "stop",
                "prompt_eval_count": (reply.usage or {}).get("prompt_tokens", prompt),
                "eval_count": len(reply.text or "") // 4 + 1}
        if body.get("stream") is False:
            return web.json_response(last)
        # streamed (Ollama's default): one JSON object a line, the text in pieces, the calls and counts in the last
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
        for piece in tokens(reply.text or ""):
            line = {**last, "message": {"role": "assistant", "content": piece}, "done": False}
            for key in ("done_reason", "prompt_eval_count", "eval_count"):
                line.pop(key)
            await resp.write(json.dumps(line).encode() + b"\n")
            if reply.token_delay:
                await asyncio.sleep(reply.token_delay)
        last["message"] = {**last["message"], "content": ""}
        await resp.write(json.dumps(last).encode() + b"\n")
        await resp.write_eof()
        return resp

    def _refused_key(self, request: web.Request) -> web.Response | None:
        """OpenAI's answer to a wrong key (its 401 body names the key partly masked), when keys are checked."""
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if self.api_keys is None or key in self.api_keys:
            return None
        shown = f"{key[:3]}{'*' * max(0, len(key) - 7)}{key[-4:]}" if len(key) > 7 else "***"
        error = {"message": f"Incorrect API key provided: {shown}. You can find your API key at "
                            "https://platform.openai.com/account/api-keys.",
                 "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}
        return web.json_response({"error": error}, status=401)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        """Anthropic's `POST /v1/messages` (tests/fakes/anthropic_wire.py): its headers, checks, shapes and
        errors. A refused request is recorded but takes nothing from the script."""
        raw = await request.json()
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        key = request.headers.get("x-api-key")
        refusal = None
        if not key or (self.api_keys is not None and key not in self.api_keys):
            refusal = (401, "x-api-key header is required" if not key else "invalid x-api-key")
        elif not request.headers.get("anthropic-version"):
            refusal = (400, "anthropic-version: header is required")
        elif (problem := anthropic.request_problem(raw)) is not None:
            refusal = (400, problem)
        elif self.claude_models is not None and raw["model"] not in self.claude_models:
            refusal = (404, f"model: {raw['model']}")
        if refusal is not None:
            self.requests.append(raw)
            self.refusals.append(refusal[1])
            return web.json_response(anthropic.error_body(*refusal), status=refusal[0])
        body, reply = await self._take(request, anthropic.openai_view)
        if reply.raw_body is not None:
            return await self._send(request, reply, reply.raw_body)
        if reply.status != 200:
            return web.json_response(anthropic.error_body(reply.status), status=reply.status,
                                     headers={"request-id": f"req_{next(self._ids)}", **reply.headers})
        message = anthropic.message(f"msg_{next(self._ids):024d}", body, reply)
        if not body.get("stream"):
            return await self._send(request, reply, json.dumps(message))
        return await self._anthropic_stream(request, reply, anthropic.stream_events(message, tokens))

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        """Gemini's `models/{model}:generateContent` and `:streamGenerateContent?alt=sse`
        (tests/fakes/gemini_wire.py); a refused request is recorded but takes nothing from the script."""
        raw = await request.json()
        model, _, action = request.match_info["action"].partition(":")
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        refusal = None
        if not key:
            refusal = (403, None)
        elif self.api_keys is not None and key not in self.api_keys:
            refusal = (400, gemini.KEY_INVALID)
        elif action not in ("generateContent", "streamGenerateContent"):
            refusal = (404, f"Method not found: {action}")
        elif self.gemini_models is not None and model not in self.gemini_models:
            refusal = (404, gemini.model_not_found(model))
        elif (problem := gemini.request_problem(raw, model)) is not None:
            refusal = (400, problem)
        if refusal is not None:
            self.requests.append(raw)
            self.refusals.append(refusal[1] or gemini.MESSAGES[refusal[0]])
            return web.json_response(gemini.error_body(*refusal), status=refusal[0])
        self.gemini_placeholders += gemini.placeholders_in(raw)
        body, reply = await self._take(request, lambda b: {**gemini.openai_view(b), "model": model})
        if reply.raw_body is not None or reply.status != 200:
            return await self._send(request, reply, reply.raw_body or json.dumps(gemini.error_body(reply.status)))
        whole = gemini.response(body, model, reply, f"resp{next(self._ids)}")
        if action == "generateContent":
            return await self._send(request, reply, json.dumps(whole))
        events = [json.dumps(c) for c in gemini.stream_chunks(whole, tokens)]
        return await self._send_events(request, events, reply, "\r\n\r\n")

    async def _anthropic_stream(self, request: web.Request, reply: Reply,
                                events: list[tuple[str, dict[str, Any]]]) -> web.StreamResponse:
        """Anthropic's SSE: `event: <type>` and `data: {...}` per event; `token_delay` and `cut_after` as above."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        self.streams += 1
        for i, (name, data) in enumerate(events):
            if reply.cut_after is not None and i >= reply.cut_after:
                assert request.transport is not None
                request.transport.close()
                self.cuts += 1
                return resp
            if reply.error_after is not None and i >= reply.error_after:  # "Error events" in Streaming Messages
                name, data = "error", anthropic.error_body(529)
            await resp.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            if name == "error":
                break
            if len(self.first_tokens) < self.streams and data.get("delta", {}).get("type") == "text_delta":
                self.first_tokens.append(time.monotonic())
            if reply.token_delay and name == "content_block_delta":
                if self._closing.is_set():
                    break
                await asyncio.sleep(reply.token_delay)
        self.last_tokens.append(time.monotonic())
        await resp.write_eof()
        return resp

    async def _transcribe(self, request: web.Request) -> web.Response:
        """OpenAI's /v1/audio/transcriptions: multipart with `file` and `model`; {"text": ...} back."""
        form = await request.post()
        upload, model = form.get("file"), form.get("model")
        if not isinstance(upload, web.FileField) or not model:
            return web.json_response({"error": {"message": "file and model are required", "type":
                                                "invalid_request_error", "param": None, "code": None}}, status=400)
        if self.transcribe_status != 200:
            return web.json_response({"error": {"message": f"fake error {self.transcribe_status}", "type": "fake_error",
                                                "code": self.transcribe_status}}, status=self.transcribe_status)
        data = upload.file.read()
        text = heard(data)
        self.transcriptions.append({"model": model, "filename": upload.filename, "size": len(data), "text": text})
        if form.get("response_format") == "text":
            return web.Response(text=text)
        return web.json_response({"text": text})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        self._waiting += self.one_slot
        try:
            await self._slot.acquire() if self.one_slot else None
        finally:
            self._waiting -= self.one_slot
        try:
            resp = await self._answer(request)
            if INDEX in request:  # a request taken from the script or the responder
                self.finished[request[INDEX]] = time.monotonic()
            return resp
        finally:
            if self.one_slot:
                self._slot.release()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        raw = await request.json()
        self.agents.append(request.headers.get("User-Agent", ""))
        if (refused := self._refused_key(request)) is not None:
            self.requests.append(raw)
            return refused
        for part in images_in(raw):
            if (problem := image_problem(part)) is not None:
                self.requests.append(raw)
                return web.json_response({"error": {"message": problem, "type": "invalid_request_error",
                                                    "param": None, "code": "invalid_image"}}, status=400)
        if (broken := await self._quirk_before(request, raw)) is not None:
            return broken
        body, reply = await self._take(request)
        if (broken := await self._quirk_after(request, body, reply)) is not None:
            return broken
        if reply.raw_body is not None and reply.status == 200 and body.get("stream"):  # as OpenRouter does
            return await self._send_events(request, [reply.raw_body])
        if reply.raw_body is not None:
            return await self._send(request, reply, reply.raw_body)
        if reply.status != 200:
            error = {"error": {"message": f"fake error {reply.status}", "type": "fake_error", "code": reply.status}}
            return web.json_response(error, status=reply.status, headers=reply.headers)
        calls = [{"id": cid, "type": "function",
                  "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                 for cid, name, args in reply.tool_calls]
        base = {"id": f"chatcmpl-{next(self._ids)}", "created": int(time.time()), "model": body.get("model", "fake")}
        if body.get("stream") and self.quirk != "ignores_stream":
            return await self._stream(request, base, reply, calls)
        prompt = self._billed(body)
        done = len(reply.text or "") // 4 + 1
        message = reply.message or {"role": "assistant", "content": reply.text,
                                    **({"tool_calls": calls} if calls else {}),
                                    **({"reasoning_content": reply.reasoning} if reply.reasoning else {})}
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        choices = reply.choices if reply.choices is not None else [
            {"index": 0, "message": message, "finish_reason": finish}]
        usage = reply.usage or {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
        payload = {**base, "object": "chat.completion", "choices": choices, "usage": usage}
        return await self._send(request, reply, json.dumps(payload))

    async def _quirk_before(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse | None:
        """Quirks that answer before a reply is taken from the script (the module docstring)."""
        if self.quirk == "html":
            self.requests.append(body)
            return web.Response(text="<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head>"
                                     "<body><h1>Welcome to nginx!</h1></body></html>", content_type="text/html")
        prompt = self._billed(body)
        if self.quirk != "llamacpp" or self.window is None or prompt + (body.get("max_tokens") or 0) <= self.window:
            return None
        self.requests.append(body)
        if body.get("stream"):  # llama-cpp-python starts the answer, then fails inside it: no chunk at all
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
            await resp.prepare(request)
            await resp.write_eof()
            return resp
        error = {"message": f"This model's maximum context length is {self.window} tokens. However, you requested "
                            f"{prompt} tokens ({prompt} in the messages, 0 in the completion). Please reduce the "
                            "length of the messages or completion.", "type": "invalid_request_error",
                 "param": "messages", "code": "context_length_exceeded"}
        return web.json_response({"error": error}, status=400)

    async def _quirk_after(self, request: web.Request, body: dict[str, Any], reply: Reply) -> web.StreamResponse | None:
        """Quirks that break a scripted reply as it is streamed; a reply not given is queued again."""
        if not body.get("stream") or self.quirk is None:
            return None
        calls = [{"id": cid, "type": "function",
                  "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                 for cid, name, args in reply.tool_calls]
        base = {"id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": body.get("model", "fake")}
        if self.quirk == "drops_streamed_calls" and calls and body.get("tools"):
            self._script.appendleft(reply)
            empty = [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]
            return await self._send_events(request, [json.dumps({**base, "choices": empty}), "[DONE]"])
        if self.quirk == "ignores_stream":
            return None  # answered below as if `stream` were not there
        if self.quirk == "error_in_stream" and reply.raw_body is not None:
            return await self._send_events(request, [reply.raw_body])
        message = {"role": "assistant", "content": reply.text or "", **({"tool_calls": calls} if calls else {})}
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        if self.quirk == "one_chunk":
            for i, call in enumerate(message.get("tool_calls", [])):
                call["index"] = i
            chunk = {**base, "choices": [{"index": 0, "delta": message, "finish_reason": finish}]}
            return await self._send_events(request, [json.dumps(chunk), "[DONE]"])
        if self.quirk == "parts_in_deltas":
            pieces = [{"role": "assistant", "content": ""}] + [{"content": [{"type": "text", "text": t}]}
                                                               for t in tokens(reply.text or "")]
            events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in pieces]
            events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            return await self._send_events(request, [json.dumps(e) for e in events] + ["[DONE]"])
        return None

    async def _send(self, request: web.Request, reply: Reply, text: str) -> web.StreamResponse:
        if not reply.trickle:
            return web.Response(text=text, status=reply.status, headers=reply.headers,
                                content_type="application/json")
        resp = web.StreamResponse(status=reply.status, headers={"Content-Type": "application/json", **reply.headers})
        await resp.prepare(request)
        data = text.encode()
        for i in range(0, len(data), 16):
            await resp.write(data[i:i + 16])
            if self._closing.is_set():
                break
            await asyncio.sleep(reply.trickle)
        await resp.write_eof()
        return resp

    async def _send_events(self, request: web.Request, events: list[str], reply: Reply | None = None,
                           end: str = "\n\n") -> web.StreamResponse:
        """`data: <event>` each; with `reply`, paced by its `token_delay` and dropped after `cut_after`."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        self.streams += reply is not None
        for i, event in enumerate(events):
            if reply is not None and reply.cut_after is not None and i >= reply.cut_after:
                assert request.transport is not None
                request.transport.close()
                self.cuts += 1
                return resp
            await resp.write(f"data: {event}{end}".encode())
            if reply is not None and reply.token_delay and not self._closing.is_set():
                await asyncio.sleep(reply.token_delay)
        await resp.write_eof()
        return resp

    async def _stream(self, request: web.Request, base: dict, reply: Reply, calls: list[dict]) -> web.StreamResponse:
        """SSE as OpenAI streams: `data: {chunk}` events, the finish reason in the last choice, usage after it
        when asked for (`stream_options.include_usage`), then `data: [DONE]`. `token_delay` paces the chunks;
        `cut_after` drops the connection after that many chunks (mid-text or mid-tool-call)."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           **reply.headers})
        await resp.prepare(request)
        self.streams += 1
        body = await request.json()
        chunks = [{**base, "object": "chat.completion.chunk", "choices": choices}
                  for choices in stream_choices(reply, calls)]
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt = self._billed(body)
            done = len(reply.text or "") // 4 + 1
            usage = reply.usage or {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
            chunks.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        finished = False
        for i, chunk in enumerate(chunks):
            if reply.cut_after is not None and i >= reply.cut_after:
                assert request.transport is not None
                request.transport.close()  # the connection drops: no [DONE], an incomplete chunked body
                self.cuts += 1
                return resp
            try:
                await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
            except ConnectionResetError:  # the client hung up: the generation stops, as llama.cpp's does
                self.hangups += 1
                return resp
            finished = finished or any(c.get("finish_reason") for c in chunk["choices"])
            if self.one_slot and self.interrupts and self._waiting:  # llama-cpp-python: [DONE], no finish reason
                self.interrupted += 1
                if not finished and request[SCRIPTED]:
                    self._script.appendleft(reply)  # for the request that asks again
                break
            if reply.hold is not None and i + 1 == reply.hold_after:  # the test looks at what arrived so far
                await _first(reply.hold.wait(), self._closing.wait())
            if len(self.first_tokens) < self.streams and any(c.get("delta", {}).get("content")
                                                             for c in chunk["choices"]):
                self.first_tokens.append(time.monotonic())
            if reply.token_delay and i:
                if self._closing.is_set():
                    break
                await asyncio.sleep(reply.token_delay)
        self.last_tokens.append(time.monotonic())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


async def _first(*waits: Any) -> None:
    """Return when the first of `waits` is done; the others are cancelled."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()


TOKEN = re.compile(r"\s*\S+|\s+")
MAX_UNPACED_CHUNKS = 200  # litellm and the OpenAI SDK take ~1 ms a chunk: long unpaced test replies come in fewer


def tokens(text: str) -> list[str]:
    """`text` in the pieces a model streams it in: a word with the space before it."""
    return TOKEN.findall(text)


def _call_deltas(index: int, call: dict[str, Any]) -> list[dict[str, Any]]:
    """One tool call as OpenAI streams it: id, type and name in the first delta, the arguments in pieces."""
    function = call.get("function") or {}
    args = function.get("arguments")
    args = args if isinstance(args, str) else json.dumps(args)
    first = {"index": index, "id": call.get("id"), "type": call.get("type", "function"),
             "function": {"name": function.get("name"), "arguments": ""}}
    return [first] + [{"index": index, "function": {"arguments": args[i:i + 8]}} for i in range(0, len(args), 8)]


def stream_choices(reply: Reply, calls: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The `choices` of each chunk of `reply` streamed."""
    if reply.choices is not None:
        return [reply.choices]
    message = reply.message or {"role": "assistant", "content": reply.text, "tool_calls": calls or None,
                                "reasoning_content": reply.reasoning}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("thinking_blocks"):
        deltas.append({"thinking_blocks": message["thinking_blocks"]})
    deltas += [{"reasoning_content": t} for t in tokens(message.get("reasoning_content") or "")]
    content = message.get("content")
    if isinstance(content, list):  # what a server that answers in parts streams: their text
        content = "".join(p.get("text", "") if isinstance(p, dict) and p.get("type") == "text" else ""
                          for p in content)
    words = tokens(content or "")
    if not reply.token_delay and len(words) > MAX_UNPACED_CHUNKS:  # a long reply sent at once: fewer, bigger pieces
        size = -(-len(words) // MAX_UNPACED_CHUNKS)
        words = ["".join(words[i:i + size]) for i in range(0, len(words), size)]
    deltas += [{"content": t} for t in words]
    for i, call in enumerate(message.get("tool_calls") or []):
        deltas += [{"tool_calls": [d]} for d in _call_deltas(i, call)]
    finish = reply.finish_reason or ("tool_calls" if message.get("tool_calls") else "stop")
    out = [[{"index": 0, "delta": d, "finish_reason": None}] for d in deltas]
    out.append([{"index": 0, "delta": {}, "finish_reason": finish}])
    return out
