"""Spend limits, checked before each LLM call with a reservation and settled after it.

    owner_daily / owner_monthly    USD, everyone's calls; days and months in the owner's zone
    chat_daily                     USD, one chat's calls (the default, or the chat's own: budgets.py)
    person_daily                   USD, one sender's calls in every chat of a channel
    owner_daily_tokens / chat_daily_tokens
                                   tokens of calls whose price is unknown (they count against no USD limit);
                                   the chat's as a default or its own

Chat and person days end at midnight in the chat's zone (passed to `check`). A call is allowed when
spent + outstanding reservations + its estimate stay within every limit that applies; it then holds a
`Reservation` until `settle()` (after the ledger recorded it) or `release()` (it failed). Calls running
at once reserve against each other, so many concurrent calls overshoot a limit only by what the real
costs exceed their estimates. Consolidation has a reserve of `consolidation_share` (5%) past every limit:
it runs while spending is within it, whatever its own estimate, so a chat's memory keeps working when its
replies are stopped.

Today's and this month's sums are cached in memory: loaded from the ledger once per scope and window
(again after `REFRESH_S`, for calls other processes recorded) and kept current from the ledger's
`subscribe` hook. A chat's own limits live in `$TUSK_HOME/budgets.json` (bot/usage/budgets.py), re-read
when it changes, so `tusk budget` reaches a running Tusk.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Protocol

from bot.events import ChatKey
from bot.usage import budgets
from bot.usage.budgets import ChatBudget
from bot.usage.ledger import Call, Ledger, Spent
from store.files.shared import FileDoc
from store.shared import SharedDoc, write

logger = logging.getLogger(__name__)

BUDGETS = budgets.FILE
REFRESH_S = 300.0
SLACK = 1e-9  # float sums of cents: 20 x $0.05 must fit a $1 limit
Scope = tuple[str, ...]  # ("owner",), ("chat", channel, chat), ("person", channel, person)


class Spending(Protocol):
    """What the limits read of a ledger (either backend's `SqlLedger`, or `tusk budget`'s empty one)."""

    def subscribe(self, listener: Callable[[int, Call], None]) -> None: ...

    def spent(self, since: float, channel: str | None = None, chat: str | None = None,
              person: str | None = None) -> Spent: ...


@dataclass(frozen=True, slots=True)
class LimitSettings:
    daily_usd: float | None = None
    monthly_usd: float | None = None
    chat_daily_usd: float | None = None  # default per chat; budgets.json overrides it per chat
    person_daily_usd: float | None = None
    daily_tokens: int | None = None  # unknown-price calls, owner-wide
    chat_daily_tokens: int | None = None  # unknown-price calls, per chat
    zone: tzinfo = timezone.utc  # the owner's: where the owner-wide day and month end
    consolidation_share: float = 0.05  # consolidation may go this share past each limit


def _zone_name(zone: tzinfo | None) -> str:
    return getattr(zone, "key", None) or str(zone)


def _usd(amount: float) -> str:
    if abs(amount * 100 - round(amount * 100)) < 1e-6:
        return f"${amount:,.2f}"
    return f"${amount:,.{4 if amount >= 0.0001 else 6}f}".rstrip("0")


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call not made: which limit, its figure, what was spent (calls in flight included), when it resets,
    and the call's own estimate (USD, or tokens for a token limit)."""

    limit: str  # owner_daily | owner_monthly | chat_daily | person_daily | owner_daily_tokens | chat_daily_tokens
    limit_value: float
    spent: float
    resets_at: datetime  # aware, in the zone the limit's days are counted in
    scope: Scope
    estimate: float = 0.0

    @property
    def reached(self) -> bool:
        """Nothing is left of the limit (else this call's estimate is more than what is left)."""
        return self.spent >= self.limit_value - SLACK

    def sentence(self) -> str:
        """The one sentence the person is told: the limit reached, or that this message's estimate would pass
        it (with the figures: a refusal at "$0.0357 of $0.05" must not read as a bug)."""
        kind = self.scope[0]
        tokens, monthly = self.limit.endswith("_tokens"), self.limit == "owner_monthly"
        period = "this month" if monthly else "today"
        if tokens:
            limit = f"daily limit of {self.limit_value:,.0f} tokens for models without a known price"
        else:
            limit = f"{'monthly' if monthly else 'daily'} spending limit ({_usd(self.limit_value)})"
        zone = _zone_name(self.resets_at.tzinfo)
        when = f"it resets {f'on {self.resets_at.day} {self.resets_at:%B} ' if monthly else ''}at midnight ({zone})"
        if self.reached:
            who = {"owner": "This bot has", "chat": "This chat has", "person": "You have"}[kind]
            return f"{who} reached {'your' if kind == 'person' else 'its'} {limit}; {when}."
        whose = {"owner": "this bot's", "chat": "this chat's", "person": "your"}[kind]
        if tokens:
            cost, used = f"take about {self.estimate:,.0f} tokens", f"{self.spent:,.0f} already used {period}"
        else:
            cost, used = f"cost about {_usd(self.estimate)}", f"{_usd(self.spent)} already spent {period}"
        return f"Answering this message would {cost}, more than is left of {whose} {limit}: {used}; {when}."


@dataclass(eq=False, slots=True)
class Reservation:
    """A call's claim on the limits while it runs: `settle()` once recorded, `release()` if it failed."""

    limits: Limits = field(repr=False)
    scopes: tuple[Scope, ...]
    usd: float
    tokens: int
    id: int = field(default=0)

    def settle(self) -> None:
        self.limits._drop(self)

    def release(self) -> None:
        self.limits._drop(self)


@dataclass(slots=True)
class _Window:
    start: float
    end: float
    usd: float
    tokens: int
    upto_id: int
    loaded: float


def _bounds(now: float, zone: tzinfo, monthly: bool) -> tuple[datetime, datetime]:
    """The day (or month) around `now` in `zone`: its start and the next one's, aware."""
    here = datetime.fromtimestamp(now, zone)
    if monthly:
        start = datetime(here.year, here.month, 1, tzinfo=zone)
        return start, datetime(here.year + here.month // 12, here.month % 12 + 1, 1, tzinfo=zone)
    start = datetime(here.year, here.month, here.day, tzinfo=zone)
    nxt = start.date() + timedelta(days=1)
    return start, datetime(nxt.year, nxt.month, nxt.day, tzinfo=zone)


class Limits:
    """The spend limits of one Tusk process. Thread-safe; `check` is cheap enough for the event loop."""

    def __init__(self, ledger: Spending, settings: LimitSettings, clock: Callable[[], float] = time.time,
                 doc: SharedDoc | None = None) -> None:
        self.ledger, self.settings, self.clock = ledger, settings, clock
        if doc is None:  # budgets.json, where the ledger is kept
            assert isinstance(ledger, Ledger), "only usage.sqlite's ledger has a place of its own for budgets.json"
            doc = FileDoc(ledger.home, BUDGETS)
        self.doc = doc
        self._lock = threading.Lock()
        self._windows: dict[tuple[Scope, float], _Window] = {}
        self._reserved: dict[Scope, list[float]] = {}  # scope -> [usd, tokens] of outstanding reservations
        self._open: dict[int, Reservation] = {}
        self._ids = itertools.count(1)
        self._noticed: set[tuple[str, Scope, float]] = set()
        self._budgets_text = self.doc.read()
        self._budgets = budgets.parse(self._budgets_text, self.doc.where)
        ledger.subscribe(self._recorded)

    # -- a chat's own limits (budgets.json) ------------------------------------------------------

    def budgets(self) -> dict[ChatKey, ChatBudget]:
        """Each chat's own limits now in force (budgets.json, read again when it changed)."""
        try:
            text = self.doc.read()
        except OSError as exc:
            logger.warning("%s; keeping the chat limits read before", exc)
            return self._budgets
        if text != self._budgets_text:
            try:
                self._budgets = budgets.parse(text, self.doc.where)
            except ValueError as exc:  # keep the last good ones; the owner is told
                logger.warning("%s; keeping the chat limits read before", exc)
            self._budgets_text = text
        return self._budgets

    def overrides(self) -> dict[ChatKey, float]:
        """The chats' own daily USD limits."""
        return {k: b.daily_usd for k, b in self.budgets().items() if b.daily_usd is not None}

    def token_overrides(self) -> dict[ChatKey, int]:
        """The chats' own daily token limits (calls of unknown price)."""
        return {k: b.daily_tokens for k, b in self.budgets().items() if b.daily_tokens is not None}

    def chat_limits(self, chat: ChatKey) -> tuple[float | None, int | None]:
        """(USD, tokens) a day that apply to `chat`: its own, else the defaults."""
        own, s = self.budgets().get(chat, ChatBudget()), self.settings
        return (own.daily_usd if own.daily_usd is not None else s.chat_daily_usd,
                own.daily_tokens if own.daily_tokens is not None else s.chat_daily_tokens)

    def _save(self, chats: dict[ChatKey, ChatBudget]) -> None:
        text = budgets.dump(chats)
        write(self.doc, text)
        self._budgets, self._budgets_text = chats, text

    def set_override(self, chat: ChatKey, daily_usd: float | None = None, daily_tokens: int | None = None) -> None:
        """Give `chat` its own daily limit in USD, in tokens (for calls of unknown price), or both; a limit
        not given is kept as it was."""
        if daily_usd is not None and not daily_usd >= 0:
            raise ValueError(f"a chat's daily limit must be 0 or more USD, got {daily_usd!r}")
        if daily_tokens is not None and daily_tokens < 0:
            raise ValueError(f"a chat's daily token limit must be 0 or more, got {daily_tokens!r}")
        with self._lock:
            current = self.budgets()
            was = current.get(chat, ChatBudget())
            now = ChatBudget(was.daily_usd if daily_usd is None else float(daily_usd),
                             was.daily_tokens if daily_tokens is None else int(daily_tokens))
            self._save({**current, chat: now})

    def clear_override(self, chat: ChatKey) -> bool:
        """Back to the default limits; False if the chat had none of its own."""
        with self._lock:
            current = self.budgets()
            if chat not in current:
                return False
            self._save({k: v for k, v in current.items() if k != chat})
            return True

    # -- spent ---------------------------------------------------------------------------------

    def _window(self, scope: Scope, now: float, zone: tzinfo, monthly: bool = False) -> tuple[_Window, datetime]:
        start, end = _bounds(now, zone, monthly)
        key = (scope, start.timestamp())
        window = self._windows.get(key)
        if window is None or now - window.loaded > REFRESH_S:
            kind, channel, ident = (*scope, None, None)[:3]
            spent = self.ledger.spent(start.timestamp(), channel, chat=ident if kind == "chat" else None,
                                      person=ident if kind == "person" else None)
            window = _Window(start.timestamp(), end.timestamp(), spent.usd, spent.unpriced_tokens, spent.upto_id, now)
            self._windows = {k: w for k, w in self._windows.items() if w.end > now - 86400}
            self._windows[key] = window
        return window, end

    def _recorded(self, rowid: int, call: Call) -> None:
        """The ledger's hook: a call this process recorded adds to every cached window it falls in."""
        scopes: set[Scope] = {("owner",)}
        if call.channel is not None:  # a chat's and a person's scopes always name their channel (`check`)
            if call.chat is not None:
                scopes.add(("chat", call.channel, call.chat))
            if call.person is not None:
                scopes.add(("person", call.channel, call.person))
        with self._lock:
            for (scope, _), w in self._windows.items():
                if scope in scopes and w.start <= call.ts < w.end and rowid > w.upto_id:
                    if call.cost_usd is None:
                        w.tokens += call.input_tokens + call.output_tokens
                    else:
                        w.usd += call.cost_usd

    # -- checking ------------------------------------------------------------------------------

    def check(self, channel: str, chat: str | None, person: str | None, estimate_usd: float | None,
              estimate_tokens: int, purpose: str, zone: tzinfo = timezone.utc) -> Reservation | Refusal:
        """Reserve the call's estimate against every limit that applies (USD when its price is known, else
        tokens), or say which limit it would pass. `zone`: the chat's, where its day ends."""
        s, now = self.settings, self.clock()
        owner, chat_scope = ("owner",), ("chat", channel, chat) if chat is not None else None
        person_scope = ("person", channel, person) if person is not None else None
        allow = 1 + (s.consolidation_share if purpose == "consolidation" else 0.0)
        priced = estimate_usd is not None
        amount = estimate_usd if estimate_usd is not None else float(estimate_tokens)
        with self._lock:
            chat_usd, chat_tokens = self.chat_limits(ChatKey(channel, chat)) if chat is not None else (None, None)
            if priced:
                checks = [("owner_daily", owner, s.daily_usd, s.zone, False),
                          ("owner_monthly", owner, s.monthly_usd, s.zone, True),
                          ("chat_daily", chat_scope, chat_usd, zone, False),
                          ("person_daily", person_scope, s.person_daily_usd, zone, False)]
            else:
                checks = [("owner_daily_tokens", owner, s.daily_tokens, s.zone, False),
                          ("chat_daily_tokens", chat_scope, chat_tokens, zone, False)]
            for name, scope, limit, where, monthly in checks:
                if scope is None or limit is None:
                    continue
                window, end = self._window(scope, now, where, monthly)
                held = self._reserved.get(scope, (0.0, 0))
                spent = window.usd + held[0] if priced else window.tokens + held[1]
                # consolidation keeps memory working on its reserve: it runs while spending is within the
                # reserve past the limit, whatever its own estimate (the round after that waits for the reset)
                if (spent if purpose == "consolidation" else spent + amount) > limit * allow + SLACK:
                    return Refusal(name, limit, spent, end, scope, amount)
            scopes = tuple(dict.fromkeys(sc for _, sc, _, _, _ in checks if sc is not None))
            reservation = Reservation(self, scopes, amount if priced else 0.0, 0 if priced else estimate_tokens,
                                      next(self._ids))
            for scope in scopes:
                held = self._reserved.setdefault(scope, [0.0, 0])
                held[0] += reservation.usd
                held[1] += reservation.tokens
            self._open[reservation.id] = reservation
        return reservation

    def _drop(self, reservation: Reservation) -> None:
        with self._lock:
            if self._open.pop(reservation.id, None) is None:
                return  # settled or released already
            for scope in reservation.scopes:
                held = self._reserved[scope]
                held[0] -= reservation.usd
                held[1] -= reservation.tokens
            if not self._open:
                self._reserved.clear()  # no float residue left behind

    def notice_due(self, refusal: Refusal) -> bool:
        """True the first time a limit refuses in its day (or month): tell the owner then, not each time."""
        mark = (refusal.limit, refusal.scope, refusal.resets_at.timestamp())
        with self._lock:
            if mark in self._noticed:
                return False
            now = self.clock()
            self._noticed = {m for m in self._noticed if m[2] > now} | {mark}
            return True
