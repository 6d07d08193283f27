"""The consolidation request sent: bot/consolidation.py's `complete`, through the LLM boundary.

    ConsolidationCall(llm, model)(messages, tools, max_tokens)
        -> the `save_memory` arguments (forced where tools are offered), else the reply's text, or None
        LLMError  goes up as itself: the runner counts it a failed round (the profile already learned what
                  the server taught: bot/llm/client.py)
        Preempted -> Deferred (a reply went first: the same chunk goes again later)

Nothing else is caught: a bug raises as itself, never becomes a `[raw]` history entry.
"""

from __future__ import annotations

from typing import Any

from bot.llm import LLM
from bot.llm.slots import Preempted
from bot.usage import meter as usage
from memory.consolidate import Deferred


class ConsolidationCall:
    def __init__(self, llm: LLM, model: str | None = None) -> None:
        """`model`: TUSK_CONSOLIDATION_MODEL, else None (the chat model)."""
        self.llm, self.model = llm, model

    def takes_tools(self) -> bool:
        """Whether the round offers save_memory (else it asks for the plain-text form)."""
        return self.llm.profile.takes_tools(self.model or self.llm.settings.model)

    async def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                       max_tokens: int) -> dict[str, Any] | str | None:
        """One consolidation request, forcing save_memory when tools are offered: its arguments, else the
        reply's text (a model without tools answers in the text form), or None. At temperature 0: a summary
        and a memory, not a creative reply (a local server sampling within its tool grammar scattered the
        answer over the fields); litellm drops it for a model that takes none."""
        forced: dict[str, Any] | None = ({"type": "function", "function": {"name": tools[0]["function"]["name"]}}
                                         if tools else None)
        try:
            purpose = "import" if usage.current().purpose == "import" else "consolidation"
            with usage.scope(person=None, purpose=purpose):  # the chat's, as housekeeping: no person
                reply = await self.llm.complete(messages, tools or None, tool_choice=forced, temperature=0,
                                                model=self.model, max_tokens=max_tokens)
        except Preempted as exc:  # a reply went first: the round is sent again later (bot/consolidation.py)
            raise Deferred(str(exc)) from exc
        if forced is not None:
            called = next((c for c in reply.tool_calls if c.name == forced["function"]["name"]), None)
            if called is not None:  # arguments it could not read: the raw text, for the lenient parse's reason
                return called.arguments if called.error is None else called.error
        return reply.content
