"""Anthropic's Messages API (`POST /v1/messages`) as strictly as the real one, for tests/fakes/fake_llm.py.

From Anthropic's documentation ("Messages", "Streaming Messages", "Tool use", "Extended
thinking", "Errors") and the error texts its API is known to send:

- `request_problem(body, headers)`: the 400 the real API gives a request it refuses (model
  and max_tokens required; messages start with `user` and alternate; every `tool_use` is
  answered by a `tool_result` first in the next user message and every `tool_result` answers
  a `tool_use` of the previous assistant turn; `tool_use.input` an object; tools with an
  `input_schema`; with `thinking` enabled: budget of at least 1,024 below max_tokens, no
  forced tool_choice, the final assistant turn before the last tool results starts with its
  thinking block(s), and every thinking block's `signature` is the one this server gave).
- `reply_blocks(reply, thinking)`: a test's `Reply` as content blocks (reasoning -> a signed
  thinking block when thinking is on, `redacted` -> a redacted_thinking block, text, tool_use).
- `message(...)` the non-streamed body; `stream_events(...)` the SSE events (message_start,
  ping, content_block_start / _delta [text_delta, input_json_delta, thinking_delta,
  signature_delta] / _stop, message_delta, message_stop).
- `error_body(status)`: `{"type": "error", "error": {"type": ..., "message": ...}}` by status.
- `openai_view(body)`: the request in chat-completions shape (system first, text, tool calls and
  results with their names), so the fake's responders read both wires alike.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import io
import json
import re
from typing import Any

from PIL import Image, UnidentifiedImageError

VERSION = "2023-06-01"
_KEY = b"fake-anthropic-signing-key"
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               529: "overloaded_error"}
ERROR_MESSAGES = {401: "invalid x-api-key", 429: "Number of request tokens has exceeded your per-minute rate limit",
                  529: "Overloaded", 500: "Internal server error"}
THINKING_FIRST = ("messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. "
                  "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
                  "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
                  "thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please "
                  "consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking")


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message or ERROR_MESSAGES.get(status, kind)}}


def sign(thinking: str) -> str:
    """The signature this server gives a thinking block (and checks when the block comes back)."""
    return base64.b64encode(hmac.new(_KEY, thinking.encode(), hashlib.sha256).digest()).decode()


def redact(text: str) -> str:
    """A redacted_thinking block's opaque `data` (checked when it comes back)."""
    return base64.b64encode(text.encode() + b"|" + sign(text).encode()).decode()


def _redacted_ok(data: Any) -> bool:
    try:
        text, mac = base64.b64decode(data, validate=True).decode().rsplit("|", 1)
    except (ValueError, TypeError, UnicodeDecodeError):
        return False
    return hmac.compare_digest(mac, sign(text))


def thinking_on(body: dict[str, Any]) -> bool:
    return isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"


def request_problem(body: dict[str, Any]) -> str | None:
    """Why the real API would answer this body 400 (None if it would take it)."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return "max_tokens: Field required"
    if max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    system = body.get("system")
    if system is not None and not isinstance(system, str) and not (
            isinstance(system, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in system)):
        return "system: Input should be a valid string or a list of text blocks"
    return _tools_problem(body) or _thinking_problem(body) or _messages_problem(body)


def _tools_problem(body: dict[str, Any]) -> str | None:
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or "function" in tool:
            return f"tools.{i}.custom.input_schema: Field required"
        if not _TOOL_NAME.fullmatch(str(tool.get("name", ""))):
            return f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return f"tools.{i}.custom.input_schema.type: Input should be 'object'"
    choice = body.get("tool_choice")
    kinds = ("auto", "any", "tool", "none")
    if choice is not None and (not isinstance(choice, dict) or choice.get("type") not in kinds):
        return "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"
    return None


def _thinking_problem(body: dict[str, Any]) -> str | None:
    thinking = body.get("thinking")
    if thinking is None or (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
        return None
    if not thinking_on(body):
        return "thinking: Input tag does not match any of the expected tags: 'enabled', 'disabled'"
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if budget >= body["max_tokens"]:
        return "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at " \
               "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"
    if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    if body.get("temperature") not in (None, 1, 1.0):
        return "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation " \
               "at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    return None


def _blocks(content: Any) -> list[dict[str, Any]] | None:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        return content
    return None


def _messages_problem(body: dict[str, Any]) -> str | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: Field required" if messages is None else "messages: at least one message is required"
    pending: list[str] = []  # tool_use ids of the previous assistant turn
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i == 0 and role != "user":
            return "messages: first message must use the \"user\" role"
        if i and messages[i - 1].get("role") == role:
            return "messages: roles must alternate between \"user\" and \"assistant\", but found multiple " \
                   f"\"{role}\" roles in a row"
        blocks = _blocks(msg.get("content"))
        if blocks is None:
            return f"messages.{i}.content: Input should be a valid string or a list of content blocks"
        if not blocks and not (role == "assistant" and i == len(messages) - 1):
            return f"messages.{i}: all messages must have non-empty content except for the optional final " \
                   "assistant message"
        problem = (_user_problem(i, blocks, pending) if role == "user" else _assistant_problem(i, blocks))
        if problem:
            return problem
        pending = [b["id"] for b in blocks if b.get("type") == "tool_use"] if role == "assistant" else []
    if pending:
        return f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` blocks immediately " \
               f"after: {', '.join(pending)}. Each `tool_use` block must have a corresponding `tool_result` block " \
               "in the next message."
    return _final_thinking_problem(body, messages)


def _user_problem(i: int, blocks: list[dict[str, Any]], pending: list[str]) -> str | None:
    results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
    for j, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text" and not (isinstance(block.get("text"), str) and block["text"].strip()):
            return f"messages.{i}.content.{j}.text: text content blocks must contain non-whitespace text"
        if kind in ("tool_use", "thinking", "redacted_thinking"):
            return f"messages.{i}.content.{j}.type: `{kind}` blocks can only be in `assistant` messages"
        if kind == "tool_result" and block.get("tool_use_id") not in pending:
            return f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: " \
                   f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` " \
                   "block in the previous message."
        if kind == "image" and (problem := image_problem(f"messages.{i}.content.{j}", block)):
            return problem
        if kind not in ("text", "image", "document", "tool_result"):
            return f"messages.{i}.content.{j}.type: Input tag '{kind}' does not match any of the expected tags"
    if pending:
        missing = [t for t in pending if t not in results]
        if missing or any(b.get("type") != "tool_result" for b in blocks[:len(pending)]):
            return f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: " \
                   f"{', '.join(missing or pending)}. Each `tool_use` block must have a corresponding " \
                   "`tool_result` block in the next message, and tool_result blocks must come first."
    return None


_FIELDS = {"text": {"text", "citations"}, "tool_use": {"id", "name", "input"}, "thinking": {"thinking", "signature"},
           "redacted_thinking": {"data"}}


IMAGE_MAX_BYTES = 5 * 1024 * 1024  # Anthropic's API limit for one image
IMAGE_MAX_SIDE = 8000
_FORMATS = {"image/jpeg": "JPEG", "image/png": "PNG", "image/gif": "GIF", "image/webp": "WEBP"}


def image_problem(where: str, block: dict[str, Any]) -> str | None:
    """Why Anthropic would refuse this image block (None if it would take it): base64 source of one of
    its four media types, at most 5 MB, at most 8000 px a side, and bytes that are what the type says."""
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    if source.get("type") == "url":
        return None
    if source.get("type") != "base64" or source.get("media_type") not in _FORMATS:
        return f"{where}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or " \
               "'image/webp'"
    try:
        data = base64.b64decode(source.get("data") or "", validate=True)
    except (binascii.Error, ValueError):
        return f"{where}.source.base64.data: Invalid base64 data"
    if len(data) > IMAGE_MAX_BYTES:
        return f"{where}.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > {IMAGE_MAX_BYTES} bytes"
    try:
        with Image.open(io.BytesIO(data)) as im:
            kind, size = im.format, im.size
    except (UnidentifiedImageError, OSError, ValueError):
        return f"{where}.source.base64.data: Could not process image"
    if kind != _FORMATS[source["media_type"]]:
        return f"{where}.source.base64.data: Image does not match the provided media type {source['media_type']}"
    if max(size) > IMAGE_MAX_SIDE:
        return f"{where}.source.base64.data: At least one of the image dimensions exceed max allowed size: " \
               f"{IMAGE_MAX_SIDE} pixels"
    return None


def _assistant_problem(i: int, blocks: list[dict[str, Any]]) -> str | None:
    for j, block in enumerate(blocks):
        kind = block.get("type")
        extra = sorted(set(block) - _FIELDS.get(kind, set()) - {"type", "cache_control"})
        if kind in _FIELDS and extra:
            return f"messages.{i}.content.{j}.{kind}.{extra[0]}: Extra inputs are not permitted"
        if kind == "tool_use":
            if not _TOOL_ID.fullmatch(str(block.get("id", ""))):
                return f"messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
            if not isinstance(block.get("input"), dict):
                return f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
        elif kind == "thinking":
            if not isinstance(block.get("thinking"), str) or block.get("signature") != sign(block["thinking"]):
                return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
        elif kind == "redacted_thinking":
            if not _redacted_ok(block.get("data")):
                return f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block"
        elif kind == "text":
            if not isinstance(block.get("text"), str):
                return f"messages.{i}.content.{j}.text: Input should be a valid string"
        else:
            return f"messages.{i}.content.{j}.type: Input tag '{kind}' does not match any of the expected tags"
    return None


def _final_thinking_problem(body: dict[str, Any], messages: list[dict[str, Any]]) -> str | None:
    """With thinking on, a request that goes on from tool results needs the thinking that led to them."""
    if not thinking_on(body):
        return None
    last = _blocks(messages[-1].get("content")) or []
    if messages[-1]["role"] != "user" or not any(b.get("type") == "tool_result" for b in last):
        return None
    i = len(messages) - 2
    first = (_blocks(messages[i].get("content")) or [{}])[0]
    if first.get("type") not in ("thinking", "redacted_thinking"):
        return THINKING_FIRST.format(i=i, found=first.get("type"))
    return None


def reply_blocks(reply: Any, thinking: bool) -> list[dict[str, Any]]:
    """A test's `Reply` as Anthropic content blocks."""
    blocks: list[dict[str, Any]] = []
    if thinking and reply.reasoning:
        blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": sign(reply.reasoning)})
    if thinking and reply.redacted:
        blocks.append({"type": "redacted_thinking", "data": redact(reply.redacted)})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call_id, name, args in reply.tool_calls:
        blocks.append({"type": "tool_use", "id": call_id, "name": name,
                       "input": args if isinstance(args, dict) else json.loads(args)})
    return blocks


def stop_reason(reply: Any, blocks: list[dict[str, Any]]) -> str:
    if reply.finish_reason == "length":
        return "max_tokens"
    return reply.finish_reason or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")


def usage(body: dict[str, Any], reply: Any, blocks: list[dict[str, Any]]) -> dict[str, int]:
    prompt = len(json.dumps([body.get("system"), body.get("messages"), body.get("tools")])) // 4
    written = len(json.dumps(blocks)) // 4 + 1
    given = reply.usage or {}
    return {"input_tokens": given.get("prompt_tokens", prompt),
            "output_tokens": given.get("completion_tokens", written),
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def message(msg_id: str, body: dict[str, Any], reply: Any) -> dict[str, Any]:
    blocks = reply_blocks(reply, thinking_on(body))
    return {"id": msg_id, "type": "message", "role": "assistant", "model": body["model"], "content": blocks,
            "stop_reason": stop_reason(reply, blocks), "stop_sequence": None, "usage": usage(body, reply, blocks)}


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _block_events(index: int, block: dict[str, Any], words: Any) -> list[tuple[str, dict[str, Any]]]:
    kind = block["type"]
    start = {"thinking": {"type": "thinking", "thinking": "", "signature": ""}, "text": {"type": "text", "text": ""},
             "tool_use": {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": {}},
             "redacted_thinking": block}[kind]
    deltas: list[dict[str, Any]] = []
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": t} for t in words(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        deltas = [{"type": "text_delta", "text": t} for t in words(block["text"])]
    elif kind == "tool_use":  # the first delta is empty, as the docs' example shows
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in ["", *_pieces(json.dumps(block["input"]))]]
    return ([("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})]
            + [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
            + [("content_block_stop", {"type": "content_block_stop", "index": index})])


def stream_events(msg: dict[str, Any], words: Any) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of `msg` streamed (`words` splits text into the pieces a model streams)."""
    start = {**msg, "content": [], "stop_reason": None, "usage": {**msg["usage"], "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]
    for index, block in enumerate(msg["content"]):
        events += _block_events(index, block, words)
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": msg["stop_reason"],
                                                                      "stop_sequence": None},
                                  "usage": {"output_tokens": msg["usage"]["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return events


def openai_view(body: dict[str, Any]) -> dict[str, Any]:
    """The request as a chat-completions body (system first, text, tool calls and results, tool names), for
    the fake's responders."""
    system = body.get("system")
    if isinstance(system, list):
        system = "\n".join(b.get("text", "") for b in system)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    names: dict[str, str] = {}
    for msg in body.get("messages") or []:
        blocks = _blocks(msg.get("content")) or []
        text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
        if msg.get("role") == "assistant":
            calls = [{"id": b.get("id"), "type": "function", "function": {"name": b.get("name"),
                                                                          "arguments": json.dumps(b.get("input"))}}
                     for b in blocks if b.get("type") == "tool_use"]
            names |= {c["id"]: c["function"]["name"] for c in calls}
            messages.append({"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})})
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                content = b.get("content")
                content = content if isinstance(content, str) else "".join(
                    p.get("text", "") for p in content or [] if isinstance(p, dict))
                messages.append({"role": "tool", "tool_call_id": b.get("tool_use_id"),
                                 "name": names.get(b.get("tool_use_id")), "content": content})
        if text:
            messages.append({"role": "user", "content": text})
    tools = [{"type": "function", "function": {"name": t.get("name"), "parameters": t.get("input_schema")}}
             for t in body.get("tools") or [] if isinstance(t, dict)]
    return {"model": body.get("model"), "messages": messages, "tools": tools}
