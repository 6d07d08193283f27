"""`tusk import --format nanobot` bringing the workspace's own skills/ folder into $TUSK_HOME/skills.

Each `skills/<name>/` holding a SKILL.md is copied whole (its references/, assets/, scripts/: scripts are
never run, but they stay with their skill). Without --yes nothing is written: each skill's fate is said.
A skill already in $TUSK_HOME/skills with the same files is left alone; one with other files is replaced
only when the owner answers yes to the question (no answer, as from a script: kept). A copy lands in a
hidden folder first and is renamed into place, so a skill is never half there. Links in the source are
left out (Tusk follows none in its data dir); a folder over `MAX_FILES` files or `MAX_BYTES` is left out
whole. After the copy, whether Tusk will offer it (and why not) is said, as `tusk skills list` would.
"""

from __future__ import annotations

import filecmp
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from bot.skills.skill import SkillRejected, parse, valid_name
from memory.paths import private_dir

MAX_FILES = 256  # files of one skill folder
MAX_BYTES = 8 << 20  # bytes of one skill folder

Ask = Callable[[str], bool]


def _files(folder: Path) -> tuple[list[str], int]:
    """(relative paths of the folder's regular files, links left out); ValueError past the caps."""
    out, links, size = [], 0, 0
    for here, dirs, names in os.walk(folder):  # does not descend into linked folders
        links += sum(1 for d in dirs if (Path(here) / d).is_symlink())
        dirs[:] = sorted(d for d in dirs if not (Path(here) / d).is_symlink())
        for name in sorted(names):
            path = Path(here) / name
            if path.is_symlink() or not path.is_file():
                links += 1
                continue
            size += path.stat().st_size
            out.append(path.relative_to(folder).as_posix())
            if len(out) > MAX_FILES or size > MAX_BYTES:
                raise ValueError(f"more than {MAX_FILES} files or {MAX_BYTES >> 20} MiB")
    return out, links


def _same(source: Path, target: Path, files: list[str]) -> bool:
    there = _files(target)[0] if target.is_dir() and not target.is_symlink() else None
    return there == files and all(filecmp.cmp(source / f, target / f, shallow=False) for f in files)


def _copy(source: Path, target: Path, files: list[str]) -> None:
    """The folder's files into `target`, through a hidden folder renamed into place."""
    root = target.parent
    staging = root / f".{target.name}.importing"
    old = root / f".{target.name}.replaced"
    for leftover in (staging, old):
        if leftover.exists():
            shutil.rmtree(leftover)
    for rel in files:
        private_dir((staging / rel).parent)
        shutil.copyfile(source / rel, staging / rel, follow_symlinks=False)
        os.chmod(staging / rel, 0o600)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    if old.exists():
        shutil.rmtree(old)


def _verdict(target: Path) -> str:
    try:
        skill = parse((target / "SKILL.md").read_bytes(), target)
    except (SkillRejected, OSError) as exc:
        return f"; Tusk skips it: {exc}"
    return "" if skill.offerable else f"; not offered: {'; '.join(skill.unmet)}"


def bring(source: Path, home: Path, yes: bool, ask: Ask | None, say: Callable[[str], None]) -> None:
    """Each skill folder of `source` into `home`/skills: said without `yes`, copied with it (asking first
    before one is replaced)."""
    folders = sorted(p for p in source.iterdir()
                     if p.is_dir() and not p.is_symlink() and not p.name.startswith(".") and (p / "SKILL.md").is_file())
    root = home / "skills"
    for folder in folders:
        name, target = folder.name, root / folder.name
        if not valid_name(name):
            say(f"skill {name}: not a skill name (lowercase letters, digits, hyphens): left out")
            continue
        try:
            files, links = _files(folder)
        except ValueError as exc:
            say(f"skill {name}: {exc}: left out")
            continue
        note = f" ({links} link(s) left out)" if links else ""
        exists = target.exists() or target.is_symlink()
        if exists and _same(folder, target, files):
            say(f"skill {name}: already in $TUSK_HOME/skills")
            continue
        if not yes:
            say(f"skill {name}: " + ("differs from the one in $TUSK_HOME/skills: with --yes you are asked before it "
                                     "is replaced" if exists else "would be copied into $TUSK_HOME/skills"))
            continue
        if exists and (ask is None or not ask(f"Replace the skill {name} in {target} with nanobot's? [y/N] ")):
            say(f"skill {name}: kept the one in $TUSK_HOME/skills")
            continue
        private_dir(root)
        _copy(folder, target, files)
        say(f"skill {name}: {'replaced in' if exists else 'copied into'} $TUSK_HOME/skills{note}{_verdict(target)}")
