"""A consolidation round's answer read: the model's `save_memory` arguments (or the same two parts as
labelled text) into a `Summary`, or `ConsolidationFailed` saying why not. Pure: no file, no model.

    parse_summary(raw, old_memory, max_tokens)   the arguments (a dict or JSON text, read leniently:
                                                 memory/wire.py), else `TEXT_FORMAT`'s labelled parts
    ConsolidationFailed                          what a failed round raises: an answer that cannot be read,
                                                 or (raised by the caller's `complete`) a model call that failed
    MemoryTooLong                                ... a memory_update over the cap: the next round asks for less
    Deferred                                     not a failure: the call gave way to a person's reply
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memory.tokens import count_text
from memory.wire import parse_lenient

_LABEL = re.compile(r"^[\s#*_>`-]*(history[ _]entry|summary|memory[ _]update|memory(?:\.md)?)[\s*_`]*:?[\s*_`]*(.*)$",
                    re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Summary:
    history_entry: str
    memory_update: str


class ConsolidationFailed(Exception):
    pass


class MemoryTooLong(ConsolidationFailed):
    pass


class Deferred(Exception):
    """`complete` did not answer so that a person's reply could go first (a one-slot model server: bot/llm/slots.py):
    nothing of the round is written, and the run waits (`idle`) and sends the same chunk again."""


def parse_summary(raw: dict[str, Any] | str | None, old_memory: str, max_tokens: int) -> Summary:
    """Validate `save_memory` arguments, or the same two parts in labelled text; raises ConsolidationFailed."""
    args = parse_lenient(raw) if isinstance(raw, str) else raw
    if not isinstance(args, dict) and isinstance(raw, str):
        args = parse_text_summary(raw)
    if not isinstance(args, dict):
        raise ConsolidationFailed("the model did not call save_memory" if not raw else
                                  f"save_memory arguments could not be read: {str(raw)[:200]}")
    entry, memory = args.get("history_entry"), args.get("memory_update")
    if not isinstance(entry, str) or not entry.strip() or not isinstance(memory, str):
        raise ConsolidationFailed("save_memory needs history_entry and memory_update strings")
    if old_memory.strip() and not memory.strip():
        raise ConsolidationFailed("memory_update is empty while MEMORY.md was not")
    if count_text(memory) > max_tokens:
        raise MemoryTooLong(f"memory_update is over {max_tokens} tokens")
    return Summary(entry.strip(), memory.strip() + "\n" if memory.strip() else "")


def parse_text_summary(text: str) -> dict[str, str] | None:
    """The two labelled parts of `TEXT_FORMAT` (headings, bold or `key:` forms alike), or None."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.strip().strip("`").splitlines():
        if match := _LABEL.match(line):
            key = "history_entry" if match.group(1).lower().startswith(("history", "summary")) else "memory_update"
            current = parts.setdefault(key, [])
            if match.group(2).strip():
                current.append(match.group(2))
        elif current is not None:
            current.append(line)
    if "history_entry" not in parts or "memory_update" not in parts:
        return None
    return {key: "\n".join(lines).strip() for key, lines in parts.items()}
