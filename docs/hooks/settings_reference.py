"""The configuration reference, generated from the settings themselves (a MkDocs hook, mkdocs.yml `hooks:`).

`reference_markdown()` renders one table per section of `.env.example` (`# --- Title ---`): each
variable of `bot.config.Settings` (the fields of its concern models, bot/config/) with its type, default
and constraints read from the field (`OrUnset[int]` reads "integer (or unset)"), and its
description read from the comment lines above it in `.env.example` (a run of variables right after
one comment block shares it; a comment after the value on the same line counts too). The build fails
(`ReferenceMismatch`) when a setting has no description there, or `.env.example` sets a variable that
Settings does not read, so the page can be neither incomplete nor stale.

The hook replaces the marker line in docs/reference/configuration.md with that text. It imports
bot.config, which never imports litellm (tests/test_startup.py checks the commands that need no model).
"""

from __future__ import annotations

import enum
import html
import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / ".env.example"
MARKER = "<!-- settings-reference -->"
PAGE = "reference/configuration.md"

VARIABLE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")
SECTION = re.compile(r"^#\s*---+\s*(.*?)\s*-*\s*$")
ENV_NAME = re.compile(r"\b(?:TUSK|TELEGRAM|DISCORD|SLACK)_[A-Z0-9_]*[A-Z0-9]\b|\$TUSK_HOME\b")


class ReferenceMismatch(Exception):
    """The settings and .env.example disagree: the message names each variable and the fix."""


@dataclass(frozen=True, slots=True)
class Documented:
    name: str
    section: str
    description: str


def documented(text: str) -> list[Documented]:
    """Every `NAME=value` line of .env.example with its section and the comment that describes it."""
    section, block, out = "", [], []
    last_was_variable = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            block, last_was_variable = [], False
        elif header := SECTION.match(line):
            title = re.sub(r"\s*\(README[^)]*\)", "", header.group(1))  # the README no longer holds those topics
            section, block, last_was_variable = title, [], False
        elif line.startswith("#"):
            if last_was_variable:
                block, last_was_variable = [], False
            block.append(line.lstrip("#").strip())
        elif match := VARIABLE.match(line):
            value = match.group(2)
            beside = value.split(" #", 1)[1].strip() if " #" in value else ""
            out.append(Documented(match.group(1), section, " ".join(block + ([beside] if beside else []))))
            last_was_variable = True
    return out


def settings_fields() -> dict[str, typing.Any]:
    """bot.config.Settings' fields by their variable name (from this checkout, not an installed copy)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bot.config import Settings

    return {field.validation_alias: field for field in Settings.model_fields.values()}


def type_name(annotation: object) -> str:
    """A reader's name for a field's type: `int`, `text`, `one of: a, b`, `comma-separated list`, ..."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        return " or ".join(type_name(a) for a in kept) + (" (or unset)" if len(kept) < len(args) else "")
    if origin is typing.Literal:
        return "one of: " + ", ".join(f"`{a}`" for a in args)
    if origin is tuple:
        return "comma-separated list"
    names = {str: "text", int: "integer", float: "number", bool: "`true` / `false`", Path: "path"}
    if annotation in names:
        return names[annotation]
    if getattr(annotation, "__name__", "") == "SecretStr":
        return "secret (masked in logs)"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of: " + ", ".join(f"`{m.value}`" for m in annotation)
    return f"`{getattr(annotation, '__name__', annotation)}`"


def default_text(field: typing.Any) -> str:
    if field.default_factory is not None:
        return "computed at start (see the description)"
    value = field.default
    if value is None or value == ():
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"  # as it is written in the settings file: 16000, not 16,000


CONSTRAINTS = {"gt": "> {}", "ge": "≥ {}", "lt": "< {}", "le": "≤ {}", "min_length": "at least {} character(s)",
               "max_length": "at most {} characters", "pattern": "matches `{}`"}


def constraints_text(field: typing.Any) -> str:
    parts = []
    for item in field.metadata:
        for attr, form in CONSTRAINTS.items():
            value = getattr(item, attr, None)
            if value is not None:
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                parts.append(form.format(value))
    return ", ".join(parts)


def cell(text: str) -> str:
    """Plain comment text as one Markdown table cell: code spans kept, variable names set as code,
    HTML and table pipes escaped, stray asterisks not read as emphasis."""
    pieces = re.split(r"(`[^`]*`)", text)
    out = []
    for i, piece in enumerate(pieces):
        if i % 2:
            out.append(piece)  # a code span as written (a pipe inside one does not split the table)
            continue
        piece = html.escape(piece, quote=False).replace("|", "\\|").replace("*", "\\*")
        out.append(ENV_NAME.sub(lambda m: f"`{m.group(0)}`", piece))
    return "".join(out)


def reference_markdown(example: Path = EXAMPLE) -> str:
    """The reference tables; raises ReferenceMismatch if Settings and .env.example disagree."""
    fields = settings_fields()
    entries = documented(example.read_text(encoding="utf-8"))
    seen = {e.name for e in entries}
    problems = [f"{name}: a setting with no description in .env.example (add comment lines above its line there)"
                for name in fields if name not in seen]
    problems += [f"{e.name}: in .env.example but not a field of bot.config.Settings (remove it, or add the setting)"
                 for e in entries if e.name not in fields]
    problems += [f"{e.name}: its line in .env.example has no comment to describe it (add one above it)"
                 for e in entries if e.name in fields and not e.description]
    doubles = sorted({e.name for e in entries if [x.name for x in entries].count(e.name) > 1})
    problems += [f"{name}: set more than once in .env.example" for name in doubles]
    if problems:
        raise ReferenceMismatch("the configuration reference cannot be built:\n  " + "\n  ".join(problems))

    out, section = [], None
    for entry in entries:
        if entry.section != section:
            section = entry.section
            out += ["", f"### {section or 'General'}", "",
                    "| variable | type | default | constraints | description |",
                    "|---|---|---|---|---|"]
        field = fields[entry.name]
        out.append(f"| `{entry.name}` | {type_name(field.annotation)} | {default_text(field)} | "
                   f"{constraints_text(field)} | {cell(entry.description)} |")
    return "\n".join(out).strip() + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001  (MkDocs hook signature)
    """Put the generated tables in place of the marker on the configuration page."""
    if page.file.src_uri != PAGE:
        return markdown
    from mkdocs.exceptions import PluginError  # a clean "Error: ..." line and exit 1, not a traceback

    if MARKER not in markdown:
        raise PluginError(f"docs/{PAGE} lost its marker line {MARKER}")
    try:
        return markdown.replace(MARKER, reference_markdown())
    except ReferenceMismatch as exc:
        raise PluginError(str(exc)) from exc
