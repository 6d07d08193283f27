"""Which model a chat talks to: TUSK_MODEL, or the TUSK_MODELS label it picked with /model.

The label is kept in the chat's settings.json (memory/chat_settings.py), so the owner can point a
label at another model without touching any chat; a label no longer listed falls back to TUSK_MODEL.
"""

from __future__ import annotations

from collections.abc import Mapping

from memory.chat_settings import ChatSettings


class ModelChoices:
    def __init__(self, default: str, choices: Mapping[str, str]) -> None:
        self.default = default
        self.choices = dict(choices)  # label -> litellm model string

    def label_for(self, prefs: ChatSettings) -> str | None:
        """The chat's picked label (its settings' `model`), if it is still on the list."""
        return prefs.model if prefs.model in self.choices else None

    def for_chat(self, prefs: ChatSettings) -> str:
        """The litellm model string this chat's requests go to."""
        label = self.label_for(prefs)
        return self.choices[label] if label is not None else self.default
