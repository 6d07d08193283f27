"""The shapes OpenAI-compatible servers really send, made readable: pure JSON work, no HTTP library.

    flatten_content(body)   a chat completion or a streamed chunk, in place: `content` given as a list of
                            parts (Mistral, some vLLM models) becomes its text, thinking parts become
                            `reasoning_content`; tool-call `arguments` given as a JSON object become JSON text
    as_chunks(body)         a whole chat completion as the chunks a stream of it would have been (a server
                            that ignored `stream`)

Used by bot/llm/readable.py (litellm's httpx transport) and bot/llm/direct.py (the direct client), so both
paths read a server alike.
"""

from __future__ import annotations

import json
from typing import Any


def _flatten_message(message: dict[str, Any]) -> bool:
    """A message (or a streamed delta) with list content turned into text and object arguments into JSON
    text, in place; True if anything changed."""
    changed = False
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), dict | list):
            function["arguments"] = json.dumps(function["arguments"], ensure_ascii=False)
            changed = True
    content = message.get("content")
    if not isinstance(content, list):
        return changed
    texts, thoughts = [], []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") in ("thinking", "reasoning"):
            inner = part.get("thinking") or part.get("text") or ""
            thoughts.append(inner if isinstance(inner, str) else
                            "".join(p.get("text", "") for p in inner if isinstance(p, dict)))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    message["content"] = "".join(texts)
    if thoughts and not message.get("reasoning_content"):
        message["reasoning_content"] = "\n".join(thoughts)
    return True


def flatten_content(body: dict[str, Any]) -> bool:
    """A chat completion or a streamed chunk made readable in place (see `_flatten_message`); True if changed."""
    changed = False
    for choice in body.get("choices") or []:
        for key in ("message", "delta"):
            part = choice.get(key) if isinstance(choice, dict) else None
            if isinstance(part, dict):
                changed = _flatten_message(part) or changed
    return changed


def as_chunks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole chat completion as the chunks a stream of it would have been: one delta per choice with its
    finish reason, then the usage."""
    base: dict[str, Any] = {k: body[k] for k in ("id", "created", "model", "system_fingerprint") if k in body}
    choices = []
    for i, choice in enumerate(body.get("choices") or []):
        message = dict(choice.get("message") or {}) if isinstance(choice, dict) else {}
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message["tool_calls"] = [{**c, "index": n} if isinstance(c, dict) else c for n, c in enumerate(calls)]
        choices.append({"index": choice.get("index", i), "delta": {"role": "assistant", **message},
                        "finish_reason": choice.get("finish_reason") or "stop"})
    chunks = [{**base, "object": "chat.completion.chunk", "choices": choices}]
    if isinstance(body.get("usage"), dict):
        chunks.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": body["usage"]})
    return chunks
