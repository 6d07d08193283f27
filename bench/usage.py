"""The usage ledger's and spend limits' costs (bot/usage/), in a temporary $TUSK_HOME.

    record      p50/p95 of `Ledger.record` (insert + commit, WAL, synchronous=NORMAL) over `calls` calls
    report      `report(by="chat")` (and by day) over `rows` generated records (100 chats, 300 people, 30 days)
    check       p50/p95 of `Limits.check` + `release` with every limit set, sums cached (and the first, uncached)
    overshoot   `chats` chats sending at once against a $1 daily limit, estimates $0.05, real costs $0.03-0.05,
                a provider that answers in `provider_s`: what was spent when the limit stopped them
    estimate    what counting a request for its reservation costs (bot/usage/estimate.py): a ~60,000-token
                prompt with 10 tools, first seen and then again with one more message (a tool step)

    python bench/usage.py [--calls 10000] [--rows 1000000] [--chats 50] [--provider-s 1.0]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.usage.estimate import RequestEstimate  # noqa: E402
from bot.usage.ledger import Call, Ledger  # noqa: E402
from bot.usage.limits import Limits, LimitSettings, Refusal  # noqa: E402

NOW = time.time()


def percentiles(samples: list[float]) -> str:
    qs = statistics.quantiles(samples, n=100)
    return f"p50 {qs[49] * 1e6:.0f} µs, p95 {qs[94] * 1e6:.0f} µs"


def a_call(i: int, ts: float = NOW) -> Call:
    priced = i % 10 != 0
    return Call(ts, "telegram", f"chat{i % 100}", f"person{i % 300}", "reply", "openai/gpt-4o-mini", 1200, 150, 800,
                cost_usd=0.0003 if priced else None, cost_source="litellm" if priced else None, latency_ms=900.0)


def bench_record(home: Path, calls: int) -> None:
    ledger = Ledger(home)
    ledger.record(a_call(0))  # opened and migrated
    samples = []
    for i in range(calls):
        call = a_call(i)
        start = time.perf_counter()
        ledger.record(call)
        samples.append(time.perf_counter() - start)
    ledger.close()
    print(f"record: {percentiles(samples)} over {calls:,} calls")


def generate(home: Path, rows: int) -> Ledger:
    ledger = Ledger(home)
    ledger.totals()  # creates the schema
    db = sqlite3.connect(ledger.path)
    rng = random.Random(30)
    start = time.perf_counter()
    db.execute("BEGIN")
    batch = 100_000
    for first in range(0, rows, batch):
        db.executemany(
            "INSERT INTO calls (ts, channel, chat, person, purpose, model, input_tokens, output_tokens, cached_tokens,"
            " estimated, cost_usd, cost_source, latency_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
            ((NOW - rng.random() * 30 * 86400, "telegram", f"chat{i % 100}", f"person{i % 300}",
              ("reply", "consolidation", "task")[i % 3], ("openai/gpt-4o-mini", "openai/tiny")[i % 7 == 0],
              rng.randrange(200, 8000), rng.randrange(10, 800), 0,
              None if i % 7 == 0 else rng.random() / 100, None if i % 7 == 0 else "litellm", 800.0)
             for i in range(first, min(rows, first + batch))))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    size = ledger.path.stat().st_size / 2**20
    print(f"generated {rows:,} records in {time.perf_counter() - start:.1f} s (usage.sqlite {size:.0f} MiB)")
    return ledger


def bench_report(ledger: Ledger) -> None:
    one_chat = {"by": "person", "channel": "telegram", "chat": "chat7"}
    week = {"by": "chat", "since": NOW - 7 * 86400}
    for label, kwargs in (("by chat, all", {"by": "chat"}), ("by chat, last 7 days", week),
                          ("by day, all", {"by": "day"}), ("by model, all", {"by": "model"}),
                          ("by purpose, all", {"by": "purpose"}), ("by person, one chat", one_chat)):
        start = time.perf_counter()
        rows = ledger.report(**kwargs)
        print(f"report {label}: {time.perf_counter() - start:.3f} s ({len(rows)} rows)")


def bench_check(ledger: Ledger, checks: int) -> None:
    settings = LimitSettings(daily_usd=1e6, monthly_usd=1e7, chat_daily_usd=1e5, person_daily_usd=1e5,
                             daily_tokens=10**12, chat_daily_tokens=10**11)
    limits = Limits(ledger, settings)
    start = time.perf_counter()
    limits.check("telegram", "chat7", "person7", 0.01, 2000, "reply").release()
    print(f"check, first (sums read from SQLite): {(time.perf_counter() - start) * 1e3:.1f} ms")
    samples = []
    for i in range(checks):
        start = time.perf_counter()
        limits.check("telegram", "chat7", "person7", 0.01, 2000, "reply").release()
        samples.append(time.perf_counter() - start)
    print(f"check + release, cached: {percentiles(samples)} over {checks:,}")


def bench_overshoot(home: Path, chats: int, provider_s: float) -> None:
    ledger = Ledger(home)
    limits = Limits(ledger, LimitSettings(daily_usd=1.0))
    rng, lock = random.Random(1), threading.Lock()

    def chat(i: int) -> int:
        made = 0
        while not isinstance(held := limits.check("telegram", f"c{i}", None, 0.05, 4000, "reply"), Refusal):
            time.sleep(provider_s)  # the provider answering
            with lock:
                cost = rng.uniform(0.03, 0.05)
            ledger.record(Call(time.time(), "telegram", f"c{i}", None, "reply", "m", 4000, 100, cost_usd=cost,
                               cost_source="provider"))
            held.settle()
            made += 1
        return made

    start = time.perf_counter()
    with ThreadPoolExecutor(chats) as pool:
        made = sum(pool.map(chat, range(chats)))
    spent = ledger.totals().cost_usd
    print(f"overshoot: {chats} chats at once, provider {provider_s:.1f} s: {made} calls, spent ${spent:.4f} of a "
          f"$1.00 limit (overshoot ${max(0.0, spent - 1):.4f}; one estimate is $0.05) in "
          f"{time.perf_counter() - start:.1f} s")
    ledger.close()


def bench_estimate() -> None:
    from memory.tokens import encoding

    encoding()  # built once at start in Tusk
    sentence = "We talked about the garden, the tomatoes that split after the rain and the trip to Lisbon. "
    history = [{"role": ("user", "assistant")[i % 2], "content": sentence * 12} for i in range(240)]
    messages = [{"role": "system", "content": sentence * 200}, *history]
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": sentence,
                                               "parameters": {"type": "object", "properties": {
                                                   "query": {"type": "string", "description": sentence}}}}}
             for i in range(10)]
    estimate = RequestEstimate()
    start = time.perf_counter()
    tokens = estimate.counted(messages, tools)
    first = time.perf_counter() - start
    samples = []
    for i in range(20):
        step = [*messages, {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"}]
        start = time.perf_counter()
        estimate.counted(step, tools)
        samples.append(time.perf_counter() - start)
    print(f"estimate of a {tokens:,}-token request with {len(tools)} tools: first {first * 1e3:.1f} ms, "
          f"again with one more message p50 {statistics.median(samples) * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--provider-s", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_record(Path(tmp) / "record", args.calls)
        big = generate(Path(tmp) / "big", args.rows)
        bench_report(big)
        bench_check(big, args.calls)
        big.close()
        bench_overshoot(Path(tmp) / "overshoot", args.chats, args.provider_s)
    bench_estimate()


if __name__ == "__main__":
    main()
