"""Which skills there are: the folders of each skill root, read again whenever one of them changes.

    $TUSK_HOME/skills/<name>/SKILL.md      the owner's own ("home"); a link there is not followed, as
                                           nowhere in the data dir
    ~/.agents/skills/<name>/SKILL.md       the shared convention other agents install into ("shared",
                                           read only; TUSK_SKILLS_SHARED=off leaves it out)
    each folder of TUSK_SKILLS_DIRS        ("TUSK_SKILLS_DIRS"), in the order given

A skill's name is its folder's (skill.py checks the frontmatter agrees); the first root holding a name
wins and a later folder of that name is listed as shadowed. A folder that is not a usable skill is an
`Entry` with its `problem`, logged once (one line) when it appears or changes, and the others load.

`snapshot()` is called on every prompt build, so it is cheap: one directory listing per root and one
`stat` per SKILL.md; only a SKILL.md whose inode, mtime or size moved is read and parsed again. Adding,
changing or removing a skill is seen on the next turn, without a restart; an unchanged catalog gives
the very same `Snapshot` (its `version` equal), so the system prompt stays byte-identical.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.skills.skill import MAX_BYTES, Skill, SkillRejected, parse

logger = logging.getLogger(__name__)

Stamp = tuple[int, int, int]
LINK_IN_HOME = ("a symbolic link, and Tusk never follows links in its data dir: move the folder itself here, or "
                "list its parent in TUSK_SKILLS_DIRS")


@dataclass(frozen=True, slots=True)
class Root:
    path: Path
    source: str  # "home", "shared" or "TUSK_SKILLS_DIRS"
    label: str  # how listings name it: $TUSK_HOME/skills, ~/.agents/skills, or the folder itself

    @property
    def follows_links(self) -> bool:
        """Skill folders may be links (skill managers link them in), except in the data dir."""
        return self.source != "home"


def roots(home: Path, shared: bool, dirs: Sequence[Path]) -> tuple[Root, ...]:
    """The skill roots in the order a name is looked up (the first found wins)."""
    out = [Root(home / "skills", "home", "$TUSK_HOME/skills")]
    if shared:
        out.append(Root(Path.home() / ".agents" / "skills", "shared", "~/.agents/skills"))
    out += [Root(Path(d).expanduser(), "TUSK_SKILLS_DIRS", str(d)) for d in dirs]
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Entry:
    """One folder found in a root: a skill, or why it is not one."""

    name: str  # the folder's name
    folder: Path
    root: Root
    skill: Skill | None = None
    problem: str = ""  # why the folder was skipped: bad input
    shadowed_by: Root | None = None  # an earlier root holds a folder of this name, and wins

    @property
    def offered(self) -> bool:
        """Whether the model may be given it (in chats TUSK_SKILLS_CHATS gives it to)."""
        return self.skill is not None and self.skill.offerable and self.shadowed_by is None

    @property
    def why_not(self) -> str:
        """Why it is not offered, in words ('' when it is)."""
        if self.shadowed_by is not None:
            return f"a skill of this name in {self.shadowed_by.label} wins"
        if self.skill is None:
            return f"skipped: {self.problem}"
        return "; ".join(self.skill.unmet)


@dataclass(frozen=True, slots=True)
class Snapshot:
    entries: tuple[Entry, ...]  # by name, then in root order
    version: tuple[object, ...]  # equal for an unchanged catalog

    @property
    def offered(self) -> tuple[Skill, ...]:
        """The skills that may be offered, by name."""
        return tuple(e.skill for e in self.entries if e.offered and e.skill is not None)

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.offered if s.name == name), None)


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


class Catalog:
    def __init__(self, skill_roots: Sequence[Root], log: bool = True) -> None:
        """`log=False`: problems are not logged (the listings that show them anyway: `tusk skills list`, doctor)."""
        self.roots = tuple(skill_roots)
        self.log = log
        self._parsed: dict[Path, tuple[Stamp, Skill | str]] = {}  # SKILL.md -> (its stamp, the skill or problem)
        self._told: dict[Path, str] = {}  # folder -> the problem last logged for it
        self._last = Snapshot((), ())

    def snapshot(self) -> Snapshot:
        """The catalog as the folders hold it now (the previous Snapshot itself when nothing changed)."""
        found = list(self._found())  # plain strings and tuples: this runs on every prompt build
        version = tuple((index, name, stamp, problem) for index, name, _, stamp, problem in found)
        if version == self._last.version:
            return self._last
        entries: list[Entry] = []
        winners: dict[str, Root] = {}
        for index, name, path, stamp, problem in found:
            root, folder = self.roots[index], Path(path)
            skill, problem = self._skill(root, folder, stamp) if not problem else (None, problem)
            self._tell(folder, problem)
            first = winners.setdefault(name, root)  # the first root wins, even with a broken folder: its owner
            shadow = None if first is root else first  # sees why, rather than silently getting another
            entries.append(Entry(name, folder, root, skill, problem, shadowed_by=shadow))
        entries.sort(key=lambda e: (e.name, self.roots.index(e.root)))
        live = {Path(path) / "SKILL.md" for _, _, path, _, _ in found}
        self._parsed = {p: v for p, v in self._parsed.items() if p in live}
        self._last = Snapshot(tuple(entries), version)
        return self._last

    def _found(self) -> Iterator[tuple[int, str, str, Stamp | None, str]]:
        """(root's index, folder name, folder, SKILL.md's stamp, a problem found without reading) per skill folder."""
        for index, root in enumerate(self.roots):
            try:
                listing = sorted(os.scandir(root.path), key=lambda e: e.name)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                self._tell(root.path, f"the skills folder cannot be read: {exc.strerror}")
                continue
            for item in listing:
                if item.name.startswith("."):
                    continue
                if item.is_symlink() and not root.follows_links:
                    if item.is_dir():
                        yield index, item.name, item.path, None, LINK_IN_HOME
                    continue
                if not item.is_dir():
                    continue  # a README or any other file beside the skills
                stamp = _stamp(os.path.join(item.path, "SKILL.md"))
                yield index, item.name, item.path, stamp, "" if stamp is not None else "no SKILL.md in the folder"

    def _skill(self, root: Root, folder: Path, stamp: Stamp | None) -> tuple[Skill | None, str]:
        """The folder's skill (parsed again only when its SKILL.md changed), or its problem."""
        path = folder / "SKILL.md"
        cached = self._parsed.get(path)
        if cached is None or cached[0] != stamp:
            try:
                result: Skill | str = self._read(root, folder)
            except SkillRejected as exc:
                result = str(exc)
            except OSError as exc:
                result = f"SKILL.md cannot be read: {exc.strerror or exc}"
            assert stamp is not None
            self._parsed[path] = cached = (stamp, result)
        result = cached[1]
        return (result, "") if isinstance(result, Skill) else (None, result)

    def _read(self, root: Root, folder: Path) -> Skill:
        path = folder / "SKILL.md"
        if path.is_symlink() and not root.follows_links:
            raise SkillRejected("SKILL.md is a symbolic link, and Tusk never follows links in its data dir")
        if path.is_symlink() and not _inside(path, folder):
            raise SkillRejected("SKILL.md is a link to a file outside its skill's folder")
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise SkillRejected(f"SKILL.md is {os.path.getsize(path):,} bytes, more than the {MAX_BYTES:,} Tusk reads")
        return parse(data, folder)

    def _tell(self, folder: Path, problem: str) -> None:
        """One log line when a folder's problem appears or changes (not on every turn)."""
        if problem and self.log and self._told.get(folder) != problem:
            logger.warning("skill folder %s skipped: %s", folder, problem)
        if problem:
            self._told[folder] = problem
        else:
            self._told.pop(folder, None)
