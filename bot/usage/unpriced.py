"""Dollar limits that cannot count a model: without a known price a call is recorded without a cost
(bot/usage/prices.py), so no USD limit sees it. Said where a USD limit is set (`tusk budget set`, the
console's chat budget), in /status, on the console's Usage page and by `tusk doctor`, with what can be
enforced instead: a price in TUSK_MODELS, or a token limit (which counts exactly those calls).

    ModelsInUse   the models Tusk's calls go to: TUSK_MODEL, TUSK_CONSOLIDATION_MODEL, TUSK_FALLBACK_MODELS
                  and the TUSK_MODELS a chat may pick; `for_chat`: the ones one chat's calls go to
    PriceCheck    which of them have no known price: priced by TUSK_MODELS, by litellm's table (where
                  litellm may be loaded) or by the provider (a call of the last 30 days the ledger holds
                  with a cost); unpriced when none of these knows it (without litellm's table: only when
                  the ledger holds calls of it, all without a cost; else it cannot be told)
    chat_note     the sentence for one chat whose USD limit cannot count its model, with the fix
    Unpriced      both, bound to one Tusk's settings, ledger and limits: `for_chat` (/status, the console's
                  chat budget, `tusk budget set`) and `overall` (the console's Usage page, `tusk doctor`)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.errors import ConfigError
from bot.events import ChatKey
from bot.usage.ledger_sql import SqlLedger
from bot.usage.limits import Limits
from bot.usage.prices import ModelPrice, configured_prices, table_cost
from memory.chat_settings import ChatSettings

EVIDENCE_DAYS = 30
TOKEN_EXAMPLE = 20_000


@dataclass(frozen=True, slots=True)
class ModelsInUse:
    default: str | None  # TUSK_MODEL
    consolidation: str | None = None
    fallbacks: tuple[str, ...] = ()
    choices: dict[str, str] = field(default_factory=dict)  # TUSK_MODELS: label -> model

    @classmethod
    def of(cls, settings: Any) -> ModelsInUse:
        """From the Settings (a TUSK_MODELS that does not parse counts as empty: the config check names it)."""
        try:
            choices = {c.label: c.model for c in settings.model_choices().values()}
        except ConfigError:  # reported where the settings are checked
            choices = {}
        return cls(settings.model, settings.consolidation_model, tuple(settings.fallback_models), choices)

    def every(self) -> list[str]:
        """Every model a call may go to, each once."""
        return list(dict.fromkeys(m for m in (self.default, self.consolidation, *self.fallbacks,
                                              *self.choices.values()) if m))

    def for_chat(self, label: str | None) -> list[str]:
        """The models one chat's calls go to: its pick (`label`, else TUSK_MODEL), consolidation's, the fallbacks."""
        chosen = self.choices.get(label or "") or self.default
        return list(dict.fromkeys(m for m in (chosen, self.consolidation or self.default, *self.fallbacks) if m))


class PriceCheck:
    """Which models have no known price. `table`: ask litellm's price table (it imports litellm)."""

    def __init__(self, configured: Mapping[str, ModelPrice], ledger: SqlLedger | None = None, table: bool = True,
                 now: float | None = None) -> None:
        self.configured, self.table, self.ledger = configured, table, ledger
        self.since = (time.time() if now is None else now) - EVIDENCE_DAYS * 86400
        self._known: dict[str, bool | None] = {}

    @classmethod
    def of(cls, settings: Any, ledger: SqlLedger | None = None, table: bool = True) -> PriceCheck:
        try:
            configured = configured_prices(settings.model_choices())
        except ConfigError:  # reported where the settings are checked
            configured = {}
        return cls(configured, ledger, table)

    def _seen(self, model: str) -> tuple[int, int]:
        """(calls with a cost, calls without) of the model in the ledger's last days; (0, 0) without a ledger."""
        if self.ledger is None or not self.ledger.exists():
            return 0, 0
        return self.ledger.model_calls(model, self.since)

    def known(self, model: str) -> bool | None:
        """True: priced; False: its calls have no known price; None: cannot be told (no table, no calls)."""
        if model not in self._known:
            self._known[model] = self._judge(model)
        return self._known[model]

    def _judge(self, model: str) -> bool | None:
        if model in self.configured or (self.table and table_cost(model, 1000, 1000, 0) is not None):
            return True
        priced, unpriced = self._seen(model)  # a provider's own figure (OpenRouter) prices what no table does
        if priced:
            return True
        return False if self.table or unpriced else None

    def unpriced(self, models: Iterable[str]) -> list[str]:
        return [m for m in models if self.known(m) is False]


def _names(models: Sequence[str]) -> str:
    return models[0] if len(models) == 1 else ", ".join(models[:-1]) + " and " + models[-1]


def price_fix(models: Sequence[str]) -> str:
    """How to price them: a TUSK_MODELS entry each."""
    entries = ",".join(f"{_label(m)}={m}@IN/OUT" for m in models)
    return f"give {'it' if len(models) == 1 else 'them'} a price in TUSK_MODELS ({entries}, USD per million " \
           "input/output tokens)"


def _label(model: str) -> str:
    tail = model.rsplit("/", 1)[-1]
    return "".join(c if c.isalnum() or c in "_-" else "-" for c in tail)[:32] or "model"


def chat_note(unpriced: Sequence[str], chat: ChatKey, token_limit: int | None, owner: bool = True) -> str | None:
    """One chat's USD limit that cannot count its models' calls, and what can be enforced instead (None when
    every model is priced). `token_limit`: the token limit those calls count against (the chat's or everyone's).
    `owner`: the sentence is for the owner (the commands to run) or for the chat (who can fix it)."""
    if not unpriced:
        return None
    have = "has" if len(unpriced) == 1 else "have"
    its = "its" if len(unpriced) == 1 else "their"
    said = f"{_names(unpriced)} {have} no known price, so a dollar limit cannot count {its} calls"
    if token_limit is not None:
        return f"{said}; they count against a daily limit of {token_limit:,} tokens instead."
    if not owner:
        return f"{said}: the owner can give {'it' if len(unpriced) == 1 else 'them'} a price or set a token limit."
    return (f"{said}: {price_fix(unpriced)}, or set a token limit "
            f"(tusk budget set {chat.channel}:{chat.chat_id} --tokens {TOKEN_EXAMPLE}).")


def tokens_fix(chat: ChatKey | None = None) -> str:
    where = f"tusk budget set {chat.channel}:{chat.chat_id} --tokens {TOKEN_EXAMPLE}" if chat else \
        "TUSK_LIMIT_DAILY_TOKENS, TUSK_CHAT_LIMIT_DAILY_TOKENS or tusk budget set CHANNEL:ID --tokens N"
    return f"set a token limit ({where})"


Prefs = Callable[[ChatKey], ChatSettings | None]  # a chat's settings as the store knows them now (no I/O wait)


class Unpriced:
    """What one Tusk's USD limits cannot count. `table`: litellm's price table may be asked (it imports it)."""

    def __init__(self, prefs: Prefs, models: ModelsInUse, configured: Mapping[str, ModelPrice],
                 ledger: SqlLedger | None, limits: Limits, table: bool = True) -> None:
        self.prefs, self.models, self.configured = prefs, models, configured  # prefs: a chat's settings, as known
        self.ledger, self.limits, self.table = ledger, limits, table

    @classmethod
    def of(cls, settings: Any, ledger: SqlLedger | None, limits: Limits, table: bool = True,
           prefs: Prefs | None = None) -> Unpriced:
        check = PriceCheck.of(settings, None, table)
        return cls(prefs or (lambda chat: None), ModelsInUse.of(settings), check.configured, ledger, limits, table)

    def check(self) -> PriceCheck:
        """A check with the ledger's evidence as it is now."""
        return PriceCheck(self.configured, self.ledger, self.table)

    def chat_models(self, chat: ChatKey) -> list[str]:
        prefs = self.prefs(chat)
        return self.models.for_chat(prefs.model if prefs is not None else None)

    def for_chat(self, chat: ChatKey, owner: bool = True, person: bool = False,
                 check: PriceCheck | None = None) -> str | None:
        """The note for a chat one of whose USD limits (its own or the default, everyone's, or a person's when
        `person`) cannot count its models' calls; None when no USD limit applies or every model is priced."""
        s = self.limits.settings
        chat_usd, chat_tokens = self.limits.chat_limits(chat)
        if all(v is None for v in (chat_usd, s.daily_usd, s.monthly_usd, s.person_daily_usd if person else None)):
            return None
        unpriced = (check or self.check()).unpriced(self.chat_models(chat))
        return chat_note(unpriced, chat, chat_tokens if chat_tokens is not None else s.daily_tokens, owner)

    def overall(self) -> list[dict[str, Any]]:
        """Each model without a known price that a USD limit in force would have to count: {"model", "limits"
        (what cannot count it: a setting's name or a chat's own), "token_limit" (the setting its calls count
        against instead, or null), "problem", "fix" (a price or a token limit), "note" (the sentence to show:
        the problem and the fix, or the token limit that counts its calls instead)}."""
        s = self.limits.settings
        general = [name for name, value in (("TUSK_LIMIT_DAILY_USD", s.daily_usd),
                                            ("TUSK_LIMIT_MONTHLY_USD", s.monthly_usd),
                                            ("TUSK_CHAT_LIMIT_DAILY_USD", s.chat_daily_usd),
                                            ("TUSK_PERSON_LIMIT_DAILY_USD", s.person_daily_usd)) if value is not None]
        own = self.limits.overrides()
        if not general and not own:
            return []
        check = self.check()
        escapes: dict[str, list[str]] = {}
        for model in check.unpriced(self.models.every()) if general else []:
            escapes.setdefault(model, []).extend(general)
        for chat, usd in sorted(own.items(), key=lambda kv: (kv[0].channel, kv[0].chat_id)):
            for model in check.unpriced(self.chat_models(chat)):
                escapes.setdefault(model, []).append(f"{chat.channel}:{chat.chat_id}'s own (${usd:g} a day)")
        covered = ("TUSK_LIMIT_DAILY_TOKENS" if s.daily_tokens is not None else
                   "TUSK_CHAT_LIMIT_DAILY_TOKENS" if s.chat_daily_tokens is not None else None)
        out = []
        for model, names in escapes.items():
            problem = f"{model} has no known price: {_names(names)} cannot count its calls"
            fix = f"{price_fix([model])}, or {tokens_fix()}"
            note = f"{problem}; they count against {covered} instead." if covered else f"{problem}: {fix}."
            out.append({"model": model, "limits": names, "token_limit": covered, "problem": problem, "fix": fix,
                        "note": note})
        return out
