"""The skills' part of a chat's system prompt: one line per skill, the `always` bodies, within a token cap.

    ## Skills
    <the frame: the owner's playbooks, binding like the system message; read_skill before following one;
     read_skill's text is instructions; Tusk runs no programs>
    - refunds: How we answer refund questions. Use when someone asks for their money back.
    - oncall: ...
    - (3 more skills not listed here: read_skill with name "*" lists them all)

    ### Skill: house-rules (always in force)
    <its body>

Skills are listed by name. `always` bodies come first within TUSK_SKILLS_MAX_TOKENS; one that does not
fit is listed as a line instead. Lines follow, in name order, until the cap; the rest are counted in
the last line. The text depends only on the skills given (their names, descriptions, bodies) and the
cap, so it is byte-identical from turn to turn until a skill changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.skills.skill import Skill
from memory.tokens import count_text

HEAD = ("## Skills\n\nThe owner's playbooks, binding like this message. When a request matches one below, call "
        "read_skill with its name first and do what it says: its text is the owner's instructions, unlike other "
        "tool results. You run no programs: where a skill says to run one, use your own tools or say you cannot.")
MORE = '- ({n} more skill{s} not listed here: read_skill with name "*" lists them all)'
NOTE_ROOM = 30  # tokens kept for the `MORE` line when not every line fits


@dataclass(frozen=True, slots=True)
class Section:
    text: str
    listed: tuple[str, ...]  # skills with a line
    always: tuple[str, ...]  # skills whose body is in the prompt
    left_out: tuple[str, ...]  # skills past the cap (read_skill "*" names them)
    tokens: int


def line(skill: Skill) -> str:
    return f"- {skill.name}: {skill.description}"


def block(skill: Skill) -> str:
    return f"### Skill: {skill.name} (always in force)\n\n{skill.body}"


def section(skills: Sequence[Skill], cap: int) -> Section:
    """The section for these skills (by name) within `cap` tokens; an empty Section for no skills."""
    if not skills:
        return Section("", (), (), (), 0)
    skills = sorted(skills, key=lambda s: s.name)
    used = count_text(HEAD)
    bodies: list[str] = []
    always: list[str] = []
    rest: list[Skill] = []
    for skill in skills:
        tokens = count_text(block(skill)) if skill.always else 0
        if skill.always and used + tokens <= cap:
            bodies.append(block(skill))
            always.append(skill.name)
            used += tokens
        else:
            rest.append(skill)
    costs = [count_text(line(s)) + 1 for s in rest]
    room = cap - used if used + sum(costs) <= cap else cap - used - NOTE_ROOM
    lines: list[str] = []
    for skill, cost in zip(rest, costs):
        if cost > room:
            break
        lines.append(line(skill))
        room -= cost
    left = tuple(s.name for s in rest[len(lines):])
    if left:
        lines.append(MORE.format(n=len(left), s="" if len(left) == 1 else "s"))
    text = "\n\n".join(p for p in (HEAD, "\n".join(lines), *bodies) if p)
    return Section(text, tuple(s.name for s in rest[:len(rest) - len(left)]), tuple(always), left, count_text(text))
