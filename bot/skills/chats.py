"""Skills in a chat's turn: a layer of chat tools (bot/tools/layer.py) in front of the web tools and MCP servers.

A chat that has skills (the catalog's offered ones that TUSK_SKILLS_CHATS and TUSK_SKILLS_GROUPS give it)
gets the skills section in its system prompt (prompt.py) and the `read_skill` tool; a chat with none gets
exactly the prompt and tools of a Tusk without skills, so a home without skills pays nothing. The catalog
is looked at on every prompt build (catalog.py: a listing and a stat per skill), so a skill added, changed
or removed is in the next turn; the section is rebuilt only when the skills the chat has change.

No tool writes skills: read_skill only reads, and `remember` and consolidation write a chat's own files.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from bot.errors import SkillRefused
from bot.events import ChatKey, InboundMessage
from bot.skills import read
from bot.skills.catalog import Catalog, Entry, Snapshot
from bot.skills.config import SkillSettings
from bot.skills.prompt import Section, section
from bot.tools.box import ToolContext
from bot.tools.layer import ChatToolLayer

SECTIONS = 64  # distinct skill sets whose prompt section is kept
WINDOW_SHARE = 16  # the section gets at most 1/16 of the model's window (TUSK_SKILLS_MAX_TOKENS below that)
MIN_CAP = 200  # a window whose share is smaller (under 3,200 tokens: a small local model) gets no skills

SkillName = Annotated[str, Field(description='A skill\'s name; "*" lists them all.')]
SkillFile = Annotated[str, Field(
    description="Empty for the skill itself, else a file in its folder (references/x.md).")]
MAX_ARG = 300  # characters of a name or path: anything longer is refused (checked here, not in the schema)


class SkillTools(ChatToolLayer):
    def __init__(self, settings: SkillSettings, catalog: Catalog, inner: Any = None,
                 window: Callable[[], int] | None = None, tools_available: Callable[[], bool] = lambda: True) -> None:
        """`inner`: the next ChatToolSource (the web tools, the MCP hub) or None; `window`: the tokens the model's
        window holds now (the skills take a share of it); `tools_available()`: False once the model refused
        tools (no read_skill, so no skills)."""
        super().__init__([self.read_skill], inner)
        self.window = window
        self.tools_available = tools_available
        self.settings = settings
        self.catalog = catalog
        self._sections: OrderedDict[tuple[object, ...], Section] = OrderedDict()

    # which skills a chat has

    def cap(self) -> int:
        """Tokens the section may take: TUSK_SKILLS_MAX_TOKENS, within its share of the model's window (0: the
        window is too small for skills, or the model takes no tools and so could not read one)."""
        if not self.tools_available():
            return 0
        share = self.window() // WINDOW_SHARE if self.window is not None else self.settings.max_tokens
        cap = min(self.settings.max_tokens, share)
        return cap if cap >= MIN_CAP else 0

    def _given(self, snap: Snapshot, key: ChatKey, is_group: bool) -> list[Entry]:
        return [e for e in snap.entries if e.offered and self.settings.gives(e.name, key, is_group)]

    def entries(self, key: ChatKey, is_group: bool) -> list[Entry]:
        """The offered skills this chat gets, by name (none while the model's window is too small)."""
        return self._given(self.catalog.snapshot(), key, is_group) if self.cap() else []

    def section(self, key: ChatKey, is_group: bool) -> Section:
        """The chat's part of the system prompt (kept per set of skills and cap: built once per change)."""
        snap, cap = self.catalog.snapshot(), self.cap()
        names = tuple(e.name for e in self._given(snap, key, is_group)) if cap else ()
        cache_key = (snap.version, names, cap)
        cached = self._sections.get(cache_key)
        if cached is None:
            cached = section([s for s in snap.offered if s.name in names], cap)
            self._sections[cache_key] = cached
            if len(self._sections) > SECTIONS:
                self._sections.popitem(last=False)
        self._sections.move_to_end(cache_key)
        return cached

    # the layer (bot/tools/layer.py): read_skill, the section and a /status line where the chat has skills

    def serves(self, key: ChatKey, is_group: bool) -> bool:
        return bool(self.entries(key, is_group))

    def note(self, key: ChatKey, is_group: bool) -> str:
        return self.section(key, is_group).text

    def lines(self, msg: InboundMessage) -> list[str]:
        part = self.section(msg.key, msg.is_group)
        if not part.text:
            return []
        shown = len(part.listed) + len(part.always)
        left = f", {len(part.left_out)} past TUSK_SKILLS_MAX_TOKENS" if part.left_out else ""
        return [f"Skills for this chat: {shown + len(part.left_out)} (~{part.tokens:,} tokens of prompt, "
                f"read_skill ~{self._tokens:,}{left}; /skills lists them)"]

    # the tool

    async def read_skill(self, ctx: ToolContext, name: SkillName, file: SkillFile = "") -> str:
        """Read a skill listed under Skills (the owner's instructions), or a file in its folder."""
        if len(name) > MAX_ARG or len(file) > MAX_ARG:
            raise SkillRefused(f"a name or path of more than {MAX_ARG} characters: no skill has one")
        entries = self.entries(ctx.key, ctx.is_group)
        limit = self.settings.read_max_chars
        if name.strip() == "*":
            return read.listing(entries, limit)
        entry = next((e for e in entries if e.name == name.strip()), None)
        if entry is None:
            have = ", ".join(e.name for e in entries[:30]) or "none"
            raise SkillRefused(f"this chat has no skill named {name!r} (its skills: {have})")
        return await asyncio.to_thread(read.file_text, entry, file, limit)
