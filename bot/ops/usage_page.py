"""The console's Usage page (bot/ops/console.py): GET /api/usage, the daily cost, calls and tokens stacked by
chat, the top chats and people, today's spend against each limit and the models a USD limit cannot count;
GET/PUT/DELETE /api/budgets/{channel}/{chat}, a chat's own daily limits. Read from the ledger and `Limits`,
as `tusk usage` and `tusk budget` read them (bot/ops/usage.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bot.events import ChatKey
from bot.ops.usage import chat_name, standings
from bot.usage.ledger import Row
from bot.usage.ledger_sql import SqlLedger
from bot.usage.limits import Limits
from bot.usage.unpriced import Unpriced
from bot.usage.view import day_start, report_json

TOP = 10  # chats and people listed on the Usage page
STACKED = 8  # chats drawn in the chart; the rest add up to "other"


def usage_page(ledger: SqlLedger, limits: Limits, days: int, now: float | None = None,
               unpriced: Unpriced | None = None) -> dict[str, Any]:
    """GET /api/usage: for the last `days` days (today included) the cost, calls and tokens (input and output)
    of each day stacked by chat (the `STACKED` costliest chats, the rest as "other"), the top chats and people,
    today's standing (a USD limit's `unpriced_calls`: calls of unknown price it cannot count), and `unpriced`:
    each model a USD limit in force cannot count, with the sentence to show (`Unpriced.overall`). A day's cost
    is null when all its calls had an unknown price (its tokens still count). Reads the ledger only if it exists."""
    zone = limits.settings.zone
    since = day_start(zone, days - 1, now)
    first = datetime.fromtimestamp(since, zone).date()
    dates = [(first + timedelta(days=i)).isoformat() for i in range(days)]
    page: dict[str, Any] = {"zone": getattr(zone, "key", str(zone)), "days": dates, "series": [],
                            "top_chats": [], "top_people": [],
                            "standings": [s.row() for s in standings(None, limits, now)],
                            "unpriced": unpriced.overall() if unpriced is not None else []}
    if not ledger.exists():
        return page
    chats = [r for r in ledger.report("chat", since, zone=zone) if r.key is not None]

    def daily(rows: list[Row]) -> dict[str, Any]:
        by_day = {r.key: r for r in rows}
        return {"cost_usd": [by_day[d].cost_usd if d in by_day else 0.0 for d in dates],
                "calls": [by_day[d].calls if d in by_day else 0 for d in dates],
                "tokens": [by_day[d].input_tokens + by_day[d].output_tokens if d in by_day else 0 for d in dates]}

    series = [{"chat": chat_name(r), **daily(ledger.report("day", since, channel=r.channel, chat=r.key, zone=zone))}
              for r in chats[:STACKED]]
    everyone = daily(ledger.report("day", since, zone=zone))
    rest: dict[str, Any] = {"chat": "other", "cost_usd": [], "calls": [], "tokens": []}
    # the rest: older chats, erased ones, housekeeping
    for i, (cost, calls) in enumerate(zip(everyone["cost_usd"], everyone["calls"])):
        rest["cost_usd"].append(max(0.0, (cost or 0.0) - sum(s["cost_usd"][i] or 0.0 for s in series)))
        rest["calls"].append(calls - sum(s["calls"][i] for s in series))
        rest["tokens"].append(everyone["tokens"][i] - sum(s["tokens"][i] for s in series))
    if any(rest["calls"]):
        series.append(rest)
    people = [r for r in ledger.report("person", since) if r.key is not None]
    page.update(series=series, top_chats=report_json(chats[:TOP], "chat"),
                top_people=report_json(people[:TOP], "person"),
                standings=[s.row() for s in standings(ledger, limits, now)])
    return page


def chat_budget(limits: Limits, chat: ChatKey, unpriced: Unpriced | None = None) -> dict[str, Any]:
    """GET/PUT/DELETE /api/budgets/{channel}/{chat}: the chat's own daily limits (null: the default applies),
    in USD and in tokens (calls of unknown price), and `warning`: the sentence saying that a USD limit that
    applies cannot count the chat's model, with what can be enforced instead (null when it can)."""
    own = limits.budgets().get(chat)
    usd, tokens = limits.chat_limits(chat)
    return {"chat": f"{chat.channel}:{chat.chat_id}", "daily_usd": own.daily_usd if own else None,
            "default_daily_usd": limits.settings.chat_daily_usd, "applies_usd": usd,
            "daily_tokens": own.daily_tokens if own else None,
            "default_daily_tokens": limits.settings.chat_daily_tokens, "applies_tokens": tokens,
            "warning": unpriced.for_chat(chat) if unpriced is not None else None}
