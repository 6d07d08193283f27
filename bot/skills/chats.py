"""Skills in a chat's turn: a `ChatToolSource` (bot/tools/box.py) in front of the web tools and MCP servers.

A chat that has skills (the catalog's offered ones that TUSK_SKILLS_CHATS and TUSK_SKILLS_GROUPS give it)
gets the skills section in its system prompt (prompt.py) and the `read_skill` tool; a chat with none gets
exactly the prompt and tools of a Tusk without skills, so a home without skills pays nothing. The catalog
is looked at on every prompt build (catalog.py: a listing and a stat per skill), so a skill added, changed
or removed is in the next turn; the section is rebuilt only when the skills the chat has change.

No tool writes skills: read_skill only reads, and `remember` and consolidation write a chat's own files.
"""

from __future__ import annotations

import asyncio
import json
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
from bot.tools.box import ToolBox, ToolContext, Toolset
from memory.tokens import count_text

KNOWN_CHATS = 10_000  # chats whose direct/group kind is remembered (unknown: treated as a group)
SECTIONS = 64  # distinct skill sets whose prompt section is kept
WINDOW_SHARE = 16  # the section gets at most 1/16 of the model's window (TUSK_SKILLS_MAX_TOKENS below that)
MIN_CAP = 200  # a window whose share is smaller (under 3,200 tokens: a small local model) gets no skills

SkillName = Annotated[str, Field(description='A skill\'s name; "*" lists them all.')]
SkillFile = Annotated[str, Field(
    description="Empty for the skill itself, else a file in its folder (references/x.md).")]
MAX_ARG = 300  # characters of a name or path: anything longer is refused (checked here, not in the schema)


class SkillTools:
    def __init__(self, settings: SkillSettings, catalog: Catalog, inner: Any = None,
                 window: Callable[[], int] | None = None, tools_available: Callable[[], bool] = lambda: True) -> None:
        """`inner`: the next ChatToolSource (the web tools, the MCP hub) or None; `window`: the tokens the model's
        window holds now (the skills take a share of it); `tools_available()`: False once the model refused
        tools (no read_skill, so no skills)."""
        self.window = window
        self.tools_available = tools_available
        self.settings = settings
        self.catalog = catalog
        self.inner = inner
        self._boxes: dict[int, ToolBox] = {}
        self._groups: OrderedDict[ChatKey, bool] = OrderedDict()
        self._sections: OrderedDict[tuple[object, ...], Section] = OrderedDict()
        self.schemas = ToolBox([self.read_skill]).schemas
        self._tokens = count_text(json.dumps(self.schemas))

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

    def _remember(self, msg: InboundMessage) -> None:
        if msg.injected is None:
            self._groups[msg.key] = msg.is_group
            self._groups.move_to_end(msg.key)
            if len(self._groups) > KNOWN_CHATS:
                self._groups.popitem(last=False)

    def _chat(self, key: ChatKey) -> tuple[ChatKey, bool]:
        return key, self._groups.get(key, True)

    # the ChatToolSource contract (bot/tools/box.py) and what bot/context.py asks of it

    def for_chat(self, box: ToolBox, msg: InboundMessage) -> Toolset:
        self._remember(msg)
        chosen = box
        if self.entries(msg.key, msg.is_group):
            chosen = self._boxes.get(id(box)) or self._boxes.setdefault(
                id(box), ToolBox([*(t.fn for t in box.tools.values()), self.read_skill]))
        return self.inner.for_chat(chosen, msg) if self.inner is not None else chosen

    def status_lines(self, msg: InboundMessage) -> list[str]:
        lines = self.inner.status_lines(msg) if self.inner is not None else []
        part = self.section(msg.key, msg.is_group)
        if part.text:
            shown = len(part.listed) + len(part.always)
            left = f", {len(part.left_out)} past TUSK_SKILLS_MAX_TOKENS" if part.left_out else ""
            lines = [f"Skills for this chat: {shown + len(part.left_out)} (~{part.tokens:,} tokens of prompt, "
                     f"read_skill ~{self._tokens:,}{left}; /skills lists them)", *lines]
        return lines

    def prompt_note(self, key: ChatKey) -> str:
        inner = self.inner.prompt_note(key) if self.inner is not None else ""
        return "\n\n".join(n for n in (self.section(*self._chat(key)).text, inner) if n)

    def schema_tokens(self, key: ChatKey) -> int:
        inner = self.inner.schema_tokens(key) if self.inner is not None else 0
        return inner + (self._tokens if self.section(*self._chat(key)).text else 0)

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
