"""The owner's view of spend: `tusk usage`, `tusk budget`, and the figures of the console's Usage page.

    tusk usage [--by day|chat|person|model|purpose] [--since 30d|7d|today|2026-11-01] [--json]
    tusk budget [list] | set CHANNEL:ID [USD] [--tokens N] | clear CHANNEL:ID
    standings(...)        today's spend against each limit (the console's Usage page: bot/ops/usage_page.py)

Everything is read from the data dir through `Ledger` and `Limits`, so it works beside a running Tusk;
overrides go through `Limits.set_override`/`clear_override` (budgets.json, 0600, written atomically),
which a running Tusk re-reads. Reading never creates anything: without `usage.sqlite` there is nothing
to report (opening the ledger would create it, and the data dir with it). Days are the owner's
(TUSK_TIMEZONE), chat and person limits included: a chat with its own zone may see its day end at
another hour.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from pathlib import Path
from typing import Any

from bot.events import ChatKey
from bot.usage.ledger import FILE, Ledger, LedgerTooNew, Row
from bot.usage.budgets import FILE as budgets_file
from bot.usage.ledger_sql import Call, Group, Spent, SqlLedger
from bot.usage.limits import Limits, LimitSettings
from bot.usage.unpriced import Prefs, Unpriced
from bot.usage.view import day_start, money, month_start, report_json, report_table
from store.files.shared import FileDoc
from store.shared import SharedDoc

BY = ("day", "chat", "person", "model", "purpose")
NOTHING = "No model calls recorded yet."
DAYS = re.compile(r"(\d{1,4})d")


def since_arg(value: str) -> int | date:
    """`--since`: days back (`7d`, `today` = 0) or a date; argparse's error names the forms."""
    value = value.strip().lower()
    if value == "today":
        return 0
    if m := DAYS.fullmatch(value):
        return int(m[1])
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: give a period such as 7d or 30d, today, "
                                         "or a date such as 2026-11-01") from None


def usd_arg(value: str) -> float:
    """`tusk budget set`'s amount: dollars, 0 or more."""
    try:
        amount = float(value.removeprefix("$"))
    except ValueError:
        amount = math.nan
    if not (math.isfinite(amount) and amount >= 0):
        raise argparse.ArgumentTypeError(f"{value!r}: give the daily limit in USD, 0 or more, such as 2.50")
    return amount


def tokens_arg(value: str) -> int:
    """`tusk budget set --tokens`: a whole number of tokens, 0 or more (`20,000` and `20_000` too)."""
    try:
        tokens = int(value.replace(",", "").replace("_", ""))
    except ValueError:
        tokens = -1
    if tokens < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: give the daily token limit as a whole number, 0 or more, "
                                         "such as 20000")
    return tokens


def since_ts(since: int | date, zone: tzinfo, now: float | None = None) -> float:
    """Midnight `since` days ago (as /usage counts "7 days"), or of the date given, in `zone`."""
    if isinstance(since, int):
        return day_start(zone, since, now)
    return datetime(since.year, since.month, since.day, tzinfo=zone).timestamp()


def _ledger(home: Path) -> Ledger | None:
    """The data dir's ledger, or None when no call was ever recorded (nothing is created)."""
    return Ledger(home) if (Path(home) / FILE).is_file() else None


@dataclass
class Book:
    """Where `tusk usage` and `tusk budget` read and write: the ledger (None: no call recorded yet) and
    budgets.json, in the data dir's files or the database (bot/stores.py); and each chat's settings as that
    store holds them (`prefs`: which model a chat picked)."""

    ledger: SqlLedger | None
    budgets: SharedDoc
    prefs: Prefs

    def limits(self, settings: LimitSettings) -> Limits:
        """The limits over this ledger (an empty one for the doc alone when none was recorded yet)."""
        return Limits(self.ledger if self.ledger is not None else _Nothing(), settings, doc=self.budgets)


class _Nothing:
    """The ledger of a data dir where no call was recorded: nothing spent, and nothing created to say so."""

    def subscribe(self, listener: Callable[[int, Call], None]) -> None:
        """No call will be recorded through it."""

    def spent(self, since: float, channel: str | None = None, chat: str | None = None,
              person: str | None = None) -> Spent:
        return Spent(0.0, 0, 0)


@contextlib.contextmanager
def book(settings: Any) -> Iterator[Book]:
    """The settings' ledger and budgets.json for one command, closed after."""
    url = settings.store_url()
    if url is None:
        from store import open_files

        ledger = _ledger(settings.home)
        try:
            yield Book(ledger, FileDoc(settings.home, budgets_file), open_files(settings.home).chats.prefs_now)
        finally:
            if ledger is not None:
                ledger.close()
        return
    from bot import stores
    from store import prepared

    with prepared(settings.home, url) as store:
        yield Book(stores.ledger(store), stores.budgets(store), _database_prefs(store.sync_db))


def chat_name(row: Row) -> str:
    return f"{row.channel}:{row.key}" if row.key is not None else f"{row.channel}:(erased or housekeeping)"


# -- today's spend against the limits ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Standing:
    """One limit that applies today: what it covers, its figure and what was spent against it."""

    limit: str  # owner_daily | owner_monthly | owner_daily_tokens | chat_daily | chat_daily_tokens | person_daily
    who: str  # "everyone" or CHANNEL:ID
    limit_value: float
    spent: float
    unit: str = "usd"  # or "tokens" (calls of unknown price)
    override: bool = False  # a chat's own limit from budgets.json
    unpriced_calls: int = 0  # a USD limit: calls in its scope (today or this month) of unknown price, not counted

    @property
    def reached(self) -> bool:
        return self.spent >= self.limit_value

    def row(self) -> dict[str, Any]:
        return {"limit": self.limit, "who": self.who, "limit_value": self.limit_value, "spent": self.spent,
                "unit": self.unit, "override": self.override, "reached": self.reached,
                "unpriced_calls": self.unpriced_calls}

    def text(self) -> str:
        label = {"owner_daily": "everyone today", "owner_monthly": "everyone this month",
                 "owner_daily_tokens": "everyone today, unknown-price tokens", "chat_daily": f"chat {self.who} today",
                 "chat_daily_tokens": f"chat {self.who} today, unknown-price tokens",
                 "person_daily": f"person {self.who} today"}[self.limit]
        figures = (f"{self.spent:,.0f} of {self.limit_value:,.0f} tokens" if self.unit == "tokens"
                   else f"{money(self.spent)} of {money(self.limit_value)}")
        n = self.unpriced_calls
        uncounted = f" (+ {n} call{'s' if n != 1 else ''} of unknown price it cannot count)" if n else ""
        return (f"{label}: {figures}{uncounted}" + (" (own limit)" if self.override else "")
                + (" - REACHED" if self.reached else ""))


def standings(ledger: SqlLedger | None, limits: Limits, now: float | None = None) -> list[Standing]:
    """Today's spend against every limit set: the owner's, each chat's that spent today or has its own
    limit, each person's that spent today (erased calls count toward the owner's only here)."""
    s, zone = limits.settings, limits.settings.zone
    today = day_start(zone, 0, now)
    out = []
    owner = (("owner_daily", s.daily_usd, today), ("owner_monthly", s.monthly_usd, month_start(zone)))
    for name, limit, since in owner:
        if limit is not None:
            total = ledger.totals(since) if ledger is not None else None
            out.append(Standing(name, "everyone", limit, (total.cost_usd or 0.0) if total else 0.0,
                                unpriced_calls=total.unknown_calls if total else 0))
    if s.daily_tokens is not None:
        out.append(Standing("owner_daily_tokens", "everyone", s.daily_tokens,
                            ledger.spent(today).unpriced_tokens if ledger is not None else 0, "tokens"))
    budgets = limits.budgets()
    rows = ledger.report("chat", today) if ledger is not None else []
    chats = {ChatKey(r.channel, r.key): r for r in rows if r.channel is not None and r.key is not None}
    for key in sorted(chats.keys() | budgets.keys(), key=lambda k: (k.channel, k.chat_id)):
        usd, tokens = limits.chat_limits(key)
        row, own, who = chats.get(key), budgets.get(key), f"{key.channel}:{key.chat_id}"
        if usd is not None:
            out.append(Standing("chat_daily", who, usd, (row.cost_usd or 0.0) if row else 0.0,
                                override=own is not None and own.daily_usd is not None,
                                unpriced_calls=row.unknown_calls if row else 0))
        if tokens is not None:
            spent = 0
            if row is not None and ledger is not None:
                spent = ledger.spent(today, key.channel, chat=key.chat_id).unpriced_tokens
            out.append(Standing("chat_daily_tokens", who, tokens, spent, "tokens",
                                override=own is not None and own.daily_tokens is not None))
    if s.person_daily_usd is not None and ledger is not None:
        out += [Standing("person_daily", chat_name(r), s.person_daily_usd, r.cost_usd or 0.0,
                         unpriced_calls=r.unknown_calls)
                for r in ledger.report("person", today) if r.key is not None]
    return out


# -- tusk usage ----------------------------------------------------------------------------------------


def usage(settings: Any, by: Group, since: int | date, as_json: bool) -> str:
    """What `tusk usage` prints: the table, today's standing and the models a USD limit cannot count (as far
    as the ledger shows: litellm is not loaded for it), or the JSON array."""
    with book(settings) as kept:
        ledger = kept.ledger
        if ledger is None:
            return "[]" if as_json else NOTHING
        limits_settings = settings.limit_settings()
        zone = limits_settings.zone
        rows = ledger.report(by, since_ts(since, zone), zone=zone)
        if as_json:
            return json.dumps(report_json(rows, by), indent=1)
        limits = kept.limits(limits_settings)
        shown = [s for s in standings(ledger, limits) if s.limit.startswith("owner") or s.reached]
        lines = [report_table(rows, by)]
        if shown:
            lines += ["", f"Spend limits ({getattr(zone, 'key', zone)} days):"] + [f"  {s.text()}" for s in shown]
        lines += [f"Note: {u['note']}" for u in Unpriced.of(settings, ledger, limits, table=False,
                                                              prefs=kept.prefs).overall()]
        return "\n".join(lines)


# -- tusk budget ---------------------------------------------------------------------------------------


def budget_list(settings: Any, limits_settings: LimitSettings) -> str:
    s = limits_settings
    defaults = [("everyone, daily", money(s.daily_usd) if s.daily_usd is not None else None),
                ("everyone, monthly", money(s.monthly_usd) if s.monthly_usd is not None else None),
                ("each chat, daily", money(s.chat_daily_usd) if s.chat_daily_usd is not None else None),
                ("each person, daily", money(s.person_daily_usd) if s.person_daily_usd is not None else None),
                ("everyone, daily, unknown-price tokens", _tokens(s.daily_tokens)),
                ("each chat, daily, unknown-price tokens", _tokens(s.chat_daily_tokens))]
    lines = ["Default limits (TUSK_LIMIT_DAILY_USD, TUSK_LIMIT_MONTHLY_USD, TUSK_CHAT_LIMIT_DAILY_USD, "
             "TUSK_PERSON_LIMIT_DAILY_USD, TUSK_LIMIT_DAILY_TOKENS, TUSK_CHAT_LIMIT_DAILY_TOKENS):"]
    lines += [f"  {label}: {value or 'none'}" for label, value in defaults]
    with book(settings) as kept:
        own = kept.limits(s).budgets()
    if not own:
        return "\n".join([*lines, "No chat has its own daily limit (`tusk budget set CHANNEL:ID USD` gives one)."])
    lines.append("Chats with their own daily limit:")
    for key, budget in sorted(own.items(), key=lambda kv: (kv[0].channel, kv[0].chat_id)):
        parts = ([money(budget.daily_usd)] if budget.daily_usd is not None else []) + \
                ([_tokens(budget.daily_tokens) or ""] if budget.daily_tokens is not None else [])
        lines.append(f"  {key.channel}:{key.chat_id}  {', '.join(parts)}")
    return "\n".join(lines)


def _tokens(value: int | None) -> str | None:
    return None if value is None else f"{value:,} tokens (of unknown-price models)"


def budget_set(settings: Any, chat: ChatKey, usd: float | None, tokens: int | None) -> str:
    """Give the chat its own limit(s); where a USD limit cannot count the chat's models, say so and what can."""
    if usd is None and tokens is None:
        raise ValueError("give the daily limit in USD (tusk budget set CHANNEL:ID 2.50) or in tokens "
                         "(tusk budget set CHANNEL:ID --tokens 20000)")
    with book(settings) as kept:
        limits = kept.limits(settings.limit_settings())
        limits.set_override(chat, usd, tokens)
        return _budget_said(settings, kept, limits, chat, usd, tokens)


def _budget_said(settings: Any, kept: Book, limits: Limits, chat: ChatKey, usd: float | None,
                 tokens: int | None) -> str:
    what = []
    if usd is not None:
        what.append(f"spend {money(usd)} a day")
    if tokens is not None:
        what.append(f"use {tokens:,} tokens a day of models without a known price")
    said = f"{chat.channel}:{chat.chat_id} may now {' and '.join(what)} (a running Tusk applies it at once)."
    if usd is None:
        return said
    # litellm's price table is read for a model TUSK_MODELS does not price (it takes a few seconds)
    note = Unpriced.of(settings, kept.ledger, limits, prefs=kept.prefs).for_chat(chat)
    return said + (f"\nNote: {note}" if note else "")


def budget_clear(settings: Any, limits_settings: LimitSettings, chat: ChatKey) -> str:
    with book(settings) as kept:
        cleared = kept.limits(limits_settings).clear_override(chat)
    if not cleared:
        raise LookupError(f"{chat.channel}:{chat.chat_id} has no limit of its own (`tusk budget list` shows them)")
    usd, tokens = limits_settings.chat_daily_usd, limits_settings.chat_daily_tokens
    return (f"{chat.channel}:{chat.chat_id} is back to the default daily limit "
            f"({'none' if usd is None else money(usd)}" + (f"; {tokens:,} tokens" if tokens is not None else "") + ").")


def run(args: argparse.Namespace, settings: Any) -> int:
    """`tusk usage` or `tusk budget [ACTION]` (called by bot/ops/cli.py). LookupError/ValueError: a one-line error."""
    print(_answer(args, settings))
    return 0


def _answer(args: argparse.Namespace, settings: Any) -> str:
    home, limits_settings = settings.home, settings.limit_settings()
    if args.command == "usage":
        try:
            return usage(settings, args.by, args.since, args.json)
        except (sqlite3.DatabaseError, LedgerTooNew) as exc:  # damaged, or written by a newer Tusk
            raise ValueError(f"{Path(home) / FILE}: {exc}") from exc
    if args.action in (None, "list"):  # a bare `tusk budget` lists
        return budget_list(settings, limits_settings)
    if args.action == "set":
        return budget_set(settings, args.chat, args.usd, args.tokens)
    return budget_clear(settings, limits_settings, args.chat)


def _database_prefs(sync_db: Any) -> Prefs:
    """Each chat's settings as the database holds them (read when asked: a command's few chats)."""
    from memory import chat_settings
    from store.base import SETTINGS
    from store.postgres.chat_docs import read_doc

    def prefs(chat: ChatKey) -> chat_settings.ChatSettings | None:
        text = read_doc(sync_db, chat, SETTINGS)
        return chat_settings.parse(text) if text is not None else None

    return prefs
