"""What the ledger says, for people: `/usage`, the spend lines of `/status`, and `tusk usage`.

    /usage            this chat: today, 7 and 30 days — calls, tokens and cost by purpose; in a group an
                      administrator also sees it per member (ids as the platform gives them)
    /status           today's spend against each limit that applies to this chat and its sender, and a
                      model those dollar limits cannot count (bot/usage/unpriced.py)
    tusk usage        the owner's report by day, chat, person, model or purpose (`report_rows`)

Costs are shown with "+ N calls of unknown price" where a price was unknown: never as $0.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from bot.commands.base import Command, CommandContext
from bot.usage.ledger_sql import Row, SqlLedger, Totals
from bot.usage.limits import Limits
from bot.usage.unpriced import Unpriced
from memory import chat_settings

PERIODS = (("today", 0), ("7 days", 7), ("30 days", 30))


def day_start(zone: tzinfo, days_back: int = 0, now: float | None = None) -> float:
    """Midnight in `zone`, `days_back` days before today, as epoch seconds."""
    today = datetime.fromtimestamp(time.time() if now is None else now, zone).date() - timedelta(days=days_back)
    return datetime(today.year, today.month, today.day, tzinfo=zone).timestamp()


def month_start(zone: tzinfo) -> float:
    now = datetime.now(zone)
    return datetime(now.year, now.month, 1, tzinfo=zone).timestamp()


def money(cost: float | None, unknown: int = 0) -> str:
    whole_cents = cost is not None and abs(cost * 100 - round(cost * 100)) < 1e-9
    shown = "price unknown" if cost is None else (f"${cost:,.2f}" if whole_cents or cost >= 10 else f"${cost:,.4f}")
    return shown + (f" + {unknown} call{'s' if unknown != 1 else ''} of unknown price" if unknown and cost is not None
                    else "")


def _line(label: str, t: Totals | Row) -> str:
    spoken = f", {t.characters:,} characters read out" if t.characters else ""  # speech (bot/speech/cost.py)
    return (f"{label}: {t.calls} call{'s' if t.calls != 1 else ''}, {t.input_tokens:,} in / {t.output_tokens:,} out "
            f"tokens{spoken}, {money(t.cost_usd, t.unknown_calls)}")


def chat_usage(ledger: SqlLedger, ctx: CommandContext, zone: ZoneInfo, per_member: bool) -> str:
    """/usage: this chat's calls, tokens and cost for today, 7 and 30 days, by purpose (and per member)."""
    key = ctx.key
    lines = [f"Usage in this chat ({zone.key} days):"]
    for label, back in PERIODS:
        since = day_start(zone, back)
        total = ledger.totals(since, channel=key.channel, chat=key.chat_id)
        lines.append(_line(label.capitalize(), total))
        if total.calls:
            for row in ledger.report("purpose", since, channel=key.channel, chat=key.chat_id):
                lines.append("  " + _line(row.key or "other", row))
    if per_member:
        rows = ledger.report("person", day_start(zone, 30), channel=key.channel, chat=key.chat_id)
        if rows:
            lines.append("Per member, 30 days:")
            lines += ["  " + _line(row.key or "housekeeping (memory, reminders)", row) for row in rows]
    return "\n".join(lines)


def status_lines(ledger: SqlLedger, limits: Limits, ctx: CommandContext, zone: ZoneInfo,
                 unpriced: Unpriced | None = None) -> list[str]:
    """Today's spend against each limit that applies to this chat and its sender (none when no limit is set),
    the calls of unknown price a dollar limit could not count, and why (a model without a known price)."""
    s, key, person = limits.settings, ctx.key, ctx.sender_id or None
    chat_usd, chat_tokens = limits.chat_limits(key)
    owner_zone = s.zone
    today, mine = day_start(zone), {"channel": key.channel, "chat": key.chat_id}
    checks = [("this chat today", chat_usd, lambda: ledger.spent(today, key.channel, chat=key.chat_id),
               lambda: ledger.totals(today, channel=key.channel, chat=key.chat_id)),
              ("you today", s.person_daily_usd if person else None,
               lambda: ledger.spent(today, key.channel, person=person),
               lambda: ledger.totals(today, channel=key.channel, person=person)),
              ("everyone today", s.daily_usd, lambda: ledger.spent(day_start(owner_zone)),
               lambda: ledger.totals(day_start(owner_zone))),
              ("everyone this month", s.monthly_usd, lambda: ledger.spent(month_start(owner_zone)),
               lambda: ledger.totals(month_start(owner_zone)))]
    shown = [f"{label}: {money(spent().usd)} of {money(limit)}{_uncounted(totals().unknown_calls)}"
             for label, limit, spent, totals in checks if limit is not None]
    for label, limit, since, where in (("this chat today", chat_tokens, today, mine),
                                       ("everyone today", s.daily_tokens, day_start(owner_zone), {})):
        if limit is not None:
            shown.append(f"{label}: {ledger.spent(since, **where).unpriced_tokens:,} of {limit:,} tokens "
                         "of models without a known price")
    lines = [f"Spending ({', '.join(shown)})"] if shown else []
    if unpriced is not None and (note := unpriced.for_chat(key, owner=False, person=person is not None)):
        lines.append(note)
    return lines


def _uncounted(calls: int) -> str:
    return f" + {calls} call{'s' if calls != 1 else ''} of unknown price it cannot count" if calls else ""


def usage_command(ledger: SqlLedger, default_zone: str) -> Command:
    async def run(ctx: CommandContext, args: str) -> str:
        zone = chat_settings.zone_of(ctx.prefs, ZoneInfo(default_zone))
        return chat_usage(ledger, ctx, zone, per_member=ctx.is_group and ctx.may_erase)

    return Command("usage", "calls, tokens and cost in this chat (today, 7 and 30 days)", run)


def report_json(rows: Sequence[Row], by: str) -> list[dict[str, Any]]:
    """`tusk usage --json`: one object per group; `chat`/`person` as CHANNEL:ID, cost unrounded (null: unknown)."""
    out = []
    for row in rows:
        name = f"{row.channel}:{row.key}" if by in ("chat", "person") and row.key is not None else row.key
        out.append({by: name, "calls": row.calls, "input_tokens": row.input_tokens,
                    "output_tokens": row.output_tokens, "cached_tokens": row.cached_tokens,
                    "cost_usd": row.cost_usd, "unknown_price_calls": row.unknown_calls, "characters": row.characters})
    return out


def report_table(rows: Sequence[Row], by: str) -> str:
    """`tusk usage`: a plain table, costliest (or oldest day) first; a row's calls of unknown price are
    counted in their own column, never in its cost, and a line under the table says so."""
    if not rows:
        return "No model calls recorded in that period."
    header = f"{by:<32} {'calls':>7} {'input':>11} {'output':>10} {'cost (USD)':>14} {'no price':>9}"
    lines = [header, "-" * len(header)]
    for row in rows:
        name = f"{row.channel}:{row.key}" if by in ("chat", "person") and row.channel else (row.key or "(none)")
        cost = "unknown" if row.cost_usd is None else f"{row.cost_usd:.6f}"
        unpriced = f"{row.unknown_calls:,}" if row.unknown_calls else ""
        lines.append(f"{name[:32]:<32} {row.calls:>7} {row.input_tokens:>11,} {row.output_tokens:>10,} {cost:>14} "
                     f"{unpriced:>9}".rstrip())
    if any(row.unknown_calls for row in rows):
        lines.append("no price: calls of a model whose price is unknown, not in the cost (a price in TUSK_MODELS "
                     "counts them)")
    return "\n".join(lines)
