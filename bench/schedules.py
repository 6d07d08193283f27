"""The cost of many schedules in one home (bot/schedules/), in a temporary $TUSK_HOME.

    file        reminders.json with `count` schedules over `chats` chats (weekday 08:00 instructions, every
                2 hours texts, cron expressions, one-time reminders), each with `runs` recorded runs
    start       `Schedules.start`: the file read, every rule parsed, the due-time heap built, the wake-up
                armed in a running AsyncIOScheduler; the process's RSS before and after
    delay       one schedule due 0.5 s ahead among them all: from its due time to its run on the bus,
                woken by the scheduler as in use (p50/p95 over `samples`)
    burst       every weekday-08:00 schedule due at once: one tick claims them all (one file write) and
                publishes each run; then their outcomes recorded and written together (one flush)

    python bench/schedules.py [--count 10000] [--chats 1000] [--runs 20] [--samples 20]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apscheduler.schedulers.asyncio import AsyncIOScheduler  # noqa: E402

from bot.events import ChatKey  # noqa: E402
from bot.schedules import rules  # noqa: E402
from bot.schedules.model import Run, Schedule  # noqa: E402
from bot.schedules.service import Schedules, ScheduleSettings  # noqa: E402
from bot.schedules.store import FILE, render  # noqa: E402

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
MONDAY = datetime(2026, 3, 30, 8, 0, tzinfo=BERLIN)
SET = datetime(2026, 3, 1, 9, 0, tzinfo=BERLIN)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generate(home: Path, count: int, chats: int, runs: int) -> None:
    kinds = [("instruction", "every weekday at 08:00", "tell me what's due this week"),
             ("text", "every 2 hours", "Time to drink some water and stretch."),
             ("text", "cron 30 18 * * 1,3,5", "Gym tonight!"), ("reminder", None, "call the dentist about Tuesday")]
    parsed = {text: rules.parse(text, BERLIN, SET) for _, text, _ in kinds if text}
    records = []
    for i in range(count):
        kind, rule_text, text = kinds[0] if i % 10 < 4 else kinds[1] if i % 10 < 7 else kinds[2] if i % 10 < 9 else kinds[3]
        key = ChatKey("telegram", str(1000 + i % chats))
        rule = parsed.get(rule_text) if rule_text else None
        due = MONDAY if kind == "instruction" else (rule.after(MONDAY) if rule else MONDAY + timedelta(days=30))
        history = tuple(Run(MONDAY - timedelta(days=d + 1), (MONDAY - timedelta(days=d + 1)).astimezone(UTC),
                            "failed" if d == 3 else "delivered",
                            "The model is unavailable right now, try again in a minute." if d == 3 else "")
                        for d in range(runs)) if rule else ()
        records.append(Schedule(f"s{i:06x}", key, kind, text, BERLIN, due, SET, rule, False, "7", "Ann",
                                history).to_record())
    (home / FILE).write_text(render(records))
    for c in range(chats):
        (home / "chats" / "telegram" / str(1000 + c)).mkdir(parents=True, exist_ok=True)


class Bus:
    """Stands in for the bus's publish: when each run arrived."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def publish(self, msg):
        self.times.append(time.perf_counter())
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


async def bench(home: Path, samples: int) -> None:
    bus = Bus()
    before = rss_mib()
    scheduler = AsyncIOScheduler(timezone="UTC")
    scheduler.start()
    clock_offset = MONDAY - timedelta(minutes=5) - datetime.now(UTC)  # "now" is 07:55 on that Monday
    book = Schedules(home, ScheduleSettings(default_timezone="Europe/Berlin"), bus.publish,
                     clock=lambda: datetime.now(UTC) + clock_offset)
    start = time.perf_counter()
    book.start(scheduler)
    took = time.perf_counter() - start
    print(f"start: {len(book.all()):,} schedules loaded and armed in {took * 1000:.0f} ms; "
          f"RSS {before:.0f} -> {rss_mib():.0f} MiB (+{rss_mib() - before:.0f} MiB)")

    delays = []
    probe = next(s for s in book.all() if s.kind == "text" and s.rule and s.rule.text == "every 2 hours")
    for _ in range(samples):
        due = book.clock() + timedelta(seconds=0.5)
        book.reschedule(book.get(probe.id), due)  # due in half a second, among all the others
        arrived = len(bus.times)
        due_at = time.perf_counter() + (due - book.clock()).total_seconds()
        while len(bus.times) == arrived:
            await asyncio.sleep(0.001)
        delays.append(bus.times[-1] - due_at)
    qs = statistics.quantiles(delays, n=20)
    print(f"delay: a due run reaches the bus p50 {statistics.median(delays) * 1000:.0f} ms, "
          f"p95 {qs[18] * 1000:.0f} ms after its time (the scheduler's wake-up, one schedule among {len(book.all()):,})")

    scheduler.shutdown(wait=False)
    book._scheduler = None
    weekday = [s for s in book.all() if s.kind == "instruction"]
    arrived = len(bus.times)
    start = time.perf_counter()
    published = await book.tick(MONDAY)
    took = time.perf_counter() - start
    last = bus.times[-1] - start
    size = (home / FILE).stat().st_size / 2**20
    print(f"burst: {published:,} runs due at 08:00 ({len(weekday):,} weekday instructions) claimed (one write of "
          f"{size:.1f} MiB) and published in {took * 1000:.0f} ms; the last on the bus {last * 1000:.0f} ms after "
          "the tick began")
    assert published >= len(weekday) and len(bus.times) - arrived == published
    start = time.perf_counter()
    for s in weekday:
        book.record_run(s.id, Run(MONDAY, MONDAY.astimezone(UTC), "delivered"))
    recorded = time.perf_counter() - start
    start = time.perf_counter()
    book.stop()  # the pending flush, written now
    print(f"outcomes: {len(weekday):,} recorded in {recorded * 1000:.0f} ms (in memory), written in one flush of "
          f"{(time.perf_counter() - start) * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tusk-bench-schedules-") as tmp:
        home = Path(tmp)
        start = time.perf_counter()
        generate(home, args.count, args.chats, args.runs)
        size = (home / FILE).stat().st_size / 2**20
        print(f"file: {args.count:,} schedules over {args.chats:,} chats, {args.runs} runs each: reminders.json "
              f"{size:.1f} MiB (made in {time.perf_counter() - start:.1f} s)")
        asyncio.run(bench(home, args.samples))


if __name__ == "__main__":
    main()
