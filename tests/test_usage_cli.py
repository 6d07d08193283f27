"""`tusk usage` and `tusk budget`, run as the owner runs them, on a ledger seeded with known calls."""

import json
import stat
import sys
from datetime import datetime, timezone

import pytest

from bot.usage.ledger import Call, Ledger
from bot.usage.view import day_start
from tests import procs
from tests.test_startup import imported

UTC = timezone.utc
TODAY = day_start(UTC) + 1  # a second past midnight: today whatever the hour the test runs
TEN_DAYS_AGO = day_start(UTC, 10) + 1


def env(home, **extra):
    return procs.clean_env(TUSK_HOME=home, TUSK_TIMEZONE="UTC", **extra)


def tusk(*args, home, **extra):
    """(exit code, stdout, stderr) of `tusk *args`."""
    out = procs.run([sys.executable, "-m", "bot.ops.cli", *args], env=env(home, **extra), capture_output=True,
                    text=True, timeout=60)
    return out.returncode, out.stdout, out.stderr


@pytest.fixture
def home(tmp_path):
    """A data dir whose ledger holds two chats: telegram:-100 (priced calls, one of them ten days old)
    and http:alice (a model with an unknown price)."""
    home = tmp_path / "data"
    ledger = Ledger(home)
    for call in (Call(TODAY, "telegram", "-100", "7", "reply", "openai/gpt-4o-mini", 1000, 200, 100,
                      cost_usd=0.00123, cost_source="litellm"),
                 Call(TODAY + 5, "telegram", "-100", "8", "consolidation", "openai/gpt-4o-mini", 3000, 50,
                      cost_usd=0.0007, cost_source="provider"),
                 Call(TEN_DAYS_AGO, "telegram", "-100", "7", "reply", "openai/gpt-4o-mini", 500, 20,
                      cost_usd=0.25, cost_source="provider"),
                 Call(TODAY + 9, "http", "alice", "alice", "reply", "local/llama", 300, 40)):
        ledger.record(call)
    ledger.close()
    return home


def test_json_by_chat_has_exact_figures_and_null_for_an_unknown_price(home):
    """`--by chat --json`: one object per chat, CHANNEL:ID, summed tokens, the cost unrounded, null when unknown."""
    code, out, err = tusk("usage", "--by", "chat", "--json", home=home)
    assert code == 0, err
    rows = {r["chat"]: r for r in json.loads(out)}
    ledger = Ledger(home)
    summed = ledger.totals(channel="telegram", chat="-100").cost_usd  # SQLite's sum, to the last bit
    ledger.close()
    assert summed == pytest.approx(0.25193, abs=1e-15)
    assert rows["telegram:-100"] == {"chat": "telegram:-100", "calls": 3, "input_tokens": 4500, "output_tokens": 270,
                                     "cached_tokens": 100, "cost_usd": summed, "unknown_price_calls": 0,
                                     "characters": 0}
    assert rows["http:alice"]["cost_usd"] is None and rows["http:alice"]["calls"] == 1
    assert list(rows) == ["telegram:-100", "http:alice"]  # costliest first, unknown last


def test_since_takes_periods_and_dates(home):
    """`--since today` and `7d` leave out the call ten days old; `30d` and a date before it take it in."""
    def calls(since):
        code, out, err = tusk("usage", "--by", "chat", "--json", "--since", since, home=home)
        assert code == 0, err
        return {r["chat"]: r["calls"] for r in json.loads(out)}

    ten_days_ago = datetime.fromtimestamp(TEN_DAYS_AGO, UTC).date().isoformat()
    assert calls("today") == calls("7d") == {"telegram:-100": 2, "http:alice": 1}
    assert calls("30d") == calls(ten_days_ago) == {"telegram:-100": 3, "http:alice": 1}
    code, _, err = tusk("usage", "--since", "last week", home=home)
    assert code == 2 and "7d or 30d, today, or a date such as 2026-11-01" in err


def test_the_table_shows_days_and_todays_spend_against_the_limits(home):
    """The default report is by day; below it, today's spend against the owner's limit and a chat at its own."""
    code, out, _ = tusk("budget", "set", "telegram:-100", "0.001", home=home)
    assert code == 0
    code, out, err = tusk("usage", home=home, TUSK_LIMIT_DAILY_USD="5")
    assert code == 0, err
    today = datetime.fromtimestamp(TODAY, UTC).date().isoformat()
    day = next(line for line in out.splitlines() if line.startswith(today)).split()
    assert day[1:] == ["3", "4,300", "290", "0.001930", "1"]  # the unknown price in its own column, never as 0
    assert "no price: calls of a model whose price is unknown, not in the cost" in out
    assert "everyone today: $0.0019 of $5.00" in out
    assert "chat telegram:-100 today: $0.0019 of $0.0010 (own limit) - REACHED" in out
    code, out, _ = tusk("usage", "--by", "model", home=home)
    assert "local/llama" in out and "unknown" in out


def test_no_ledger_no_data_dir_created_and_litellm_never_imported(tmp_path):
    """Before any call `tusk usage` says so and exits 0, creating no data dir; it never imports litellm."""
    home = tmp_path / "data"
    assert tusk("usage", home=home)[:2] == (0, "No model calls recorded yet.\n")
    assert tusk("usage", "--json", home=home)[:2] == (0, "[]\n")
    assert not home.exists()
    home.mkdir()
    assert tusk("usage", "--by", "chat", home=home)[0] == 0 and list(home.iterdir()) == []
    modules, code = imported(tmp_path, env(home), "usage", "--by", "person")
    assert code == 0 and "litellm" not in modules


def test_budget_set_list_clear(home):
    """`budget set` writes budgets.json (0600), `list` shows it with the defaults, `clear` removes it."""
    assert tusk("budget", "set", "telegram:-100", "2.5", home=home)[0] == 0
    assert tusk("budget", "set", "http:alice", "$0", home=home)[0] == 0
    path = home / "budgets.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["chats"] == [{"channel": "http", "chat": "alice", "daily_usd": 0.0},
                                                     {"channel": "telegram", "chat": "-100", "daily_usd": 2.5}]
    code, out, _ = tusk("budget", "list", home=home, TUSK_CHAT_LIMIT_DAILY_USD="1")
    assert code == 0 and "each chat, daily: $1.00" in out and "telegram:-100  $2.50" in out
    code, out, _ = tusk("budget", "clear", "telegram:-100", home=home)
    assert code == 0 and "back to the default daily limit (none)" in out
    assert [c["chat"] for c in json.loads(path.read_text())["chats"]] == ["alice"]
    code, _, err = tusk("budget", "clear", "telegram:-100", home=home)
    assert code == 1 and "has no limit of its own" in err


@pytest.mark.parametrize("args, message", [(("set", "telegram", "1"), "give a chat as CHANNEL:ID"),
                                           (("set", "Tele gram:1", "1"), "bad channel name"),
                                           (("set", "telegram:1", "-1"), "in USD, 0 or more"),
                                           (("set", "telegram:1", "lots"), "in USD, 0 or more"),
                                           (("clear", "nochat"), "give a chat as CHANNEL:ID")])
def test_budget_refuses_a_bad_chat_or_amount(tmp_path, args, message):
    """A chat not written CHANNEL:ID, or an amount that is not 0 or more dollars, is a usage error."""
    code, _, err = tusk("budget", *args, home=tmp_path / "data")
    assert code == 2 and message in err and not (tmp_path / "data").exists()


def test_a_damaged_budgets_file_is_named(home):
    """A budgets.json that is not JSON is a one-line error naming the file and the fix."""
    (home / "budgets.json").write_text("{")
    code, _, err = tusk("budget", "list", home=home)
    assert code == 1 and "budgets.json is not JSON" in err and "Traceback" not in err



def test_a_bare_budget_lists_the_limits(home):
    """`tusk budget` without an action lists the defaults and the chats' own limits, as `budget list` does."""
    code, out, err = tusk("budget", home=home, TUSK_CHAT_LIMIT_DAILY_USD="1")
    assert code == 0 and out == tusk("budget", "list", home=home, TUSK_CHAT_LIMIT_DAILY_USD="1")[1], err
    assert "each chat, daily: $1.00" in out


def test_a_usd_limit_on_a_model_without_a_price_is_said_to_count_nothing_where_it_is_set(tmp_path):
    """`budget set` on a chat whose model has no known price says the limit cannot count its calls and what
    can (a price in TUSK_MODELS, or `--tokens`); with a TUSK_MODELS price nothing is said. `--tokens` sets the
    chat's own token limit beside its USD one; neither given is an error."""
    home = tmp_path / "data"
    code, out, err = tusk("budget", "set", "terminal:local", "0.01", home=home, TUSK_MODEL="openai/tiny")
    assert code == 0, err
    assert out == ("terminal:local may now spend $0.01 a day (a running Tusk applies it at once).\n"
                   "Note: openai/tiny has no known price, so a dollar limit cannot count its calls: give it a price "
                   "in TUSK_MODELS (tiny=openai/tiny@IN/OUT, USD per million input/output tokens), or set a token "
                   "limit (tusk budget set terminal:local --tokens 20000).\n")
    code, out, err = tusk("budget", "set", "terminal:local", "--tokens", "20,000", home=home, TUSK_MODEL="openai/tiny")
    assert code == 0 and "may now use 20,000 tokens a day of models without a known price" in out, err
    assert json.loads((home / "budgets.json").read_text())["chats"] == [
        {"channel": "terminal", "chat": "local", "daily_usd": 0.01, "daily_tokens": 20000}]
    code, out, err = tusk("budget", "set", "terminal:local", "0.02", home=home, TUSK_MODEL="openai/tiny",
                          TUSK_MODELS="local=openai/tiny@0.5/1.5")
    assert code == 0 and "Note" not in out, out
    assert "terminal:local  $0.02, 20,000 tokens" in tusk("budget", home=home)[1]
    code, _, err = tusk("budget", "set", "terminal:local", home=home)
    assert code == 1 and "give the daily limit in USD" in err and "--tokens" in err
    code, _, err = tusk("budget", "set", "terminal:local", "--tokens", "-5", home=home)
    assert code == 2 and "whole number, 0 or more" in err


def test_doctor_names_a_usd_limit_that_cannot_count_a_model(fake_llm, home):
    """`tusk doctor` warns when a USD limit, set in the environment or as a chat's own, applies to a model with
    no known price, naming the limits and the fix; `--no-model` finds it from the ledger's unpriced calls."""
    assert tusk("budget", "set", "telegram:-100", "0.5", home=home)[0] == 0
    env = {"TUSK_MODEL": "local/llama", "TUSK_API_BASE": fake_llm.base_url, "TUSK_API_KEY": "sk-test",
           "TUSK_LIMIT_DAILY_USD": "5", "TUSK_HTTP_PORT": "0"}
    code, out, err = tusk("doctor", home=home, **env)
    line = next((x for x in out.splitlines() if "spend limits" in x), "")
    assert line.startswith("WARN  spend limits: local/llama has no known price: TUSK_LIMIT_DAILY_USD and "
                           "telegram:-100's own ($0.5 a day) cannot count its calls"), out
    assert "give it a price in TUSK_MODELS (llama=local/llama@IN/OUT" in out
    code, out, err = tusk("doctor", "--no-model", home=home, **env)  # the ledger holds an unpriced call of it
    assert "WARN  spend limits: local/llama has no known price" in out, out
    code, out, err = tusk("doctor", "--no-model", home=home, **env, TUSK_LIMIT_DAILY_TOKENS="50000")
    assert "OK    spend limits: local/llama has no known price" in out and "count against TUSK_LIMIT_DAILY_TOKENS" in out
