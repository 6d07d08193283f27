"""The skills as people see them: `tusk skills list`, `tusk doctor`'s checks, the console's JSON, `/skills`.

Each shows every skill folder found with its source and whether it is offered, and why not when it is
not: skipped (bad input: the reason skill.py gave), shadowed (an earlier root holds the name), or what
it needs that Tusk cannot give (metadata.py). These read the same `Catalog` the turns use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.commands.base import Command, CommandContext
from bot.ops.check import Check
from bot.skills.catalog import Catalog, Entry, Snapshot
from bot.skills.config import SkillSettings
from bot.skills.prompt import line, section
from bot.skills.skill import Skill
from memory.tokens import count_text

if TYPE_CHECKING:
    from bot.skills.chats import SkillTools

DOCS = "the docs' Skills page"


def _prompt_tokens(snap: Snapshot, settings: SkillSettings) -> tuple[int, int]:
    """(tokens of the skills section for a chat that has every offered skill, how many are past the cap)."""
    part = section(snap.offered, settings.max_tokens)
    return part.tokens, len(part.left_out)


def listing(settings: SkillSettings, catalog: Catalog) -> str:
    """`tusk skills list`: every skill folder, its source, offered or not and why, its chats."""
    snap = catalog.snapshot()
    roots = ", ".join(f"{r.label}" + ("" if r.path.is_dir() else " (absent)") for r in settings.roots)
    if not snap.entries:
        return (f"No skills. Looked in: {roots}.\nAdd one as a folder with a SKILL.md (name and description in "
                f"its frontmatter) in {settings.roots[0].path}; see {DOCS}.")
    offered = [e for e in snap.entries if e.offered]
    tokens, past = _prompt_tokens(snap, settings)
    out = [f"{len(offered)} skill(s) offered, {len(snap.entries) - len(offered)} not. Looked in: {roots}.",
           f"A chat that has them all: ~{tokens:,} tokens of system prompt (TUSK_SKILLS_MAX_TOKENS="
           f"{settings.max_tokens:,}"
           + (f"; {past} past it, listed by the model with read_skill \"*\")" if past else ")"),
           ""]
    for e in snap.entries:
        state = (f"offered to {settings.chats.describe(e.name)}" + ("" if settings.groups else " (not groups)")
                 if e.offered else f"NOT OFFERED: {e.why_not}")
        always = " (always in force)" if e.skill is not None and e.skill.always and e.offered else ""
        out.append(f"{e.name}  [{e.root.label}]  {state}{always}")
        if e.skill is not None:
            out.append(f"    {e.skill.description}")
            out += _fields(e.skill)
        out.append(f"    {e.folder}")
    return "\n".join(out)


def _fields(skill: Skill) -> list[str]:
    """The optional fields a listing shows (Tusk acts on none of them)."""
    fields = [("license", skill.license), ("compatibility", skill.compatibility),
              ("allowed-tools", " ".join(skill.allowed_tools) + " (not enforced)" if skill.allowed_tools else "")]
    return [f"    {name}: {value}" for name, value in fields if value]


def checks(settings: SkillSettings, catalog: Catalog) -> list[Check]:
    """`tusk doctor`: one line for the skills, a warning for each folder skipped or not offered, each
    TUSK_SKILLS_DIRS folder that is missing, and skills past the prompt's cap."""
    out = [Check("skills", "warn", f"TUSK_SKILLS_DIRS names {r.path}, which is not a folder",
                 "create it or take it out of TUSK_SKILLS_DIRS")
           for r in settings.roots if r.source == "TUSK_SKILLS_DIRS" and not r.path.is_dir()]
    snap = catalog.snapshot()
    if not snap.entries:
        return out
    offered = [e for e in snap.entries if e.offered]
    tokens, past = _prompt_tokens(snap, settings)
    out.insert(0, Check("skills", "ok", f"{len(offered)} offered (~{tokens:,} tokens of prompt for a chat that has "
                        f"them all), {len(snap.entries) - len(offered)} not (`tusk skills list` says why)"))
    for e in snap.entries:
        if e.skill is None:
            out.append(Check(f"skill {e.name}", "warn", f"{e.folder} skipped: {e.problem}",
                             f"fix its SKILL.md (the format: {DOCS})"))
        elif e.shadowed_by is None and not e.skill.offerable:
            out.append(Check(f"skill {e.name}", "warn", f"not offered: {e.why_not}",
                             f"nothing breaks; remove {e.folder} to drop this warning"))
    if past:
        out.append(Check("skills", "warn", f"{past} offered skill(s) past TUSK_SKILLS_MAX_TOKENS="
                         f"{settings.max_tokens:,}: the prompt counts them and the model lists them with read_skill",
                         "raise TUSK_SKILLS_MAX_TOKENS, or shorten the descriptions"))
    return out


def as_json(settings: SkillSettings, catalog: Catalog) -> dict[str, Any]:
    """GET /api/skills: what `tusk skills list` shows, for the console."""
    snap = catalog.snapshot()
    tokens, past = _prompt_tokens(snap, settings)

    def one(e: Entry) -> dict[str, Any]:
        s = e.skill
        return {"name": e.name, "source": e.root.label, "folder": str(e.folder), "offered": e.offered,
                "why_not": e.why_not, "description": s.description if s else "", "always": bool(s and s.always),
                "chats": settings.chats.describe(e.name) if e.offered else "", "groups": settings.groups,
                "tokens": count_text(line(s)) if s else 0}

    return {"skills": [one(e) for e in snap.entries], "roots": [r.label for r in settings.roots],
            "max_tokens": settings.max_tokens, "prompt_tokens": tokens, "past_cap": past}


def skills_command(tools: SkillTools) -> Command:
    """/skills: the skills this chat has (what the model sees listed)."""

    async def run(ctx: CommandContext, args: str) -> str:
        entries = tools.entries(ctx.key, ctx.is_group)
        if not tools.cap() and tools.catalog.snapshot().offered:
            if not tools.tools_available():
                return "No skills with this model: it takes no tools, so it could not read one."
            return (f"No skills with this model: its window ({tools.window() if tools.window else 0:,} tokens) is "
                    "too small to list them beside the conversation (skills need a window of 3,200 tokens or more).")
        if not entries:
            return ("This chat has no skills. The owner adds them as folders with a SKILL.md in the data dir's "
                    "skills/ folder (`tusk skills list` shows every one, and why any is not offered).")
        part = tools.section(ctx.key, ctx.is_group)
        lines = [f"Skills of this chat ({len(entries)}, ~{part.tokens:,} tokens of its prompt): the owner's "
                 "playbooks, which I read when a question calls for one."]
        for e in entries:
            assert e.skill is not None
            lines.append(f"- {e.name}{' (always in force)' if e.name in part.always else ''}: {e.skill.description}")
        if part.left_out:
            lines.append(f"({len(part.left_out)} of them are past the prompt's cap: I see only their number, and "
                         "list them when I need to.)")
        return "\n".join(lines)

    return Command("skills", "the owner's playbooks this chat has", run)
