"""Edit a settings file in place: change the keys asked, keep every other line and comment as it was.

The file is parsed with python-dotenv's own parser (what pydantic-settings reads it with), rewritten
whole through memory/files.write_atomic (owner-only 0600, a temporary file renamed over the old one),
so a crash leaves the old file or the new one, never half of each.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from pathlib import Path

from dotenv.parser import parse_stream

from memory.files import write_atomic

PLAIN = re.compile(r"[A-Za-z0-9_\-.:/@+,]*")


def quoted(value: str) -> str:
    """`value` as a .env value: bare when plain, else single-quoted (no `${...}` expansion surprises)."""
    if "\n" in value or "\r" in value:
        raise ValueError("a setting's value cannot span lines")
    if PLAIN.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def edited(text: str, changes: Mapping[str, str]) -> str:
    """`text` with each key of `changes` set (every line that binds it rewritten, in place; missing keys
    appended at the end); all other lines, comments and blank lines kept byte for byte."""
    out, done = [], set()
    for binding in parse_stream(io.StringIO(text)):
        original, key = binding.original.string, binding.key
        if key is not None and key in changes and not binding.error:
            lead = original[: len(original) - len(original.lstrip())]
            out.append(f"{lead}{key}={quoted(changes[key])}\n")
            done.add(key)
        else:
            out.append(original)
    body = "".join(out)
    missing = [key for key in changes if key not in done]
    if missing and body and not body.endswith("\n"):
        body += "\n"
    return body + "".join(f"{key}={quoted(changes[key])}\n" for key in missing)


def update(path: Path, changes: Mapping[str, str], header: str = "") -> None:
    """Set `changes` in the settings file at `path` (made, starting with `header`, if absent), 0600."""
    text = path.read_text(encoding="utf-8") if path.exists() else header
    write_atomic(path, edited(text, changes), follow_dir=True)  # a new file, 0600, renamed over the old
