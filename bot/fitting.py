"""The turn's budget: how much of the model's window a turn's prompt may use, and the history that fits.

    model(chat, msg)        the turn's model: an API client's pick for this request, else the chat's (/model)
    budget(model)           that model's budget (its window, less the reply's reserve; bot/llm/profile.py)
    fixed / room            the prompt but its history (system prompt, tools, the new message) / what is left
    history(...)            the chat's history, consolidated first if the prompt would be over budget (one
                            round at most), then cut to fit (oldest whole turns left out): an over-budget
                            prompt is never sent; a message that cannot fit at all is `MessageTooLong`
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from bot.context import ContextBuilder
from bot.events import InboundMessage
from bot.llm.choice import ModelChoices
from bot.llm.profile import ModelProfile
from bot.media import Attached
from bot.replies import MessageTooLong
from memory.consolidate import Budget, pick_cut
from memory.session import Message
from memory.tokens import count_text
from store.base import Chat

if TYPE_CHECKING:
    from bot.consolidation import Consolidator

RUNTIME_BLOCK_TOKENS = 40  # the runtime-context line added to the user message


class PromptFit:
    def __init__(self, context: ContextBuilder, models: ModelChoices, consolidator: Consolidator | None,
                 profile: ModelProfile) -> None:
        self.context, self.models, self.consolidator, self.profile = context, models, consolidator, profile

    def model(self, chat: Chat, msg: InboundMessage) -> str:
        """The model of this turn: an API client's pick for this request, else the chat's (/model)."""
        if msg.client is not None and msg.client.model:
            return msg.client.model
        return self.models.for_chat(chat.prefs)

    def budget(self, model: str) -> Budget:
        """The budget of a turn on `model` (a chat's /model pick has its own window), as the profile has it now."""
        return self.profile.budget_for(model)

    def room(self, chat: Chat, msg: InboundMessage, attached: Attached | None = None) -> int:
        """Tokens left in the budget for history and tool steps, once the rest of the prompt is in."""
        if self.consolidator is None:
            return sys.maxsize
        return self.budget(self.model(chat, msg)).limit - self.fixed(chat, msg, attached)

    def fixed(self, chat: Chat, msg: InboundMessage, attached: Attached | None = None) -> int:
        """Tokens of the prompt but its history: system prompt, tools, the new message and its context line."""
        pending = count_text(msg.injected.text if msg.injected else msg.text) + RUNTIME_BLOCK_TOKENS
        pending += attached.image_tokens if attached else 0
        return self.context.fixed_tokens(chat) + pending

    async def history(self, chat: Chat, msg: InboundMessage, attached: Attached | None = None) -> list[Message]:
        """The history to send: consolidated first if the prompt would be over budget, and cut to fit
        if it still is (oldest whole turns left out), so an over-budget prompt is never sent."""
        c, session = self.consolidator, chat.session
        if c is None:
            return session.unconsolidated

        def fixed() -> int:
            return self.fixed(chat, msg, attached)

        if c.over_budget(chat, fixed()) and not c.lock(chat.key).locked():
            # one round at most, and none while a background round runs (a one-slot server would queue the
            # reply behind both): what does not fit is left out of this request, not waited for
            await c.run(chat, fixed, rounds=1)
        history, room = session.unconsolidated, self.room(chat, msg, attached)
        if room < 0:
            window = self.budget(self.model(chat, msg)).window
            raise MessageTooLong(f"That message does not fit in the model's window ({window:,} tokens). "
                                 "Send it in parts.")
        while (excess := sum(m.tokens for m in history) - room) > 0:
            cut = pick_cut(history, excess)
            history = history[cut:] if cut else []
        return history
