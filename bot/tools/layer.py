"""A layer of tools only some chats get, in front of the next one: the `ChatToolSource` (bot/tools/box.py)
that skills (bot/skills/chats.py) and the web tools (bot/tools/web/chats.py) each are.

    ToolBox(built-in tools, extra=skills) -> web tools -> MCP hub (bot/tools/mcp/hub.py)

A layer adds its own tools to the turns of the chats it `serves` (the box with them is made once per box it
is handed), puts its `note` in their system prompt and its tools' schemas in their fixed prompt's count, and
says its `lines` in their /status; then the next layer (`inner`, or None) does the same, its lines and
note after this one's. A chat it does not serve gets exactly what the next layer gives it.

Whom a layer serves may depend on whether a chat is a group; a prompt is built knowing only the chat's key,
so a layer remembers the kind of the last `KNOWN_CHATS` chats from the messages people sent (a chat not
seen since the start counts as a group: the cautious answer).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from bot.events import ChatKey, InboundMessage
from bot.tools.box import ToolBox, ToolFn, Toolset
from memory.tokens import count_text

KNOWN_CHATS = 10_000  # chats whose direct/group kind is remembered (unknown: treated as a group)


class ChatToolLayer:
    def __init__(self, fns: Sequence[ToolFn], inner: Any = None) -> None:
        """`fns`: the tools this layer adds (bound methods); `inner`: the next ChatToolSource (for_chat,
        status_lines, prompt_note, schema_tokens) or None."""
        self.fns = list(fns)
        self.inner = inner
        self.schemas = ToolBox(self.fns).schemas
        self._tokens = count_text(json.dumps(self.schemas)) if self.fns else 0
        self._boxes: dict[int, ToolBox] = {}
        self._groups: OrderedDict[ChatKey, bool] = OrderedDict()

    # what each layer says of itself

    def serves(self, key: ChatKey, is_group: bool) -> bool:
        """Whether the chat's turns get this layer's tools now."""
        raise NotImplementedError

    def note(self, key: ChatKey, is_group: bool) -> str:
        """This layer's part of the chat's system prompt ("" for none: then its schemas are not counted)."""
        raise NotImplementedError

    def lines(self, msg: InboundMessage) -> list[str]:
        """This layer's lines in the chat's /status."""
        raise NotImplementedError

    # the ChatToolSource contract (bot/tools/box.py) and what bot/context.py asks of it

    def is_group(self, key: ChatKey) -> bool:
        """The chat's kind as last seen in a message people sent (unknown: a group)."""
        return self._groups.get(key, True)

    def for_chat(self, box: ToolBox, msg: InboundMessage) -> Toolset:
        self._remember(msg)
        chosen = self._with_mine(box) if self.serves(msg.key, msg.is_group) else box
        return self.inner.for_chat(chosen, msg) if self.inner is not None else chosen

    def status_lines(self, msg: InboundMessage) -> list[str]:
        inner = self.inner.status_lines(msg) if self.inner is not None else []
        return [*self.lines(msg), *inner]

    def prompt_note(self, key: ChatKey) -> str:
        inner = self.inner.prompt_note(key) if self.inner is not None else ""
        return "\n\n".join(n for n in (self.note(key, self.is_group(key)), inner) if n)

    def schema_tokens(self, key: ChatKey) -> int:
        inner = self.inner.schema_tokens(key) if self.inner is not None else 0
        return inner + (self._tokens if self.note(key, self.is_group(key)) else 0)

    def _remember(self, msg: InboundMessage) -> None:
        if msg.injected is None:  # a turn Tusk starts itself does not say
            self._groups[msg.key] = msg.is_group
            self._groups.move_to_end(msg.key)
            if len(self._groups) > KNOWN_CHATS:
                self._groups.popitem(last=False)

    def _with_mine(self, box: ToolBox) -> ToolBox:
        mine = self._boxes.get(id(box))
        if mine is None:
            mine = self._boxes[id(box)] = ToolBox([*(t.fn for t in box.tools.values()), *self.fns])
        return mine
