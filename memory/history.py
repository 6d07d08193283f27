"""Turn whatever a session holds into a conversation every provider accepts.

Rules (Anthropic's are the strictest, so those):
- it starts at the first user message;
- an assistant message with tool calls is followed by exactly one result for each call;
  calls without a result are dropped from it (and the message too, when nothing is left);
  results without a declaring call (orphans, duplicates) are dropped;
- no two user messages and no two assistant messages in a row: they are merged (an
  assistant's text merges into the next one only when it has no tool calls);
- no empty messages.

Nothing is invented: the output holds only text that was in the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from memory.session import Message


def legal_history(messages: Sequence[Message]) -> list[Message]:
    return _merge_runs(_pair_tool_calls(messages))


def _pair_tool_calls(messages: Sequence[Message]) -> list[Message]:
    out: list[Message] = []
    used_ids: set[str] = set()  # a tool call id may appear once in a conversation
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        i += 1
        if msg.role == "assistant" and msg.tool_calls:
            results: dict[str, Message] = {}
            while i < n and messages[i].role == "tool":
                result = messages[i]
                i += 1
                if result.tool_call_id is not None:
                    results.setdefault(result.tool_call_id, result)
            calls, seen = [], set()
            for call in msg.tool_calls:
                if call["id"] in results and call["id"] not in used_ids | seen:
                    seen.add(call["id"])
                    calls.append(call)
            used_ids |= seen
            if calls:
                out.append(replace(msg, tool_calls=tuple(calls)))
                out.extend(replace(results[c["id"]], content=results[c["id"]].content or "") for c in calls)
            elif msg.content and msg.content.strip():
                out.append(replace(msg, tool_calls=()))
        elif msg.role in ("user", "assistant") and msg.content and msg.content.strip():
            out.append(replace(msg, tool_call_id=None) if msg.tool_call_id else msg)
        # tool results reaching here are orphans; system messages are never taken from a session
    return out


def _merge_runs(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    for msg in messages:
        if not out:
            if msg.role == "user":
                out.append(msg)
            continue
        prev = out[-1]
        if msg.role == prev.role == "user" or (msg.role == prev.role == "assistant" and not prev.tool_calls):
            out[-1] = replace(msg, content=f"{prev.content}\n\n{msg.content}" if msg.content else prev.content)
        else:
            out.append(msg)
    return out
