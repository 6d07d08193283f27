"""One skill read from its folder, in the Agent Skills format (agentskills.io/specification), checked.

    <name>/SKILL.md   `---`, YAML frontmatter, `---`, then the Markdown body: the instructions
        name            required: 1-64 of a-z, 0-9 and `-`, not starting or ending with `-`, no `--`;
                        the folder's own name
        description     required: 1-1,024 characters, what the skill does and when to use it
        license, compatibility, metadata, allowed-tools      optional (metadata.py reads nanobot's and
                        OpenClaw's blocks: `always`, and what the skill requires)
    <name>/references/, assets/, scripts/, ...      read on demand by read_skill (bot/skills/read.py);
                        nothing is ever run

`parse` turns a SKILL.md's bytes into a `Skill`, or raises `SkillRejected` whose message is the one
sentence the log, `tusk skills list` and `tusk doctor` give: no frontmatter, broken YAML, a missing or
invalid name, a name that is not its folder's, a missing description, a binary or oversized file. The
YAML is read with PyYAML's safe loader only (no tags, no objects).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot.skills import metadata

MAX_BYTES = 1 << 20  # a SKILL.md over 1 MiB is skipped (the format recommends a body under 5,000 tokens)
MAX_NAME = 64
MAX_DESCRIPTION = 1024
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE)
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the safe loader, in C where libyaml is there


class SkillRejected(ValueError):
    """A skill folder that is not a usable skill; the message says why, in one sentence."""


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str  # on one line, as the prompt lists it
    body: str  # the instructions: SKILL.md after its frontmatter
    folder: Path  # where it was found (a link's own path; its files are read within the link's target)
    always: bool = False  # nanobot's `always`: the body goes into every prompt
    unmet: tuple[str, ...] = ()  # why Tusk cannot offer it (metadata.py); empty when it can
    license: str = ""
    compatibility: str = ""
    allowed_tools: tuple[str, ...] = ()  # the format's experimental pre-approval list, shown, not enforced

    @property
    def offerable(self) -> bool:
        return not self.unmet


def valid_name(name: str) -> bool:
    return len(name) <= MAX_NAME and NAME.fullmatch(name) is not None


def text_of(data: bytes, what: str = "SKILL.md") -> str:
    """UTF-8 text of a file, or SkillRejected for a binary one (NUL bytes, or not UTF-8)."""
    if b"\0" in data:
        raise SkillRejected(f"{what} is a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkillRejected(f"{what} is not UTF-8 text (byte {exc.start})") from exc


def frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """(the YAML mapping, the body) of a SKILL.md's text."""
    match = FRONTMATTER.match(text)
    if match is None:
        raise SkillRejected("SKILL.md has no YAML frontmatter (it must start with a line `---`, then "
                            "name: and description:, then a line `---`)")
    try:
        front = yaml.load(match[1], Loader=LOADER)  # noqa: S506 - the safe loader (no tags, no objects)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        hint = " (a value with `: ` in it needs quotes)" if "mapping values are not allowed" in problem else ""
        raise SkillRejected(f"SKILL.md's frontmatter is not valid YAML{where}: {problem}{hint}") from exc
    except RecursionError as exc:
        raise SkillRejected("SKILL.md's frontmatter is nested too deep") from exc
    if not isinstance(front, dict):
        raise SkillRejected("SKILL.md's frontmatter is not a mapping of fields (name: ..., description: ...)")
    return {str(k): v for k, v in front.items()}, text[match.end():].strip()


def _name(front: dict[str, Any], folder: str) -> str:
    name = front.get("name")
    if name is None or name == "":
        raise SkillRejected("SKILL.md's frontmatter has no name")
    if not isinstance(name, str) or not valid_name(name):
        raise SkillRejected(f"the name {name!r} is not a skill name: 1-{MAX_NAME} lowercase letters, digits "
                            "and single hyphens, not at the start or end")
    if name != folder:
        raise SkillRejected(f"the name {name!r} is not its folder's ({folder!r}): rename one to match the other")
    return name


def _description(front: dict[str, Any]) -> str:
    raw = front.get("description")
    if not isinstance(raw, str) or not raw.strip():
        raise SkillRejected("SKILL.md's frontmatter has no description (what the skill does and when to use it)")
    if len(raw.strip()) > MAX_DESCRIPTION:
        raise SkillRejected(f"the description has {len(raw.strip()):,} characters, more than the "
                            f"{MAX_DESCRIPTION:,} the format allows")
    return " ".join(raw.split())


def _words(value: object) -> tuple[str, ...]:
    """allowed-tools: a space-separated string or a list of strings."""
    if isinstance(value, str):
        return tuple(value.split())
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def parse(data: bytes, folder: Path) -> Skill:
    """A SKILL.md's bytes, from `folder`, as a Skill; SkillRejected says why it is not one."""
    if len(data) > MAX_BYTES:
        raise SkillRejected(f"SKILL.md is {len(data):,} bytes, more than the {MAX_BYTES:,} Tusk reads")
    front, body = frontmatter(text_of(data))
    name = _name(front, folder.name)
    description = _description(front)
    text = lambda key: str(front[key]).strip() if isinstance(front.get(key), (str, int, float)) else ""  # noqa: E731
    return Skill(name, description, body, folder, always=metadata.always(front), unmet=metadata.unmet(front),
                 license=text("license"), compatibility=text("compatibility"),
                 allowed_tools=_words(front.get("allowed-tools")))
