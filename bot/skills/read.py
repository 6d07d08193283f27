"""What read_skill gives the model: a skill's instructions, or one file of its folder, framed and capped.

    [Skill "refunds" (the owner's, from $TUSK_HOME/skills): instructions ...]
    <SKILL.md's body>
    [Files in its folder, read with read_skill("refunds", file=...): references/policy.md, scripts/x.sh (never run)]

A file is named by its path inside the skill's folder. Refused, with the reason for the model: an absolute
path, `..`, a hidden file (`.env`, `.git/...`), a path whose links lead out of the folder (in the data dir,
any link at all: Tusk follows none there), a file over `MAX_FILE_BYTES`, a binary file. The text is cut at
the settings' cap with a note saying how much was left out.

The frame says the text is the owner's instructions, whatever root the skill came from: $TUSK_HOME/skills,
~/.agents/skills and TUSK_SKILLS_DIRS are all folders the owner chose (TUSK_SKILLS_SHARED=off and
TUSK_SKILLS_DIRS leave them out), and nothing a chat member or the model writes ever lands in them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from bot.errors import SkillRefused
from bot.skills.catalog import Entry
from bot.skills.skill import SkillRejected, text_of

MAX_FILE_BYTES = 1 << 20
MAX_FILES_LISTED = 40


def frame(entry: Entry, what: str) -> str:
    assert entry.skill is not None
    return (f"[{what} of the skill \"{entry.name}\" (the owner's, from {entry.root.label}): the owner's instructions, "
            "binding like the system message and within it]")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... cut here: {len(text) - limit:,} more characters not shown]"


def files_of(entry: Entry) -> list[str]:
    """Up to MAX_FILES_LISTED paths of files in the skill's folder besides SKILL.md (no hidden ones), sorted."""
    root = entry.folder.resolve()
    out: list[str] = []
    for folder, dirs, names in os.walk(root):  # links to folders are not walked into
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder) / name
            if name.startswith(".") or path == root / "SKILL.md":
                continue
            if path.is_symlink() and (not entry.root.follows_links or not path.resolve().is_relative_to(root)):
                continue
            out.append(path.relative_to(root).as_posix())
            if len(out) >= MAX_FILES_LISTED:
                return out
    return out


def _files_line(entry: Entry) -> str:
    files = files_of(entry)
    if not files:
        return ""
    shown = [f"{f} (never run)" if f.startswith("scripts/") else f for f in files]
    more = " ..." if len(files) >= MAX_FILES_LISTED else ""
    return (f"\n\n[Files in its folder, read with read_skill(name=\"{entry.name}\", file=...): "
            f"{', '.join(shown)}{more}]")


def skill_text(entry: Entry, limit: int) -> str:
    """The skill's instructions with the frame and the list of its other files."""
    assert entry.skill is not None
    head, files = frame(entry, "The instructions"), _files_line(entry)
    return f"{head}\n\n{_cut(entry.skill.body, max(200, limit - len(head) - len(files)))}{files}"


def resolve(entry: Entry, rel: str) -> Path:
    """The file `rel` names inside the skill's folder, or SkillRefused saying why not."""
    if "\0" in rel or "\\" in rel:
        raise SkillRefused(f"{rel!r} is not a path inside the skill's folder (write it as references/file.md)")
    path = PurePosixPath(rel)
    if path.is_absolute() or rel.startswith("~"):
        raise SkillRefused(f"{rel} is an absolute path: give the path inside the skill's folder, "
                           "such as references/guide.md")
    if ".." in path.parts:
        raise SkillRefused(f"{rel} leaves the skill's folder (..): only files inside it are read")
    if any(part.startswith(".") for part in path.parts):
        raise SkillRefused(f"{rel} is a hidden file: those are not read")
    root = entry.folder.resolve()
    target = root.joinpath(*path.parts)
    if not entry.root.follows_links and _any_link(root, path.parts):
        raise SkillRefused(f"{rel} goes through a symbolic link, and Tusk follows none in its data dir")
    if not target.resolve().is_relative_to(root):
        raise SkillRefused(f"{rel} is a link that leads out of the skill's folder: not read")
    if not target.is_file():
        listed = ", ".join(files_of(entry)) or "none"
        raise SkillRefused(f"the skill {entry.name} has no file {rel} (its files: {listed})")
    return target


def _any_link(root: Path, parts: Iterable[str]) -> bool:
    here = root
    for part in parts:
        here = here / part
        if here.is_symlink():
            return True
    return False


def file_text(entry: Entry, rel: str, limit: int) -> str:
    """One file of the skill's folder, framed; SKILL.md itself gives the instructions."""
    if rel.strip().removeprefix("./") in ("SKILL.md", ""):
        return skill_text(entry, limit)
    rel = rel.strip().removeprefix("./")
    target = resolve(entry, rel)
    size = target.stat().st_size
    if size > MAX_FILE_BYTES:
        raise SkillRefused(f"{rel} is {size:,} bytes; read_skill reads files up to {MAX_FILE_BYTES:,}")
    with open(target, "rb") as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    try:
        text = text_of(data, rel)
    except SkillRejected as exc:
        raise SkillRefused(f"{exc}: read_skill gives text files only") from exc
    head = frame(entry, f"The file {rel}")
    note = " (a script: Tusk never runs it; it is shown as text)" if rel.startswith("scripts/") else ""
    return f"{head}{note}\n\n{_cut(text, max(200, limit - len(head) - len(note)))}"


def listing(entries: Iterable[Entry], limit: int) -> str:
    """read_skill("*"): every skill this chat has, a line each."""
    lines = [f"- {e.name}: {e.skill.description}" for e in entries if e.skill is not None]
    if not lines:
        return "This chat has no skills."
    head = f"The {len(lines)} skill(s) of this chat (the owner's playbooks); read one with read_skill(name=...):"
    return _cut("\n".join([head, *lines]), limit)
