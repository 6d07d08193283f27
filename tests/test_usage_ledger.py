"""The usage ledger on both backends (bot/usage/ledger.py on a real SQLite file, bot/usage/ledger_pg.py on a
real PostgreSQL server) giving the same figures, and call prices (bot/usage/prices.py)."""

import os
import random
import sqlite3
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.usage.ledger import FILE, MIGRATIONS, Call, Ledger, LedgerTooNew
from bot.usage.ledger_pg import PgLedger
from bot.usage.prices import ModelChoice, ModelPrice, configured_prices, parse_models, price
from memory.paths import UnsafePathError
from tests import procs

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 12, 3, 15, 0, tzinfo=ZoneInfo("UTC")).timestamp()


def call(chat="c1", person="p1", cost=0.01, ts=NOW, purpose="reply", model="openai/gpt-4o-mini", channel="telegram",
         tokens=(100, 20, 0)) -> Call:
    return Call(ts, channel, chat, person, purpose, model, *tokens, cost_usd=cost,
                cost_source=None if cost is None else "litellm", latency_ms=120.0)


@pytest.fixture(params=["files", "postgres"])
def ledger(request, tmp_path):
    """A new, empty ledger: usage.sqlite under a home, or the usage tables of a fresh database."""
    book = Ledger(tmp_path / "home") if request.param == "files" else PgLedger(request.getfixturevalue("shared_db"))
    yield book
    book.close()


def count(ledger, where: str) -> int:
    """Rows of the ledger's table matching `where`, read past the ledger's own interface."""
    if isinstance(ledger, PgLedger):
        with ledger.db.connection() as conn:
            return conn.execute(f"SELECT count(*) FROM usage_calls WHERE {where}").fetchone()[0]
    db = sqlite3.connect(ledger.path)
    try:
        return db.execute(f"SELECT count(*) FROM calls WHERE {where}").fetchone()[0]
    finally:
        db.close()


def test_the_database_and_its_wal_files_are_owner_only_under_umask_000(tmp_path):
    """usage.sqlite, -wal and -shm are 0600 and $TUSK_HOME 0700 even with umask 000."""
    old = os.umask(0)
    try:
        book = Ledger(tmp_path / "home")
        book.record(call())
    finally:
        os.umask(old)
    home = tmp_path / "home"
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in home.iterdir()}
    assert modes == {FILE: "0o600", f"{FILE}-wal": "0o600", f"{FILE}-shm": "0o600"}
    assert home.stat().st_mode & 0o777 == 0o700
    book.close()


def test_a_symlinked_database_is_refused(tmp_path):
    """usage.sqlite is never opened through a symlink."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / FILE).symlink_to(tmp_path / "elsewhere.sqlite")
    with pytest.raises(UnsafePathError):
        Ledger(home).record(call())
    assert not (tmp_path / "elsewhere.sqlite").exists()


def test_the_schema_is_versioned_and_a_newer_one_is_refused(tmp_path):
    """user_version is the number of migrations applied; a file from a newer Tusk is not touched."""
    ledger = Ledger(tmp_path / "home")
    ledger.record(call())
    ledger.close()
    db = sqlite3.connect(ledger.path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(LedgerTooNew, match="upgrade Tusk"):
        Ledger(ledger.home).totals()


def test_a_recorded_call_survives_kill_9_of_the_process_that_recorded_it(tmp_path):
    """A child records one call and SIGKILLs itself at once: the reopened ledger has the call."""
    home = tmp_path / "home"
    code = ("import os; from bot.usage.ledger import Call, Ledger; "
            f"Ledger({str(home)!r}).record(Call(1.0, 'telegram', 'c1', 'p1', 'reply', 'm', 7, 3, cost_usd=0.25, "
            "cost_source='provider')); os.kill(os.getpid(), 9)")
    done = procs.run([sys.executable, "-c", code], env=procs.clean_env(PYTHONPATH=str(REPO)), timeout=60)
    assert done.returncode == -9
    totals = Ledger(home).totals(channel="telegram", chat="c1")
    assert (totals.calls, totals.input_tokens, totals.output_tokens, totals.cost_usd) == (1, 7, 3, 0.25)


def test_a_call_recorded_in_the_database_survives_kill_9_of_the_process_that_recorded_it(shared_db, pg_url):
    """A child records one call through PgLedger and SIGKILLs itself at once: another pool reads the call."""
    code = ("import os; from bot.usage.ledger import Call; from bot.usage.ledger_pg import PgLedger; "
            "from store.postgres.pool import SyncDatabase; "
            "PgLedger(SyncDatabase(os.environ['URL'])).record(Call(1.0, 'telegram', 'c1', 'p1', 'reply', 'm', 7, 3, "
            "cost_usd=0.25, cost_source='provider')); os.kill(os.getpid(), 9)")
    done = procs.run([sys.executable, "-c", code], env=procs.clean_env(PYTHONPATH=str(REPO), URL=pg_url), timeout=60)
    assert done.returncode == -9
    totals = PgLedger(shared_db).totals(channel="telegram", chat="c1")
    assert (totals.calls, totals.input_tokens, totals.output_tokens, totals.cost_usd) == (1, 7, 3, 0.25)


def calls_of_a_month(seed: int) -> list[Call]:
    """Calls over six weeks: two channels, chats, people, models, purposes, unknown prices, some at the very
    edge of a quarter hour or a day; costs exact in binary (a float sum's last bit depends on the order rows are
    summed in, which neither database promises)."""
    rnd = random.Random(seed)
    start = NOW - 42 * 86400
    made = []
    for i in range(400):
        ts = start + rnd.randrange(42 * 96) * 900 + rnd.choice([0, 0.25, 899.75, rnd.uniform(0, 900)])
        priced = rnd.random() < 0.8
        made.append(Call(ts, rnd.choice(["telegram", "slack"]), rnd.choice(["c1", "c2", "-100", "ü", None]),
                         rnd.choice(["p1", "p2", "p3", None]), rnd.choice(["reply", "consolidation", "speech"]),
                         rnd.choice(["openai/gpt-4o-mini", "openai/tiny"]), rnd.randrange(5000), rnd.randrange(900),
                         rnd.randrange(100), estimated=rnd.random() < 0.1,
                         cost_usd=rnd.randrange(1, 4096) / 1024 if priced else None,
                         cost_source="litellm" if priced else None, latency_ms=rnd.uniform(5, 900),
                         characters=rnd.randrange(300)))
    return made


def figures(book) -> dict:
    """Every figure the ledger gives: reports by each group in three zones and under filters, totals, spent
    for the owner, chats and people, each model's priced and unpriced calls."""
    out: dict = {}
    zones = [ZoneInfo("UTC"), ZoneInfo("America/New_York"), ZoneInfo("Asia/Kathmandu")]  # +05:45: quarter hours
    for by in ("day", "chat", "person", "model", "purpose"):
        for zone in zones:
            out[by, zone.key] = book.report(by, zone=zone)
        out[by, "window"] = book.report(by, since=NOW - 20 * 86400, until=NOW - 3 * 86400 + 450)
        out[by, "chat"] = book.report(by, channel="telegram", chat="c1")
        out[by, "person"] = book.report(by, channel="slack", person="p2", since=NOW - 10 * 86400)
    for channel in ("telegram", "slack"):
        for ident in ("c1", "c2", "-100", "ü", "nobody"):
            out["spent chat", channel, ident] = book.spent(NOW - 30 * 86400, channel, chat=ident)
            out["totals chat", channel, ident] = book.totals(channel=channel, chat=ident)
        for ident in ("p1", "p2", "p3"):
            out["spent person", channel, ident] = book.spent(NOW - 30 * 86400, channel, person=ident)
    out["spent"] = book.spent(NOW - 7 * 86400)
    out["totals"] = book.totals()
    out["models"] = [book.model_calls(m, NOW - 14 * 86400) for m in ("openai/gpt-4o-mini", "openai/tiny")]
    return out


def test_both_backends_give_the_same_figures_before_and_after_erasure(tmp_path, shared_db):
    """The same 400 calls in usage.sqlite and in the database: every report, total and spent figure is equal,
    also after /forget of a chat and of people (their spend still found through the limit keys) and after the
    old keys are pruned."""
    files, database = Ledger(tmp_path / "home"), PgLedger(shared_db)
    for c in calls_of_a_month(7):
        assert files.record(c) == database.record(c)
    assert figures(files) == figures(database)
    erased = [(book.erase_chat("telegram", "c1"), book.erase_person("slack", "c2", "p1"),
               book.erase_person_everywhere("telegram", "p3")) for book in (files, database)]
    assert erased[0] == erased[1] and all(erased[0])
    assert figures(files) == figures(database)
    assert files.spent(0, "telegram", chat="c1").usd > 0  # found through its limit key
    assert files.prune_limit_keys(now=NOW, days=20) == database.prune_limit_keys(now=NOW, days=20) > 0
    assert figures(files) == figures(database)
    files.close()


def test_an_unknown_cost_stays_unknown_in_totals_and_reports(ledger):
    """A call without a price is counted as unknown, never summed as $0."""
    ledger.record(call(chat="priced", cost=0.02))
    ledger.record(call(chat="local", cost=None, model="openai/tiny"))
    ledger.record(call(chat="local", cost=None, model="openai/tiny"))
    both = ledger.totals()
    assert (both.calls, both.cost_usd, both.unknown_calls) == (3, 0.02, 2)
    local = ledger.totals(channel="telegram", chat="local")
    assert (local.calls, local.cost_usd, local.unknown_calls) == (2, None, 2)
    rows = {r.key: r for r in ledger.report("chat")}
    assert rows["local"].cost_usd is None and rows["local"].unknown_calls == 2
    assert rows["priced"].cost_usd == 0.02 and rows["priced"].unknown_calls == 0
    assert {r.key: r.cost_usd for r in ledger.report("model")} == {"openai/gpt-4o-mini": 0.02, "openai/tiny": None}


def test_totals_of_nothing_are_zero(ledger):
    """No calls in the range: $0 spent, not an unknown price."""
    assert ledger.totals(since=NOW + 1).cost_usd == 0.0


def test_a_report_by_day_folds_calls_into_days_of_the_zone_asked(ledger):
    """23:30 and 00:30 UTC are one day in New York and two in UTC, oldest first."""
    ledger.record(call(ts=datetime(2026, 12, 2, 23, 30, tzinfo=ZoneInfo("UTC")).timestamp(), cost=0.1))
    ledger.record(call(ts=datetime(2026, 12, 3, 0, 30, tzinfo=ZoneInfo("UTC")).timestamp(), cost=0.2))
    utc = ledger.report("day")
    assert [(r.key, r.calls, r.cost_usd) for r in utc] == [("2026-12-02", 1, 0.1), ("2026-12-03", 1, 0.2)]
    ny = ledger.report("day", zone=ZoneInfo("America/New_York"))
    assert [(r.key, r.calls) for r in ny] == [("2026-12-02", 2)]


def test_reports_group_by_person_and_purpose_and_filter_by_chat(ledger):
    """Rows per person (with channel) and per purpose, costliest first, within one chat."""
    ledger.record(call(person="ann", cost=0.03))
    ledger.record(call(person="bob", cost=0.01, purpose="consolidation"))
    ledger.record(call(chat="other", person="bob", cost=0.5))
    people = ledger.report("person", channel="telegram", chat="c1")
    assert [(r.channel, r.key, r.cost_usd) for r in people] == [("telegram", "ann", 0.03), ("telegram", "bob", 0.01)]
    assert [r.key for r in ledger.report("purpose", channel="telegram", chat="c1")] == ["reply", "consolidation"]
    with pytest.raises(ValueError, match="report by 'weekday'"):
        ledger.report("weekday")
    with pytest.raises(ValueError, match="only with its channel"):
        ledger.report("person", chat="c1")


def test_groups_of_equal_cost_are_listed_by_their_ids(ledger):
    """Two chats of the same cost and calls come in the order of their ids (housekeeping, no chat, first)."""
    for chat in ("b", "a", None):
        ledger.record(call(chat=chat, cost=0.5))
    assert [r.key for r in ledger.report("chat")] == [None, "a", "b"]


def test_erasing_a_chat_removes_its_ids_but_its_spend_still_counts_toward_limits(ledger):
    """After erase_chat no row names the chat or its people; spent() for the chat and person is unchanged."""
    ledger.record(call(chat="c1", person="p1", cost=0.25))
    ledger.record(call(chat="c1", person="p2", cost=0.5))
    ledger.record(call(chat="c2", person="p1", cost=1.0))
    before = ledger.spent(0, "telegram", chat="c1"), ledger.spent(0, "telegram", person="p1")
    assert ledger.erase_chat("telegram", "c1") == 2
    assert ledger.totals(channel="telegram", chat="c1").calls == 0
    assert ledger.totals(channel="telegram", person="p2").calls == 0
    assert ledger.totals().cost_usd == 1.75
    assert (ledger.spent(0, "telegram", chat="c1"), ledger.spent(0, "telegram", person="p1")) == before
    assert count(ledger, "chat = 'c1' OR person = 'p2'") == 0
    assert count(ledger, "erased = 1") == 2


def test_erasing_a_person_keeps_the_chat_and_the_persons_limit_spend(ledger):
    """erase_person clears one person in one chat; erase_person_everywhere in every chat of the channel."""
    ledger.record(call(chat="c1", person="p1", cost=0.25))
    ledger.record(call(chat="c2", person="p1", cost=0.5))
    ledger.record(call(chat="c1", person="p2", cost=0.1))
    assert ledger.erase_person("telegram", "c1", "p1") == 1
    assert ledger.totals(channel="telegram", person="p1").calls == 1
    assert ledger.totals(channel="telegram", chat="c1").calls == 2
    assert ledger.erase_person_everywhere("telegram", "p1") == 1
    assert ledger.totals(channel="telegram", person="p1").calls == 0
    assert ledger.spent(0, "telegram", person="p1").usd == 0.75
    assert ledger.spent(0, "discord", person="p1").usd == 0


def test_limit_keys_older_than_40_days_are_pruned(ledger):
    """prune_limit_keys drops old erased rows' keys (their spend no longer counts for the chat) and keeps new ones."""
    ledger.record(call(ts=NOW - 41 * 86400, cost=0.25))
    ledger.record(call(ts=NOW - 86400, cost=0.5))
    ledger.erase_chat("telegram", "c1")
    assert ledger.prune_limit_keys(now=NOW) == 1
    assert ledger.spent(0, "telegram", chat="c1").usd == 0.5
    assert ledger.totals().cost_usd == 0.75


def test_the_provider_figure_wins_over_every_table():
    """A cost the provider sent is used as it is, even $0."""
    assert price("openai/gpt-4o-mini", 1000, 500, 0, 0.0, {}) == (0.0, "provider")
    assert price("openai/tiny", 10, 10, 0, 0.123, {"openai/tiny": ModelPrice(1, 1)}) == (0.123, "provider")


def test_litellm_prices_a_model_it_knows():
    """openai/gpt-4o-mini at $0.15/$0.60 per million tokens, cached input cheaper."""
    cost, source = price("openai/gpt-4o-mini", 1_000_000, 1_000_000, 0, None, {})
    assert source == "litellm" and cost == pytest.approx(0.75)
    cached, _ = price("openai/gpt-4o-mini", 1_000_000, 0, 500_000, None, {})
    assert cached < 0.15


def test_the_owners_price_serves_a_model_litellm_does_not_know_and_else_it_is_unknown():
    """openai/tiny is priced from TUSK_MODELS; a model nobody prices is (None, None)."""
    configured = configured_prices(parse_models("local=openai/tiny@0.5/2"))
    assert price("openai/tiny", 2_000_000, 1_000_000, 0, None, configured) == (3.0, "configured")
    assert price("openai/nobody-knows", 10, 10, 0, None, configured) == (None, None)


def test_tusk_models_are_parsed_with_optional_prices():
    """Labels map to models; @IN/OUT is a price; an @ in a model name stays in the name."""
    models = parse_models(" fast=openai/gpt-4o-mini, local=openai/tiny@0/0,"
                          "vx=vertex_ai/claude-3-5-sonnet@20240620, big=openai/big@2.5/10,")
    assert models == {"fast": ModelChoice("fast", "openai/gpt-4o-mini"),
                      "local": ModelChoice("local", "openai/tiny", ModelPrice(0, 0)),
                      "vx": ModelChoice("vx", "vertex_ai/claude-3-5-sonnet@20240620"),
                      "big": ModelChoice("big", "openai/big", ModelPrice(2.5, 10))}


@pytest.mark.parametrize(("text", "message"), [
    ("openai/gpt-4o-mini", "is not label=model"), ("fast=", "is not label=model"),
    ("my model=openai/x", "the label 'my model'"), ("a=openai/x,a=openai/y", "used twice"),
    ("a=openai/x@1/", "a price is written @IN/OUT"), ("a=@1/2", "names no model"),
])
def test_a_bad_tusk_models_entry_is_named_in_the_error(text, message):
    """Each malformed entry fails with a ValueError quoting the entry and saying how to write it."""
    with pytest.raises(ValueError, match=message):
        parse_models(text)
