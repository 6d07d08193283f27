"""What the HTTP channel reads from a request, and how it refuses one: the request bodies, the same-origin
rule for requests that change state, the JSON error answer (OpenAI's shape on its routes), a chat named in
a URL, and the console's files. The channel itself (routes, auth, turns) is channels/http/__init__.py."""

from __future__ import annotations

import re
from pathlib import Path

import pydantic
from aiohttp import web

from bot.events import ChatKey

CONSOLE_DIR = Path(__file__).parent.parent / "console"
ASSET_NAME = re.compile(r"[a-z0-9_-]+\.(js|css|html|svg)")
CONTENT_TYPES = {"js": "text/javascript", "css": "text/css", "html": "text/html", "svg": "image/svg+xml"}
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/models"})  # channels/http/openai_api.py
MESSAGES_PATH = re.compile(r"/v1/chats/[^/]+/messages")


class StopBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    user: str = pydantic.Field("http", min_length=1, max_length=200)


class MessageBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    text: str = pydantic.Field(min_length=1)
    user: str = pydantic.Field("http", min_length=1, max_length=200)
    stream: bool = False


def is_upload(request: web.Request) -> bool:
    """A message with files (multipart/form-data to the messages route): streamed, not read whole."""
    return request.content_type == "multipart/form-data" and MESSAGES_PATH.fullmatch(request.path) is not None


def write_refusal(request: web.Request, bearer: bool = False) -> tuple[int, str] | None:
    """(status, reason) if a request that changes state is not JSON (or a file upload) from this server's own
    origin. With `bearer` (the server has a token and the request carries one: checked next, in `_auth`)
    no `Origin` is needed: API clients (curl, scripts, OpenAI clients) send none, and a browser cannot add
    that header to a cross-site request without a CORS grant, which Tusk never gives. A foreign `Origin`
    or `Sec-Fetch-Site` is refused all the same."""
    if request.content_type != "application/json" and not is_upload(request):
        return 415, (f"requests that change state must send Content-Type: application/json "
                     f"(got {request.content_type or 'none'})")
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site != "same-origin":
        return 403, f"request from another site refused (Sec-Fetch-Site: {fetch_site})"
    origin = request.headers.get("Origin")
    if origin is None:
        if fetch_site is None and not bearer:
            return 403, (f"requests that change state must say where they come from: send "
                         f"'Origin: http://{request.host}' (browsers do this by themselves)")
    elif origin not in (f"http://{request.host}", f"https://{request.host}"):
        return 403, f"cross-origin request from {origin} refused"
    return None


def error(status: int, message: str, request: web.Request | None = None) -> web.Response:
    """The JSON error answer; on the OpenAI-compatible routes, in OpenAI's error format (its clients read it)."""
    if request is not None and request.path in OPENAI_PATHS:
        kind = "authentication_error" if status == 401 else "invalid_request_error"
        body = {"message": message, "type": kind, "param": None, "code": None}
        return web.json_response({"error": body}, status=status)
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
