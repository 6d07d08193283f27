"""Spend limits (bot/usage/limits.py) over a real ledger in tmp_path."""

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from bot.events import ChatKey
from bot.usage.ledger import Call, Ledger
from bot.usage.limits import Limits, LimitSettings, Refusal, Reservation

UTC, PARIS = ZoneInfo("UTC"), ZoneInfo("Europe/Paris")
NOON = datetime(2026, 12, 3, 12, 0, tzinfo=UTC).timestamp()


class Clock:
    def __init__(self, now: float = NOON) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ledger(tmp_path):
    book = Ledger(tmp_path / "home")
    yield book
    book.close()


def spend(ledger, cost, chat="c1", person="p1", ts=NOON, tokens=(100, 10)):
    ledger.record(Call(ts, "telegram", chat, person, "reply", "m", *tokens, cost_usd=cost,
                       cost_source=None if cost is None else "provider"))


def test_fifty_concurrent_calls_overshoot_a_daily_limit_by_at_most_one_estimate(ledger):
    """50 threads each reserve $0.05 against $1, wait, record and settle: spend ends within $1 + $0.05."""
    limits = Limits(ledger, LimitSettings(daily_usd=1.0), Clock())

    def one_call(i: int) -> bool:
        verdict = limits.check("telegram", f"chat{i}", f"p{i}", 0.05, 500, "reply")
        if isinstance(verdict, Refusal):
            return False
        time.sleep(0.02)  # the provider answering while the others check
        spend(ledger, 0.05, chat=f"chat{i}", person=f"p{i}")
        verdict.settle()
        return True

    with ThreadPoolExecutor(50) as pool:
        allowed = sum(pool.map(one_call, range(50)))
    spent = ledger.totals().cost_usd
    assert spent <= 1.0 + 0.05
    assert allowed >= 19  # the limit is used, not refused early
    assert isinstance(limits.check("telegram", "late", None, 0.05, 500, "reply"), Refusal)


def test_a_released_reservation_frees_its_share(ledger):
    """A failed call's release() gives its estimate back; settle() twice changes nothing."""
    limits = Limits(ledger, LimitSettings(chat_daily_usd=0.10), Clock())
    first = limits.check("telegram", "c1", None, 0.08, 100, "reply")
    assert isinstance(limits.check("telegram", "c1", None, 0.05, 100, "reply"), Refusal)
    first.release()
    first.settle()
    assert isinstance(limits.check("telegram", "c1", None, 0.05, 100, "reply"), Reservation)


def test_a_per_chat_override_raises_one_chats_limit(ledger):
    """budgets.json gives c1 $2 while c2 keeps the $0.50 default; the file is 0600 and clear_override undoes it."""
    limits = Limits(ledger, LimitSettings(chat_daily_usd=0.50), Clock())
    spend(ledger, 1.0, chat="c1")
    spend(ledger, 1.0, chat="c2")
    assert isinstance(limits.check("telegram", "c1", None, 0.01, 10, "reply"), Refusal)
    limits.set_override(ChatKey("telegram", "c1"), 2.0)
    assert isinstance(limits.check("telegram", "c1", None, 0.01, 10, "reply"), Reservation)
    assert isinstance(limits.check("telegram", "c2", None, 0.01, 10, "reply"), Refusal)
    path = ledger.home / "budgets.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text())["chats"] == [{"channel": "telegram", "chat": "c1", "daily_usd": 2.0}]
    assert limits.clear_override(ChatKey("telegram", "c1")) and not limits.clear_override(ChatKey("telegram", "c1"))
    assert isinstance(limits.check("telegram", "c1", None, 0.01, 10, "reply"), Refusal)


def test_an_override_written_by_another_process_reaches_a_running_limits(ledger):
    """`tusk budget` writes budgets.json from its own process: the running Limits reads it at its next check."""
    running = Limits(ledger, LimitSettings(chat_daily_usd=0.50), Clock())
    spend(ledger, 1.0, chat="c1")
    assert isinstance(running.check("telegram", "c1", None, 0.01, 10, "reply"), Refusal)
    Limits(Ledger(ledger.home), LimitSettings(), Clock()).set_override(ChatKey("telegram", "c1"), 5.0)
    assert isinstance(running.check("telegram", "c1", None, 0.01, 10, "reply"), Reservation)


def test_consolidation_may_go_just_past_a_limit_that_stops_replies(ledger):
    """At a spent $1 limit a reply is refused; consolidation still runs while spending is within its 5% reserve
    past the limit (whatever its own estimate), and not once spending is past it."""
    limits = Limits(ledger, LimitSettings(chat_daily_usd=1.0, daily_usd=1.0), Clock())
    spend(ledger, 1.0)
    assert isinstance(limits.check("telegram", "c1", None, 0.01, 100, "reply"), Refusal)
    held = limits.check("telegram", "c1", None, 0.04, 100, "consolidation")
    assert isinstance(held, Reservation)
    held.release()
    spend(ledger, 0.06)
    assert isinstance(limits.check("telegram", "c1", None, 0.001, 100, "consolidation"), Refusal)


def test_the_refusal_names_the_limit_and_midnight_in_the_chats_zone(ledger):
    """At 22:30 UTC a Paris chat's limit resets at 00:00 Paris (23:00 UTC), and a new day allows calls again."""
    clock = Clock(datetime(2026, 12, 3, 22, 30, tzinfo=UTC).timestamp())
    limits = Limits(ledger, LimitSettings(chat_daily_usd=0.50), clock)
    spend(ledger, 0.5, ts=clock.now - 60)
    refusal = limits.check("telegram", "c1", "p1", 0.01, 100, "reply", zone=PARIS)
    assert isinstance(refusal, Refusal) and refusal.limit == "chat_daily"
    assert refusal.resets_at == datetime(2026, 12, 4, 0, 0, tzinfo=PARIS)
    assert refusal.sentence() == ("This chat has reached its daily spending limit ($0.50); "
                                  "it resets at midnight (Europe/Paris).")
    clock.now = datetime(2026, 12, 3, 23, 0, 1, tzinfo=UTC).timestamp()
    assert isinstance(limits.check("telegram", "c1", "p1", 0.01, 100, "reply", zone=PARIS), Reservation)


def test_person_and_monthly_limits_have_their_own_sentences(ledger):
    """A person's limit counts their calls in every chat; the monthly one resets on the 1st in the owner's zone."""
    limits = Limits(ledger, LimitSettings(person_daily_usd=0.20, monthly_usd=3.0), Clock())
    spend(ledger, 0.15, chat="c1", person="ann")
    spend(ledger, 0.05, chat="c2", person="ann")
    refusal = limits.check("telegram", "c3", "ann", 0.01, 100, "reply")
    assert refusal.sentence() == "You have reached your daily spending limit ($0.20); it resets at midnight (UTC)."
    spend(ledger, 2.9, chat="c9", person="bob", ts=NOON - 2 * 86400)
    refusal = Limits(ledger, LimitSettings(monthly_usd=3.0), Clock()).check("telegram", "c4", None, 0.01, 1, "reply")
    assert refusal.sentence() == ("This bot has reached its monthly spending limit ($3.00); it resets on 1 January "
                                  "at midnight (UTC).")


def test_a_refusal_short_of_the_limit_says_this_messages_estimate_would_pass_it(ledger):
    """At $0.0357 of $0.05 a call estimated at $0.015 is refused with both figures, not as a limit reached;
    a token limit says the same in tokens, and the owner's monthly one names this month."""
    limits = Limits(ledger, LimitSettings(chat_daily_usd=0.05, chat_daily_tokens=1000, monthly_usd=3.0), Clock())
    spend(ledger, 0.0357)
    refusal = limits.check("telegram", "c1", "p1", 0.015, 100, "reply")
    assert isinstance(refusal, Refusal) and not refusal.reached
    assert refusal.sentence() == ("Answering this message would cost about $0.015, more than is left of this chat's "
                                  "daily spending limit ($0.05): $0.0357 already spent today; it resets at midnight "
                                  "(UTC).")
    spend(ledger, None, chat="c2", tokens=(800, 80))
    refusal = limits.check("telegram", "c2", None, None, 200, "reply")
    assert refusal.sentence() == ("Answering this message would take about 200 tokens, more than is left of this "
                                  "chat's daily limit of 1,000 tokens for models without a known price: 880 already "
                                  "used today; it resets at midnight (UTC).")
    spend(ledger, 2.96, chat="c3", ts=NOON - 86400)
    refusal = limits.check("telegram", "c5", None, 0.01, 1, "reply")
    assert refusal.sentence() == ("Answering this message would cost about $0.01, more than is left of this bot's "
                                  "monthly spending limit ($3.00): $2.9957 already spent this month; it resets on "
                                  "1 January at midnight (UTC).")


def test_an_unknown_price_counts_tokens_against_the_token_limit(ledger):
    """Unpriced calls of 880 tokens leave a 1,000-token chat limit no room for 200 more; priced calls go on."""
    limits = Limits(ledger, LimitSettings(chat_daily_tokens=1000, chat_daily_usd=1.0), Clock())
    spend(ledger, None, tokens=(800, 80))
    refusal = limits.check("telegram", "c1", None, None, 200, "reply")
    assert isinstance(refusal, Refusal) and (refusal.limit, refusal.spent) == ("chat_daily_tokens", 880)
    assert "1,000 tokens" in refusal.sentence()
    assert isinstance(limits.check("telegram", "c1", None, None, 100, "reply"), Reservation)
    assert isinstance(limits.check("telegram", "c1", None, 0.01, 5000, "reply"), Reservation)


def test_a_chats_own_token_limit_replaces_the_default_for_unpriced_calls(ledger):
    """budgets.json's daily_tokens for c1 stops its unpriced calls at 500 tokens while c2 keeps the 1,000 default;
    setting the USD limit later keeps the token one, and both are in the file."""
    limits = Limits(ledger, LimitSettings(chat_daily_tokens=1000), Clock())
    limits.set_override(ChatKey("telegram", "c1"), daily_tokens=500)
    limits.set_override(ChatKey("telegram", "c1"), 0.25)
    spend(ledger, None, chat="c1", tokens=(400, 40))
    spend(ledger, None, chat="c2", tokens=(400, 40))
    refusal = limits.check("telegram", "c1", None, None, 100, "reply")
    assert isinstance(refusal, Refusal) and (refusal.limit, refusal.limit_value) == ("chat_daily_tokens", 500)
    assert isinstance(limits.check("telegram", "c2", None, None, 100, "reply"), Reservation)
    assert json.loads((ledger.home / "budgets.json").read_text())["chats"] == [
        {"channel": "telegram", "chat": "c1", "daily_usd": 0.25, "daily_tokens": 500}]


def test_an_erased_chats_spend_still_counts_toward_its_limit(ledger):
    """/forget removes the chat's ids from the ledger, not its spend for today's limit."""
    spend(ledger, 0.5)
    ledger.erase_chat("telegram", "c1")
    limits = Limits(ledger, LimitSettings(chat_daily_usd=0.50), Clock())
    assert isinstance(limits.check("telegram", "c1", None, 0.01, 100, "reply"), Refusal)


def test_the_owner_is_told_once_per_limit_per_day(ledger):
    """notice_due is True for a limit's first refusal of the day, then False until the next day."""
    clock = Clock()
    limits = Limits(ledger, LimitSettings(chat_daily_usd=0.10), clock)
    spend(ledger, 0.10)
    spend(ledger, 0.10, chat="c2")
    first = limits.check("telegram", "c1", None, 0.01, 100, "reply")
    assert limits.notice_due(first) and not limits.notice_due(limits.check("telegram", "c1", None, 0.01, 1, "reply"))
    assert limits.notice_due(limits.check("telegram", "c2", None, 0.01, 100, "reply"))
    clock.now += 86400
    spend(ledger, 0.10, ts=clock.now)
    assert limits.notice_due(limits.check("telegram", "c1", None, 0.01, 100, "reply"))


def test_checks_use_cached_sums_kept_current_by_recorded_calls(ledger, monkeypatch):
    """After the first check no check reads SQLite; calls recorded meanwhile still count."""
    limits = Limits(ledger, LimitSettings(chat_daily_usd=0.10), Clock())
    assert isinstance(limits.check("telegram", "c1", None, 0.01, 100, "reply"), Reservation)
    reads = []
    monkeypatch.setattr(ledger, "spent", lambda *a, **k: reads.append(a))
    spend(ledger, 0.09)
    assert isinstance(limits.check("telegram", "c1", None, 0.01, 100, "reply"), Refusal)  # 0.09 + 0.01 held + 0.01
    assert reads == []
