"""The provider rules a conversation sent to an LLM must meet (shared by several tests)."""

from typing import Any


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
            calls = [c["id"] for c in m.get("tool_calls") or []]
            if not calls and not (m.get("content") or "").strip():
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
            if not (m.get("content") or "").strip():
                problems.append(f"{i}: empty user message")
        else:
            problems.append(f"{i}: unexpected role {role}")
        prev = role
    if pending:
        problems.append(f"end: tool calls {pending} have no result")
    return problems
