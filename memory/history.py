"""Turn whatever a session holds into a conversation every provider accepts.

Rules (Anthropic's are the strictest, so those):
- it starts at the first user message;
- every tool call is well formed (memory/wire.py: id, name, type, arguments), ids unique;
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
from memory.wire import ID, derived_call_id, repaired_call


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
            results: list[Message] = []
            while i < n and messages[i].role == "tool":
                results.append(messages[i])
                i += 1
            calls, answers = _answered_calls(msg, results, used_ids)
            if calls:
                out.append(replace(msg, tool_calls=tuple(calls)))
                out.extend(answers)
            elif msg.content and msg.content.strip():
                out.append(replace(msg, tool_calls=(), reasoning=None, thinking_blocks=()))
        elif msg.role in ("user", "assistant") and msg.content and msg.content.strip():
            out.append(replace(msg, tool_call_id=None) if msg.tool_call_id else msg)
        # tool results reaching here are orphans; system messages are never taken from a session
    return out


def _answered_calls(msg: Message, results: list[Message], used_ids: set[str]) -> tuple[list[dict], list[Message]]:
    """The message's well-formed calls that have a result, each with an id unique in the request, and
    their results in the same order. A result answers the first call with its id (an id-less result
    the first id-less call); calls without a result and results without a call are left out."""
    taken: set[int] = set()
    calls: list[dict] = []
    answers: list[Message] = []
    for call in msg.tool_calls:
        fixed = repaired_call(call)
        if fixed is None:
            continue
        original, wire = fixed
        match = next((j for j, r in enumerate(results) if j not in taken and (r.tool_call_id or "") == original),
                     None)
        if match is None:
            continue
        taken.add(match)
        call_id = original if ID.fullmatch(original) and original not in used_ids else ""
        salt = 0
        while not call_id or call_id in used_ids:
            call_id, salt = derived_call_id(msg.ts, original, salt), salt + 1
        used_ids.add(call_id)
        calls.append({**wire, "id": call_id})
        answers.append(replace(results[match], tool_call_id=call_id, content=results[match].content or ""))
    return calls, answers


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
