"""The skills' settings slice, and which chats get which skills (TUSK_SKILLS_CHATS, TUSK_SKILLS_GROUPS).

TUSK_SKILLS_CHATS is a comma-separated list of items, each a chat pattern as TUSK_WEB_CHATS takes them
(`*`, `channel:*`, `channel:chat_id`), or `skill=pattern` for one skill, or `skill=off`:

    *                                   every chat gets every skill (the default)
    telegram:*,slack:C0123              only these chats get skills
    *,oncall=slack:*                    every chat gets every skill, but oncall only Slack's chats
    *,house-rules=discord:42,tmux=off   house-rules only that Discord channel; tmux no chat

A skill named in a `skill=` item goes only to the chats of its items; every other skill goes to the
chats of the plain patterns. With TUSK_SKILLS_GROUPS=off, group chats get none (as TUSK_WEB_GROUPS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.events import ChatKey
from bot.skills.catalog import Root
from bot.skills.skill import valid_name
from bot.tools.mcp.config import CHAT_PATTERN

DEFAULT_MAX_TOKENS = 1000


def _matches(pattern: str, key: ChatKey) -> bool:
    channel, _, chat = pattern.partition(":")
    return pattern == "*" or (channel == key.channel and chat in ("*", key.chat_id))


@dataclass(frozen=True, slots=True)
class ChatRules:
    """TUSK_SKILLS_CHATS read: the plain patterns, and each named skill's own."""

    patterns: tuple[str, ...] = ("*",)
    named: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> ChatRules:
        plain: list[str] = []
        named: dict[str, list[str]] = {}
        for item in (i.strip() for i in text.split(",")):
            if not item:
                continue
            skill, eq, pattern = item.partition("=")
            if eq:
                skill, pattern = skill.strip(), pattern.strip()
                if not valid_name(skill):
                    raise ValueError(f"{skill!r} in {item!r} is not a skill name (lowercase letters, digits, hyphens)")
                named.setdefault(skill, [])
                if pattern != "off":
                    named[skill].append(_checked(pattern))
            else:
                plain.append(_checked(item))
        return cls(tuple(plain), {k: tuple(v) for k, v in named.items()})

    def gives(self, skill: str, key: ChatKey) -> bool:
        """Whether the chat `key` may get the skill named `skill`."""
        patterns = self.named.get(skill, self.patterns)
        return any(_matches(p, key) for p in patterns)

    def describe(self, skill: str) -> str:
        """The chats a skill goes to, in words, for listings."""
        patterns = self.named.get(skill, self.patterns)
        return ", ".join(patterns) if patterns else "no chat"


def _checked(pattern: str) -> str:
    if not CHAT_PATTERN.fullmatch(pattern):
        raise ValueError(f"chat pattern {pattern!r} is not *, channel:* or channel:chat_id")
    return pattern


@dataclass(frozen=True, slots=True)
class SkillSettings:
    roots: tuple[Root, ...]
    max_tokens: int = DEFAULT_MAX_TOKENS  # TUSK_SKILLS_MAX_TOKENS: the skills' part of the system prompt
    chats: ChatRules = field(default_factory=ChatRules)
    groups: bool = True  # TUSK_SKILLS_GROUPS
    read_max_chars: int = 16_000  # what one read_skill call returns at most (TUSK_TOOL_RESULT_MAX_CHARS)

    def gives(self, skill: str, key: ChatKey, is_group: bool) -> bool:
        return (self.groups or not is_group) and self.chats.gives(skill, key)


def skill_dirs(text: str) -> tuple[Path, ...]:
    """TUSK_SKILLS_DIRS: comma-separated folders."""
    return tuple(Path(p.strip()).expanduser() for p in text.split(",") if p.strip())
