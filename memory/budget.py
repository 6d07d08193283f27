"""A chat's token budget: how much of the model's window a prompt may use.

    budget = window - reply reserve       reserve = min(max reply tokens, window / 4)
    trigger: prompt estimate > budget     target: prompt estimate <= budget / 2

Made from the model's window (bot/llm/profile.py keeps it and hands out the current one); read by
consolidation (memory/consolidate.py) and by each turn (bot/fitting.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Budget:
    window: int
    reserve: int
    source: str = ""  # where the window figure came from (shown by /status and doctor)

    @classmethod
    def for_window(cls, window: int, max_reply_tokens: int | None = None, source: str = "") -> Budget:
        quarter = window // 4
        return cls(window, min(max_reply_tokens, quarter) if max_reply_tokens else quarter, source)

    @property
    def limit(self) -> int:
        return self.window - self.reserve

    @property
    def target(self) -> int:
        return self.limit // 2
