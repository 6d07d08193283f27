"""The provider rules a conversation sent to an LLM must meet (shared by every test that sends to a model).

The strictest provider's rules: roles in a legal order, every tool call answered once, and
every call well formed (a non-empty id unique in the request, a name matching
`^[A-Za-z0-9_-]{1,64}$`, `type: "function"`, `arguments` the text of a JSON object).
"""

import json
import re
from typing import Any

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def call_problems(call: Any) -> list[str]:
    """What is wrong with one tool call in a request."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return [f"call is not a function call: {call!r}"]
    problems = []
    if not isinstance(call.get("id"), str) or not call["id"]:
        problems.append(f"empty tool call id {call.get('id')!r}")
    if call.get("type") != "function":
        problems.append(f"tool call type {call.get('type')!r}")
    name, args = call["function"].get("name"), call["function"].get("arguments")
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        problems.append(f"bad tool name {name!r}")
    try:
        if not isinstance(args, str) or not isinstance(json.loads(args), dict):
            problems.append(f"arguments are not a JSON object text: {args!r}")
    except ValueError:
        problems.append(f"arguments are not valid JSON: {args!r}")
    return problems


def text_of(content: Any) -> str:
    """A message's text: the string, or the text parts of a list of content parts (images carry none)."""
    if isinstance(content, list):
        return "\n".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return content or ""


def violations(messages: list[dict[str, Any]]) -> list[str]:
    """Every broken rule in a chat request's messages (system prompt first, then the conversation)."""
    problems = []
    convo = [m for m in messages if m["role"] != "system"]
    if messages and messages[0]["role"] != "system":
        problems.append("system prompt is not first")
    if convo and convo[0]["role"] != "user":
        problems.append(f"starts with {convo[0]['role']}")
    seen_ids: set[str] = set()
    pending: list[str] = []
    prev = None
    for i, m in enumerate(convo):
        role = m["role"]
        if pending and role != "tool":
            problems.append(f"{i}: tool calls {pending} have no result")
            pending = []
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                problems.append(f"{i}: orphan tool result {m.get('tool_call_id')}")
            else:
                pending.remove(m["tool_call_id"])
        elif role == "assistant":
            for c in m.get("tool_calls") or []:
                problems.extend(f"{i}: {p}" for p in call_problems(c))
            calls = [c.get("id") for c in m.get("tool_calls") or [] if isinstance(c, dict)]
            if not calls and not text_of(m.get("content")).strip():
                problems.append(f"{i}: empty assistant message")
            if prev == "assistant":
                problems.append(f"{i}: two assistant messages in a row")
            if seen_ids & set(calls) or len(set(calls)) != len(calls):
                problems.append(f"{i}: reused tool call id")
            seen_ids |= set(calls)
            pending = calls
        elif role == "user":
            if prev == "user":
                problems.append(f"{i}: two user messages in a row")
            if not text_of(m.get("content")).strip():
                problems.append(f"{i}: empty user message")
        else:
            problems.append(f"{i}: unexpected role {role}")
        prev = role
    if pending:
        problems.append(f"end: tool calls {pending} have no result")
    return problems
