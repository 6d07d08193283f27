"""OpenAI's Chat Completions wire, as Tusk reads and writes it: the request checked, the history reconciled.

    parse(raw)                  the request (pydantic), or `ApiError` 400 naming the field Tusk does not take
    reconcile(sent, stored)     what of the client's messages is a turn: the trailing user message(s) after
                                its last assistant message. The session is the truth; the client's copy of
                                the conversation is only read to tell a new message from a regenerate:
                                  the trailing user text equals the session's last user message, and the
                                  client's last assistant message is not the session's last answer (the
                                  client dropped that answer to have it again) -> regenerate
                                  otherwise -> a new message (a resent history is never stored again)
    completion / chunk / error  the answer bodies: `chat.completion`, `chat.completion.chunk`, OpenAI's error
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pydantic

UNSUPPORTED = {  # field -> why it is refused (a 400 naming it)
    "tools": "client-side tools are not supported: Tusk runs its own tools",
    "functions": "client-side functions are not supported: Tusk runs its own tools",
    "tool_choice": "client-side tools are not supported: Tusk runs its own tools",
    "logprobs": "logprobs are not supported",
    "top_logprobs": "logprobs are not supported",
    "audio": "audio output is not supported",
}


class ApiError(Exception):
    """An answer in OpenAI's error format: `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class ImageUrl(pydantic.BaseModel):
    url: str


class Part(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    type: str
    text: str | None = None
    image_url: ImageUrl | None = None


class ChatMessage(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[Part] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text or "" for p in self.content if p.type == "text")
        return self.content or ""

    def images(self) -> list[str]:
        """The image URLs of its `image_url` parts."""
        if not isinstance(self.content, list):
            return []
        return [p.image_url.url for p in self.content if p.type == "image_url" and p.image_url is not None]


class StreamOptions(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    include_usage: bool = False


class ChatRequest(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    model: str = pydantic.Field(min_length=1)
    messages: list[ChatMessage] = pydantic.Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = pydantic.Field(None, ge=0, le=2)  # applied to this request's model calls
    max_tokens: int | None = pydantic.Field(None, ge=1)
    max_completion_tokens: int | None = pydantic.Field(None, ge=1)
    user: str | None = pydantic.Field(None, max_length=200)  # the person, for limits: never the chat
    n: int = pydantic.Field(1, ge=1)


def parse(raw: bytes) -> ChatRequest:
    """The request, or ApiError(400) naming the first field Tusk cannot honour."""
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object (OpenAI's chat completions request)")
    for name, why in UNSUPPORTED.items():
        value = body.get(name)
        if value not in (None, False, [], {}) and not (name == "tool_choice" and value == "none"):
            raise ApiError(400, f"'{name}': {why}", param=name, code="unsupported_parameter")
    try:
        req = ChatRequest.model_validate(body)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or None
        raise ApiError(400, f"'{where or 'body'}': {first['msg']}", param=where) from exc
    if req.n > 1:
        raise ApiError(400, "'n': only one choice per request (n=1) is supported", param="n",
                       code="unsupported_parameter")
    if any(m.role in ("tool", "function") for m in req.messages):
        raise ApiError(400, "'messages': tool messages are not supported: Tusk runs its own tools",
                       param="messages", code="unsupported_parameter")
    if req.messages[-1].role != "user":
        raise ApiError(400, "'messages': the last message must be the user's (the one to answer)",
                       param="messages")
    return req


@dataclass(frozen=True, slots=True)
class Turn:
    """What the request asks of the chat: `text` (and `images`, data URIs) to answer, the client's system
    message for this request only, and whether it is the session's last message asked again."""

    text: str
    images: tuple[str, ...]
    system: str | None
    regenerate: bool


def _same(a: str | None, b: str | None) -> bool:
    return (a or "").strip() == (b or "").strip()


def reconcile(sent: Sequence[ChatMessage], stored: Sequence[tuple[str, str]]) -> Turn:
    """The turn in `sent` (the request's messages) given `stored`, the chat's unconsolidated (role, text)
    user and assistant messages in order (tool steps left out)."""
    system = "\n\n".join(m.text() for m in sent if m.role in ("system", "developer") and m.text().strip()) or None
    convo = [m for m in sent if m.role in ("user", "assistant")]
    cut = len(convo)
    while cut and convo[cut - 1].role == "user":
        cut -= 1
    trailing = convo[cut:]
    text = "\n\n".join(m.text() for m in trailing if m.text().strip())
    images = tuple(url for m in trailing for url in m.images())
    last_user = next((t for r, t in reversed(stored) if r == "user"), None)
    answered = bool(stored) and stored[-1][0] == "assistant"
    client_answer = convo[cut - 1].text() if cut else None
    stored_answers = [t for r, t in stored if r == "assistant"]
    regenerate = (answered and not images and _same(text, last_user)
                  and not _same(client_answer, stored_answers[-1]))
    return Turn(text, images, system, regenerate)


def usage_body(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion(id_: str, model: str, content: str, prompt: int, done: int) -> dict[str, Any]:
    return {"id": id_, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": usage_body(prompt, done)}


def chunk(id_: str, model: str, delta: dict[str, Any] | None, finish: str | None = None,
          usage: dict[str, int] | None = None) -> dict[str, Any]:
    """One `chat.completion.chunk`; with `usage` (and no delta) the final usage chunk, whose choices are empty."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
    out: dict[str, Any] = {"id": id_, "object": "chat.completion.chunk", "created": int(time.time()),
                           "model": model, "choices": choices}
    if usage is not None:
        out["usage"] = usage
    return out
