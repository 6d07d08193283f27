"""Tool calls as every provider accepts them: the one place where they are repaired.

Providers differ in what they send and in what they take back. What Tusk sends is the
strictest common form:

- ids: non-empty, unique within a request, 9 letters and digits (Mistral takes exactly
  that; OpenAI and Anthropic, `^[a-zA-Z0-9_-]+$`, take it too). Tusk gives each call its own
  id when it saves a step, so a provider that sends `""`, no id, or `call_0` every turn
  cannot produce duplicates; ids in older files are renamed deterministically (the same
  file always yields the same request, which keeps provider prompt caches warm);
- names: `^[A-Za-z0-9_-]{1,64}$` (OpenAI's rule; Anthropic's is the same); a name
  that cannot be made so (nothing usable left) loses its call and that call's result;
- `type: "function"`; `arguments`: the text of a JSON object;
- a Gemini thought signature (the opaque token Gemini puts on a model step's first `functionCall`,
  which Gemini 3 wants back unchanged): litellm hands it over inside the call's id
  (`call_x__thought__<signature>`) and in `provider_specific_fields`; Tusk's own id replaces the
  former, so it is kept as `provider_specific_fields: {"thought_signature": ...}` on the stored call,
  where litellm's Gemini route reads it back (bot/llm/wire.py `for_model` drops it for other providers).

Arguments are read leniently, as real servers write them (never with `eval`): surrounding
whitespace, a Markdown code fence, raw control characters inside strings (llama.cpp's JSON
grammar allows them), trailing commas, an object given as an object, a double-encoded
string. What still cannot be read becomes `{}`, and the model's raw text is returned
as the reason, for the tool result to carry.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import string
from typing import Any

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
ID = re.compile(r"[A-Za-z0-9]{9}")
_ALPHABET = string.ascii_letters + string.digits
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)


def new_call_id() -> str:
    """A fresh tool-call id in the form every provider takes."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(9))


def derived_call_id(*seed: object) -> str:
    """A stable id for a stored call whose own id is unusable (same seed, same id)."""
    digest = int.from_bytes(hashlib.sha256(repr(seed).encode()).digest()[:12], "big")
    out = []
    for _ in range(9):
        digest, i = divmod(digest, len(_ALPHABET))
        out.append(_ALPHABET[i])
    return "".join(out)


def repair_name(raw: Any) -> str | None:
    """A usable tool name from what the model wrote, or None when nothing usable is there.
    `functions.search_history` and `search_history<|channel|>commentary` give `search_history`."""
    if not isinstance(raw, str):
        return None
    text = raw.strip().removeprefix("functions.")
    match = NAME.search(text)
    return match.group(0) if match else None


def repair_arguments(raw: Any) -> tuple[str, str | None]:
    """(JSON object text, None) for arguments that can be read; ("{}", reason) for those that cannot."""
    if raw is None:
        return "{}", None
    if isinstance(raw, dict):
        return json.dumps(raw, ensure_ascii=False), None
    if not isinstance(raw, str):
        return "{}", f"the arguments were {type(raw).__name__}, not a JSON object: {str(raw)[:500]}"
    value = parse_lenient(raw)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False), None
    if value is None and not raw.strip():
        return "{}", None
    return "{}", f"the arguments were not a JSON object: {raw[:1000]}"


def parse_lenient(text: str) -> Any:
    """The JSON value in `text` read as real servers write it, or None if it cannot be read."""
    text = text.strip()
    if fence := _FENCE.match(text):
        text = fence.group(1).strip()
    for candidate in (text, _drop_trailing_commas(text)):
        try:
            value = json.loads(candidate, strict=False)  # strict=False: raw control characters in strings
        except ValueError:
            continue
        if isinstance(value, str) and value.strip()[:1] in ("{", "["):  # double-encoded
            return parse_lenient(value)
        return value
    return None


def _drop_trailing_commas(text: str) -> str:
    """`{"a": 1,}` -> `{"a": 1}`, leaving commas inside strings alone."""
    out: list[str] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            in_string = not (ch == '"' and not escaped)
            escaped = ch == "\\" and not escaped
        elif ch == '"':
            in_string = True
        elif ch == "," and text[i + 1:].lstrip()[:1] in ("}", "]"):
            continue
        out.append(ch)
    return "".join(out)


SIGNATURE_SEPARATOR = "__thought__"  # litellm's THOUGHT_SIGNATURE_SEPARATOR (prompt_templates/factory.py)


def thought_signature(call_id: Any, fields: Any = None, function_fields: Any = None) -> str | None:
    """The Gemini thought signature a call carries: in its (or its function's) `provider_specific_fields`,
    else after `__thought__` in its id; None when it has none."""
    for where in (fields, function_fields):
        value = where.get("thought_signature") if isinstance(where, dict) else None
        if isinstance(value, str) and value:
            return value
    if isinstance(call_id, str) and SIGNATURE_SEPARATOR in call_id:
        return call_id.split(SIGNATURE_SEPARATOR, 1)[1] or None
    return None


def wire_call(call_id: str, name: str, arguments: str, signature: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    if signature:
        call["provider_specific_fields"] = {"thought_signature": signature}
    return call


def repaired_call(call: Any) -> tuple[str, dict[str, Any]] | None:
    """(original id, the call with a repaired name and arguments) for a stored call, or None if it has
    no usable name. The id is left for the caller, who knows which ids the request already holds."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return None
    name = repair_name(call["function"].get("name"))
    if name is None:
        return None
    arguments, _ = repair_arguments(call["function"].get("arguments"))
    original = call.get("id")
    signature = thought_signature(original, call.get("provider_specific_fields"),
                                  call["function"].get("provider_specific_fields"))
    return (original if isinstance(original, str) else ""), wire_call("", name, arguments, signature)
