"""Google's Gemini API (`POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`) as
strictly as the real one, for tests/fakes/fake_llm.py.

From Google's documentation (ai.google.dev: "generateContent", "Function calling", "Thought signatures",
"Thinking", "Troubleshooting" / error codes) and the error texts the API is known to send:

- `request_problem(body, model)`: the 400 the real API gives a request it refuses. Field names are
  read in either spelling the API's JSON takes (`systemInstruction` / `system_instruction`, ...); an
  unknown field anywhere is "Invalid JSON payload received. Unknown name ..." (the function-declaration
  schema is an OpenAPI subset: no `additionalProperties`, no `$schema`); roles are `user` / `model`;
  a `functionCall` turn comes right after a user turn or a function-response turn, and is answered by
  exactly as many `functionResponse` parts; `args` and `response` are objects; every
  image part is PNG, JPEG, WEBP, HEIC or HEIF (no GIF) and decodes as such; every
  `thoughtSignature` is base64 and one this server gave (or Google's documented skip-validator
  placeholder: counted in `FakeLLM.gemini_placeholders`), else "Corrupted thought signature.";
  for Gemini 3 models, the first `functionCall` part of each model step in the current turn (from the
  last user message with text on) carries its signature, else "Function call is missing a
  thought_signature in functionCall parts ...".
- `response(...)`: a test's `Reply` as a GenerateContentResponse (`candidates[0].content.parts`, the
  first `functionCall` part signed, `finishReason` STOP / MAX_TOKENS / SAFETY / RECITATION /
  MALFORMED_FUNCTION_CALL, `usageMetadata`, `promptFeedback.blockReason` for `Reply.block_reason`); a
  thinking model (2.5 and later) first thinks `THOUGHTS` tokens, which count in `maxOutputTokens`: a
  smaller bound gets no parts and MAX_TOKENS, as the real models do;
  `stream_chunks(...)` the SSE chunks (text in pieces, a function call whole, the reason and usage last).
- `error_body(status, message, retry_delay)`: `{"error": {"code", "message", "status"[, "details"]}}`,
  429 with a `RetryInfo` detail; `overflow_message(n, m)` the input-token-limit 400.
- `openai_view(body)`: the request in chat-completions shape, so the fake's responders read every wire alike.
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

_KEY = b"fake-gemini-signing-key"
STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
          500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
MESSAGES = {403: "Method doesn't allow unregistered callers (callers without established identity). Please use "
                 "API Key or other form of API consumer identity to call this API.",
            429: "You exceeded your current quota, please check your plan and billing details. For more "
                 "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
            500: "An internal error has occurred. Please retry or report in "
                 "https://developers.generativeai.google/guide/troubleshooting",
            503: "The model is overloaded. Please try again later."}
KEY_INVALID = "API key not valid. Please pass a valid API key."
# Google's documented placeholders for a call the model did not make ("Thought signatures", FAQ); in JSON
# the bytes field is base64, litellm sends the base64 of the first
PLACEHOLDERS = frozenset({"skip_thought_signature_validator", "context_engineering_is_the_way_to_go",
                          base64.b64encode(b"skip_thought_signature_validator").decode(),
                          base64.b64encode(b"context_engineering_is_the_way_to_go").decode()})
MISSING_SIGNATURE = ("Function call is missing a thought_signature in functionCall parts. This is required for "
                     "tools to work correctly, and missing thought_signature may lead to degraded model "
                     "performance. Additional data, function call `default_api:{name}`, position {pos}. Please "
                     "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")

# Fields of each message type, in both spellings the API's JSON parser takes
_TOP = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings",
        "cachedContent", "labels"}
_PART = {"text", "inlineData", "functionCall", "functionResponse", "fileData", "thought", "thoughtSignature",
         "executableCode", "codeExecutionResult", "videoMetadata", "mediaResolution", "partMetadata"}
_SCHEMA = {"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties",
           "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf",
           "propertyOrdering", "default", "items", "minimum", "maximum"}
_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL", "TYPE_UNSPECIFIED"}
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _get(obj: dict[str, Any], name: str) -> Any:
    """A field in either spelling (`functionCall` or `function_call`)."""
    snake = re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()
    return obj.get(name, obj.get(snake))


def _unknown(obj: Any, allowed: set[str], where: str) -> str | None:
    if not isinstance(obj, dict):
        return f"Invalid value at '{where}': expected an object"
    for key in obj:
        if camel(key) not in allowed:
            at = f" at '{where}'" if where else ""
            return f"Invalid JSON payload received. Unknown name \"{key}\"{at}: Cannot find field."
    return None


def sign(name: str, args: Any) -> str:
    """The signature this server gives a function call (and checks when it comes back)."""
    digest = hmac.new(_KEY, json.dumps([name, args], sort_keys=True).encode(), hashlib.sha256).digest()
    return base64.b64encode(b"sig:" + digest).decode()


def gemini_3(model: str) -> bool:
    return bool(re.match(r"gemini-([3-9]|\d\d)", model))


THOUGHTS = 2000  # tokens a thinking model (Gemini 2.5 and later) thinks before it writes; they count in the limit


def thinks(model: str) -> bool:
    return bool(re.match(r"gemini-(2\.5|[3-9]|\d\d)", model))


def request_problem(body: dict[str, Any], model: str) -> str | None:
    """Why the real API would answer this body 400 (None if it would take it)."""
    if (problem := _unknown(body, _TOP, "")) is not None:
        return problem
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified\n"
    system = _get(body, "systemInstruction")
    if system is not None and (problem := _parts_problem(system.get("parts"), "system_instruction")):
        return problem
    return _tools_problem(body.get("tools")) or _contents_problem(contents) or _signature_problem(contents, model)


def _schema_problem(schema: Any, where: str) -> str | None:
    if (problem := _unknown(schema, _SCHEMA, where)) is not None:
        return problem
    kind = schema.get("type")
    if kind is not None and (not isinstance(kind, str) or kind.upper() not in _TYPES):
        return f"Invalid value at '{where}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), " \
               f"{json.dumps(kind)}"
    if isinstance(kind, str) and kind.upper() == "OBJECT" and "properties" in schema and not schema["properties"]:
        return f"* GenerateContentRequest.{where}.properties: should be non-empty for OBJECT type\n"
    for i, (_, sub) in enumerate((schema.get("properties") or {}).items()):
        if problem := _schema_problem(sub, f"{where}.properties[{i}].value"):
            return problem
    if "items" in schema and (problem := _schema_problem(schema["items"], f"{where}.items")):
        return problem
    for i, sub in enumerate(_get(schema, "anyOf") or []):
        if problem := _schema_problem(sub, f"{where}.any_of[{i}]"):
            return problem
    return None


def _tools_problem(tools: Any) -> str | None:
    for i, tool in enumerate(tools or []):
        for j, decl in enumerate(_get(tool, "functionDeclarations") or []):
            where = f"tools[{i}].function_declarations[{j}]"
            if not _FUNCTION_NAME.fullmatch(str(decl.get("name", ""))):
                return f"* GenerateContentRequest.{where}.name: Invalid function name. Must start with a letter " \
                       "or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons " \
                       "(:), or dashes (-), with a maximum length of 64.\n"
            if decl.get("parameters") is not None and (problem := _schema_problem(decl["parameters"],
                                                                                    f"{where}.parameters")):
                return problem
    return None


def _parts_problem(parts: Any, where: str) -> str | None:
    if not isinstance(parts, list) or not parts:
        return f"* GenerateContentRequest.{where}.parts: contents.parts must not be empty.\n"
    for j, part in enumerate(parts):
        if (problem := _unknown(part, _PART, f"{where}.parts[{j}]")) is not None:
            return problem
        call, answer = _get(part, "functionCall"), _get(part, "functionResponse")
        if call is not None and not isinstance(call.get("args", {}), dict):
            return f"Invalid value at '{where}.parts[{j}].function_call.args' (type.googleapis.com/" \
                   "google.protobuf.Struct)"
        if answer is not None and not isinstance(answer.get("response"), dict):
            return f"Invalid value at '{where}.parts[{j}].function_response.response' (type.googleapis.com/" \
                   "google.protobuf.Struct)"
        inline = _get(part, "inlineData")
        if inline is not None and (problem := _inline_problem(inline, f"{where}.parts[{j}]")):
            return problem
        signature = _get(part, "thoughtSignature")
        if signature is not None and not _base64(signature):
            return f"Invalid value at '{where}.parts[{j}].thought_signature' (TYPE_BYTES), Base64 decoding " \
                   f"failed for \"{str(signature)[:40]}\""
    return None


IMAGE_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP", "image/heic": None, "image/heif": None}
UNREADABLE_IMAGE = "Unable to process input image. Please retry or report in " \
                   "https://developers.generativeai.google/guide/troubleshooting"


def _inline_problem(inline: Any, where: str) -> str | None:
    """An image Gemini takes: one of its image types (PNG, JPEG, WEBP, HEIC, HEIF; no GIF), base64 bytes
    that decode to that image."""
    mime, data = _get(inline, "mimeType"), inline.get("data")
    if not isinstance(mime, str) or not mime.startswith("image/"):
        return None
    if mime not in IMAGE_TYPES:
        return f"Unsupported MIME type: {mime}"
    if not _base64(data):
        return f"Invalid value at '{where}.inline_data.data' (TYPE_BYTES), Base64 decoding failed"
    try:
        with Image.open(io.BytesIO(base64.b64decode(data))) as im:
            kind = im.format
    except (UnidentifiedImageError, OSError, ValueError):
        return UNREADABLE_IMAGE
    return UNREADABLE_IMAGE if IMAGE_TYPES[mime] not in (None, kind) else None


def _base64(value: Any) -> bool:
    try:
        base64.b64decode(value, validate=True)
        return isinstance(value, str)
    except (binascii.Error, ValueError, TypeError):
        return False


def _kinds(content: dict[str, Any]) -> tuple[int, int]:
    """(functionCall parts, functionResponse parts) of one content."""
    parts = content.get("parts") or []
    return (sum(_get(p, "functionCall") is not None for p in parts),
            sum(_get(p, "functionResponse") is not None for p in parts))


def _contents_problem(contents: list[Any]) -> str | None:
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or content.get("role", "user") not in ("user", "model"):
            return "Please use a valid role: user, model."
        if problem := _parts_problem(content.get("parts"), f"contents[{i}]"):
            return problem
        calls, answers = _kinds(content)
        before = contents[i - 1] if i else None
        if calls and before is not None and before.get("role") == "model":
            return "Please ensure that function call turn comes immediately after a user turn or after a " \
                   "function response turn."
        if calls and before is None:
            return "Please ensure that function call turn comes immediately after a user turn or after a " \
                   "function response turn."
        if answers and (before is None or not _kinds(before)[0]):
            return "Please ensure that function response turn comes immediately after a function call turn."
        if answers and answers != _kinds(before)[0]:
            return "Please ensure that the number of function response parts is equal to the number of " \
                   "function call parts of the function call turn."
    return None


def _signature_problem(contents: list[dict[str, Any]], model: str) -> str | None:
    """Every signature present is one this server gave; Gemini 3 wants one on the first functionCall part
    of each step of the current turn (parallel calls: only the first is signed)."""
    for content in contents:
        for part in content.get("parts") or []:
            signature, call = _get(part, "thoughtSignature"), _get(part, "functionCall")
            if signature is None or signature in PLACEHOLDERS:
                continue
            if call is not None and signature != sign(call.get("name"), call.get("args", {})):
                return "Corrupted thought signature."
            if call is None and not base64.b64decode(signature).startswith(b"sig:"):
                return "Corrupted thought signature."
    if not gemini_3(model):
        return None
    start = max((i for i, c in enumerate(contents) if c.get("role", "user") == "user"
                 and any(_get(p, "text") is not None for p in c.get("parts") or [])), default=0)
    for i in range(start, len(contents)):
        first = next((p for p in contents[i].get("parts") or [] if _get(p, "functionCall") is not None), None)
        if first is not None and contents[i].get("role") == "model" and _get(first, "thoughtSignature") is None:
            return MISSING_SIGNATURE.format(name=_get(first, "functionCall").get("name"), pos=i)
    return None


def placeholders_in(body: dict[str, Any]) -> int:
    """How many parts carry the skip-validator placeholder instead of a signature."""
    return sum(_get(p, "thoughtSignature") in PLACEHOLDERS for c in body.get("contents") or []
               for p in c.get("parts") or [])


def error_body(status: int, message: str | None = None, retry_delay: str | None = None) -> dict[str, Any]:
    """Google's error shape; a 429 carries a RetryInfo detail (`retry_delay` such as "37s")."""
    error: dict[str, Any] = {"code": status, "message": message or MESSAGES.get(status, "Internal error"),
                             "status": STATUS.get(status, "UNKNOWN")}
    if status == 429:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
            {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
             "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay or "37s"}]
    if message == KEY_INVALID:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                             "domain": "googleapis.com"}]
    return {"error": error}


def model_not_found(model: str) -> str:
    return f"models/{model} is not found for API version v1beta, or is not supported for generateContent. Call " \
           "ListModels to see the list of available models and their supported methods."


def overflow_message(window: int, prompt: int) -> str:
    return f"The input token count ({prompt}) exceeds the maximum number of tokens allowed ({window})."


FINISH = {None: "STOP", "stop": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY"}


def reply_parts(reply: Any, thoughts: bool) -> list[dict[str, Any]]:
    """A test's `Reply` as Gemini parts: thought summary (when asked for), text, function calls (the
    first signed, as Gemini signs a parallel batch)."""
    parts: list[dict[str, Any]] = []
    if thoughts and reply.reasoning:
        parts.append({"text": reply.reasoning, "thought": True})
    if reply.text:
        parts.append({"text": reply.text})
    for i, (_, name, args) in enumerate(reply.tool_calls):
        args = args if isinstance(args, dict) else json.loads(args)
        part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
        if i == 0:
            part["thoughtSignature"] = sign(name, args)
        parts.append(part)
    if parts and not reply.tool_calls:  # a plain reply's signature rides on its last part (not validated)
        parts[-1]["thoughtSignature"] = base64.b64encode(b"sig:text").decode()
    return parts


def _usage(body: dict[str, Any], reply: Any, parts: list[dict[str, Any]]) -> dict[str, int]:
    given = reply.usage or {}
    prompt = given.get("prompt_tokens", len(json.dumps([body.get("contents"), body.get("tools")])) // 4)
    written = given.get("completion_tokens", len(json.dumps(parts)) // 4 + 1)
    return {"promptTokenCount": prompt, "candidatesTokenCount": written, "totalTokenCount": prompt + written,
            "thoughtsTokenCount": 12}


def response(body: dict[str, Any], model: str, reply: Any, response_id: str) -> dict[str, Any]:
    """The GenerateContentResponse for `reply`."""
    base = {"modelVersion": model, "responseId": response_id}
    if reply.block_reason:  # the prompt itself was blocked: no candidates at all
        return {"promptFeedback": {"blockReason": reply.block_reason, "safetyRatings": []},
                "usageMetadata": {"promptTokenCount": 10, "totalTokenCount": 10}, **base}
    thinking = (_get(body, "generationConfig") or {})
    thoughts = bool((_get(thinking, "thinkingConfig") or {}).get("includeThoughts")
                    or (thinking.get("thinking_config") or {}).get("include_thoughts"))
    reason = FINISH.get(reply.finish_reason, reply.finish_reason)
    parts = [] if reason in ("SAFETY", "RECITATION", "MALFORMED_FUNCTION_CALL") and not reply.text \
        else reply_parts(reply, thoughts)
    limit = _get(thinking, "maxOutputTokens")
    if thinks(model) and isinstance(limit, int) and limit < THOUGHTS + len(json.dumps(parts)) // 4:
        reason, parts = "MAX_TOKENS", []  # the thoughts used up maxOutputTokens before a word was written
    candidate: dict[str, Any] = {"finishReason": reason, "index": 0}
    if parts:
        candidate["content"] = {"role": "model", "parts": parts}
    if reason == "MALFORMED_FUNCTION_CALL":
        candidate["finishMessage"] = "Malformed function call: print(default_api.current_time(zone=))"
    if reason == "SAFETY":
        candidate["safetyRatings"] = [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
                                       "blocked": True}]
    return {"candidates": [candidate], "usageMetadata": _usage(body, reply, parts), **base}


def stream_chunks(whole: dict[str, Any], words: Any) -> list[dict[str, Any]]:
    """`whole` as Gemini streams it: text parts in pieces, each function call whole, the finish reason and
    usage in the last chunk."""
    if "candidates" not in whole:
        return [whole]
    candidate = whole["candidates"][0]
    base = {k: v for k, v in whole.items() if k not in ("candidates", "usageMetadata")}
    parts = (candidate.get("content") or {}).get("parts") or []
    pieces: list[dict[str, Any]] = []
    for part in parts:
        if "text" in part:  # a signature on a text part comes with its last piece
            signature = {k: v for k, v in part.items() if k == "thoughtSignature"}
            split = [{k: v for k, v in part.items() if k != "thoughtSignature"} | {"text": t}
                     for t in words(part["text"])] or [dict(part)]
            split[-1].update(signature)
            pieces += split
        else:
            pieces.append(part)
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}], **base} for p in pieces]
    last = {k: v for k, v in candidate.items() if k != "content"}
    if chunks:
        chunks[-1]["candidates"][0].update(last)
    else:
        chunks = [{"candidates": [last], **base}]
    chunks[-1]["usageMetadata"] = whole["usageMetadata"]
    return chunks


def openai_view(body: dict[str, Any]) -> dict[str, Any]:
    """The request as a chat-completions body (system first, text, tool calls and results), for responders."""
    system = _get(body, "systemInstruction")
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": "".join(p.get("text", "") for p in system.get("parts", []))})
    for content in body.get("contents") or []:
        parts = content.get("parts") or []
        text = "".join(p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))
        calls = [_get(p, "functionCall") for p in parts if _get(p, "functionCall") is not None]
        answers = [_get(p, "functionResponse") for p in parts if _get(p, "functionResponse") is not None]
        if content.get("role") == "model":
            messages.append({"role": "assistant", "content": text or None, **({"tool_calls": [
                {"id": c.get("id") or c["name"], "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c.get("args", {}))}} for c in calls]}
                if calls else {})})
            continue
        messages += [{"role": "tool", "tool_call_id": a.get("id") or a.get("name"), "name": a.get("name"),
                      "content": json.dumps(a.get("response"))} for a in answers]
        if text:
            messages.append({"role": "user", "content": text})
    tools = [{"type": "function", "function": {"name": d.get("name"), "parameters": d.get("parameters")}}
             for t in body.get("tools") or [] for d in _get(t, "functionDeclarations") or []]
    return {"model": body.get("model"), "messages": messages, "tools": tools}
