"""A chat's own daily limits: the `budgets.json` shared document (store/shared.py: `$TUSK_HOME/budgets.json`,
0600, written atomically, or a row of the database), written by `tusk budget` and the console; a running Tusk
reads it again when it changes (bot/usage/limits.py).

    {"version": 1, "chats": [{"channel": "telegram", "chat": "-100123", "daily_usd": 2.0},
                             {"channel": "terminal", "chat": "local", "daily_tokens": 20000}]}

An entry holds `daily_usd` (USD a day), `daily_tokens` (tokens a day of the calls whose price is unknown,
which no USD limit can count), or both; each replaces its default (TUSK_CHAT_LIMIT_DAILY_USD,
TUSK_CHAT_LIMIT_DAILY_TOKENS) for that chat.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bot.events import ChatKey

FILE = "budgets.json"
SHAPE = ('{"version": 1, "chats": [{"channel": ..., "chat": ..., "daily_usd": ... and/or "daily_tokens": ...}]}')


@dataclass(frozen=True, slots=True)
class ChatBudget:
    """One chat's own limits (None: the default applies)."""

    daily_usd: float | None = None
    daily_tokens: int | None = None


def _entry(raw: dict) -> tuple[ChatKey, ChatBudget]:
    usd, tokens = raw.get("daily_usd"), raw.get("daily_tokens")
    if usd is None and tokens is None:
        raise ValueError("an entry without daily_usd or daily_tokens")
    budget = ChatBudget(None if usd is None else float(usd), None if tokens is None else int(tokens))
    if (budget.daily_usd is not None and not budget.daily_usd >= 0) or (budget.daily_tokens or 0) < 0:
        raise ValueError("a negative limit")
    return ChatKey(str(raw["channel"]), str(raw["chat"])), budget


def parse(text: str | None, where: str) -> dict[ChatKey, ChatBudget]:
    """budgets.json's chats ({} when there is none); ValueError names what is wrong and how to fix it."""
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not JSON ({exc}): fix it or remove it (`tusk budget` writes it)") from exc
    try:
        return dict(_entry(raw) for raw in data["chats"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{where}: expected {SHAPE} ({exc!r})") from exc


def dump(budgets: dict[ChatKey, ChatBudget]) -> str:
    chats = []
    for key, budget in sorted(budgets.items(), key=lambda kv: (kv[0].channel, kv[0].chat_id)):
        entry: dict = {"channel": key.channel, "chat": key.chat_id}
        if budget.daily_usd is not None:
            entry["daily_usd"] = budget.daily_usd
        if budget.daily_tokens is not None:
            entry["daily_tokens"] = budget.daily_tokens
        chats.append(entry)
    return json.dumps({"version": 1, "chats": chats}, indent=1) + "\n"
