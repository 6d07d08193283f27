"""Streaming JSON for imports: items under a prefix, built one at a time, depth and size capped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ijson

from bot.ops.imports.model import MAX_DEPTH, MAX_TEXT, ImportRefused


def events(path: Path) -> Iterator[tuple[str, str, object]]:
    """ijson's (prefix, event, value) stream of a file, a truncated or malformed one refused by name."""
    depth = 0
    try:
        with open(path, "rb") as fh:
            for prefix, event, value in ijson.parse(fh, use_float=True):
                if event in ("start_map", "start_array"):
                    depth += 1
                    if depth > MAX_DEPTH:
                        raise ImportRefused(f"{path}: JSON nested deeper than {MAX_DEPTH} levels: refused "
                                            "(not an export; nothing written)")
                elif event in ("end_map", "end_array"):
                    depth -= 1
                elif event == "string" and len(value) > MAX_TEXT:
                    raise ImportRefused(f"{path}: a string of {len(value):,} characters: refused (nothing written)")
                yield prefix, event, value
    except ijson.JSONError as exc:
        raise ImportRefused(f"{path}: malformed or truncated JSON ({exc}): nothing written") from exc


def build(stream: Iterator[tuple[str, str, object]], first: tuple[str, str, object]) -> object:
    """The value that starts with the event `first`, built from the stream (consumed up to its end)."""
    builder = ijson.ObjectBuilder()
    builder.event(first[1], first[2])
    if first[1] not in ("start_map", "start_array"):
        return builder.value
    depth = 1
    for _, event, value in stream:
        builder.event(event, value)
        depth += {"start_map": 1, "start_array": 1, "end_map": -1, "end_array": -1}.get(event, 0)
        if depth == 0:
            return builder.value
    raise ImportRefused("truncated JSON: nothing written")
