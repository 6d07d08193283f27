"""The owner's view of spend: `tusk usage`, `tusk budget`, and the figures of the console's Usage page.

    tusk usage [--by day|chat|person|model|purpose] [--since 30d|7d|today|2026-11-01] [--json]
    tusk budget list | set CHANNEL:ID USD | clear CHANNEL:ID
    usage_page(...)       GET /api/usage: daily cost, calls and tokens stacked by chat, the top chats and
                          people, today's spend against each limit

Everything is read from the data dir through `Ledger` and `Limits`, so it works beside a running Tusk;
overrides go through `Limits.set_override`/`clear_override` (budgets.json, 0600, written atomically),
which a running Tusk re-reads. Reading never creates anything: without `usage.sqlite` there is nothing
to report (opening the ledger would create it, and the data dir with it). Days are the owner's
(TUSK_TIMEZONE), chat and person limits included: a chat with its own zone may see its day end at
another hour.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sqlite3
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bot.events import ChatKey
from bot.usage.ledger import FILE, Ledger, LedgerTooNew, Row
from bot.usage.limits import Limits, LimitSettings
from bot.usage.view import day_start, money, month_start, report_json, report_table

BY = ("day", "chat", "person", "model", "purpose")
NOTHING = "No model calls recorded yet."
TOP = 10  # chats and people listed on the Usage page
STACKED = 8  # chats drawn in the chart; the rest add up to "other"
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


def since_ts(since: int | date, zone: ZoneInfo, now: float | None = None) -> float:
    """Midnight `since` days ago (as /usage counts "7 days"), or of the date given, in `zone`."""
    if isinstance(since, int):
        return day_start(zone, since, now)
    return datetime(since.year, since.month, since.day, tzinfo=zone).timestamp()


def _ledger(home: Path) -> Ledger | None:
    """The data dir's ledger, or None when no call was ever recorded (nothing is created)."""
    return Ledger(home) if (Path(home) / FILE).is_file() else None


def _name(row: Row) -> str:
    return f"{row.channel}:{row.key}" if row.key is not None else f"{row.channel}:(erased or housekeeping)"


# -- today's spend against the limits ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Standing:
    """One limit that applies today: what it covers, its figure and what was spent against it."""

    limit: str  # owner_daily | owner_monthly | owner_daily_tokens | chat_daily | person_daily
    who: str  # "everyone" or CHANNEL:ID
    limit_value: float
    spent: float
    unit: str = "usd"  # or "tokens" (calls of unknown price)
    override: bool = False  # a chat's own limit from budgets.json

    @property
    def reached(self) -> bool:
        return self.spent >= self.limit_value

    def row(self) -> dict[str, Any]:
        return {"limit": self.limit, "who": self.who, "limit_value": self.limit_value, "spent": self.spent,
                "unit": self.unit, "override": self.override, "reached": self.reached}

    def text(self) -> str:
        label = {"owner_daily": "everyone today", "owner_monthly": "everyone this month",
                 "owner_daily_tokens": "everyone today, unknown-price tokens", "chat_daily": f"chat {self.who} today",
                 "person_daily": f"person {self.who} today"}[self.limit]
        figures = (f"{self.spent:,.0f} of {self.limit_value:,.0f} tokens" if self.unit == "tokens"
                   else f"{money(self.spent)} of {money(self.limit_value)}")
        return f"{label}: {figures}" + (" (own limit)" if self.override else "") + (" - REACHED" if self.reached else "")


def standings(ledger: Ledger | None, limits: Limits, now: float | None = None) -> list[Standing]:
    """Today's spend against every limit set: the owner's, each chat's that spent today or has its own
    limit, each person's that spent today (erased calls count toward the owner's only here)."""
    s, zone = limits.settings, limits.settings.zone
    today = day_start(zone, 0, now)
    spent = ledger.spent if ledger is not None else None
    out = []
    for name, limit, since in (("owner_daily", s.daily_usd, today), ("owner_monthly", s.monthly_usd, month_start(zone))):
        if limit is not None:
            out.append(Standing(name, "everyone", limit, spent(since).usd if spent else 0.0))
    if s.daily_tokens is not None:
        out.append(Standing("owner_daily_tokens", "everyone", s.daily_tokens,
                            spent(today).unpriced_tokens if spent else 0, "tokens"))
    overrides = limits.overrides()
    chats = {ChatKey(r.channel, r.key): r.cost_usd or 0.0 for r in ledger.report("chat", today)
             if r.key is not None} if ledger else {}
    for key in sorted(chats.keys() | overrides.keys(), key=lambda k: (k.channel, k.chat_id)):
        limit = overrides.get(key, s.chat_daily_usd)
        if limit is not None:
            out.append(Standing("chat_daily", f"{key.channel}:{key.chat_id}", limit, chats.get(key, 0.0),
                                override=key in overrides))
    if s.person_daily_usd is not None and ledger is not None:
        out += [Standing("person_daily", _name(r), s.person_daily_usd, r.cost_usd or 0.0)
                for r in ledger.report("person", today) if r.key is not None]
    return out


# -- tusk usage ----------------------------------------------------------------------------------------


def usage(home: Path, limits_settings: LimitSettings, by: str, since: int | date, as_json: bool) -> str:
    """What `tusk usage` prints: the table and today's standing, or the JSON array."""
    ledger = _ledger(home)
    if ledger is None:
        return "[]" if as_json else NOTHING
    try:
        zone = limits_settings.zone
        rows = ledger.report(by, since_ts(since, zone), zone=zone)
        if as_json:
            return json.dumps(report_json(rows, by), indent=1)
        shown = [s for s in standings(ledger, Limits(ledger, limits_settings))
                 if s.limit.startswith("owner") or s.reached]
        lines = [report_table(rows, by)]
        if shown:
            lines += ["", f"Spend limits ({getattr(zone, 'key', zone)} days):"] + [f"  {s.text()}" for s in shown]
        return "\n".join(lines)
    finally:
        ledger.close()


# -- tusk budget ---------------------------------------------------------------------------------------


def budget_list(home: Path, limits_settings: LimitSettings) -> str:
    s = limits_settings
    defaults = [("everyone, daily", s.daily_usd), ("everyone, monthly", s.monthly_usd),
                ("each chat, daily", s.chat_daily_usd), ("each person, daily", s.person_daily_usd)]
    lines = ["Default limits (TUSK_LIMIT_DAILY_USD, TUSK_LIMIT_MONTHLY_USD, TUSK_CHAT_LIMIT_DAILY_USD, "
             "TUSK_PERSON_LIMIT_DAILY_USD):"]
    lines += [f"  {label}: {'none' if value is None else money(value)}" for label, value in defaults]
    overrides = Limits(Ledger(home), s).overrides()
    if not overrides:
        return "\n".join([*lines, "No chat has its own daily limit (`tusk budget set CHANNEL:ID USD` gives one)."])
    lines.append("Chats with their own daily limit:")
    lines += [f"  {k.channel}:{k.chat_id}  {money(v)}" for k, v in sorted(
        overrides.items(), key=lambda kv: (kv[0].channel, kv[0].chat_id))]
    return "\n".join(lines)


def budget_set(home: Path, limits_settings: LimitSettings, chat: ChatKey, usd: float) -> str:
    Limits(Ledger(home), limits_settings).set_override(chat, usd)
    return f"{chat.channel}:{chat.chat_id} may now spend {money(usd)} a day (a running Tusk applies it at once)."


def budget_clear(home: Path, limits_settings: LimitSettings, chat: ChatKey) -> str:
    if not Limits(Ledger(home), limits_settings).clear_override(chat):
        raise LookupError(f"{chat.channel}:{chat.chat_id} has no limit of its own (`tusk budget list` shows them)")
    default = limits_settings.chat_daily_usd
    return (f"{chat.channel}:{chat.chat_id} is back to the default daily limit "
            f"({'none' if default is None else money(default)}).")


def run(args: argparse.Namespace, home: Path, limits_settings: LimitSettings) -> str:
    """`tusk usage` or `tusk budget ACTION`: the text to print. LookupError/ValueError: a one-line error."""
    if args.command == "usage":
        try:
            return usage(home, limits_settings, args.by, args.since, args.json)
        except (sqlite3.DatabaseError, LedgerTooNew) as exc:  # damaged, or written by a newer Tusk
            raise ValueError(f"{Path(home) / FILE}: {exc}") from exc
    if args.action == "list":
        return budget_list(home, limits_settings)
    if args.action == "set":
        return budget_set(home, limits_settings, args.chat, args.usd)
    return budget_clear(home, limits_settings, args.chat)


# -- the console's Usage page --------------------------------------------------------------------------


def usage_page(ledger: Ledger, limits: Limits, days: int, now: float | None = None) -> dict[str, Any]:
    """GET /api/usage: for the last `days` days (today included) the cost, calls and tokens (input and output)
    of each day stacked by chat (the `STACKED` costliest chats, the rest as "other"), the top chats and people,
    and today's standing. A day's cost is null when all its calls had an unknown price (its tokens still count).
    Reads the ledger only if it exists."""
    zone = limits.settings.zone
    since = day_start(zone, days - 1, now)
    first = datetime.fromtimestamp(since, zone).date()
    dates = [(first + timedelta(days=i)).isoformat() for i in range(days)]
    page: dict[str, Any] = {"zone": getattr(zone, "key", str(zone)), "days": dates, "series": [],
                            "top_chats": [], "top_people": [],
                            "standings": [s.row() for s in standings(None, limits, now)]}
    if not ledger.path.is_file():
        return page
    chats = [r for r in ledger.report("chat", since, zone=zone) if r.key is not None]

    def daily(rows: list[Row]) -> dict[str, Any]:
        by_day = {r.key: r for r in rows}
        return {"cost_usd": [by_day[d].cost_usd if d in by_day else 0.0 for d in dates],
                "calls": [by_day[d].calls if d in by_day else 0 for d in dates],
                "tokens": [by_day[d].input_tokens + by_day[d].output_tokens if d in by_day else 0 for d in dates]}

    series = [{"chat": _name(r), **daily(ledger.report("day", since, channel=r.channel, chat=r.key, zone=zone))}
              for r in chats[:STACKED]]
    everyone = daily(ledger.report("day", since, zone=zone))
    rest: dict[str, Any] = {"chat": "other", "cost_usd": [], "calls": [], "tokens": []}
    for i, (cost, calls) in enumerate(zip(everyone["cost_usd"], everyone["calls"])):  # older chats, erased, housekeeping
        rest["cost_usd"].append(max(0.0, (cost or 0.0) - sum(s["cost_usd"][i] or 0.0 for s in series)))
        rest["calls"].append(calls - sum(s["calls"][i] for s in series))
        rest["tokens"].append(everyone["tokens"][i] - sum(s["tokens"][i] for s in series))
    if any(rest["calls"]):
        series.append(rest)
    page.update(series=series, top_chats=report_json(chats[:TOP], "chat"),
                top_people=report_json([r for r in ledger.report("person", since) if r.key is not None][:TOP], "person"),
                standings=[s.row() for s in standings(ledger, limits, now)])
    return page


def chat_budget(limits: Limits, chat: ChatKey) -> dict[str, Any]:
    """GET/PUT/DELETE /api/budgets/{channel}/{chat}: the chat's own daily limit (null: the default applies)."""
    own = limits.overrides().get(chat)
    return {"chat": f"{chat.channel}:{chat.chat_id}", "daily_usd": own,
            "default_daily_usd": limits.settings.chat_daily_usd,
            "applies_usd": own if own is not None else limits.settings.chat_daily_usd}
