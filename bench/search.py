"""search_history on a long-lived chat: 10,000 HISTORY.md entries plus consolidated messages.

Builds a chat whose HISTORY.md holds `--entries` dated paragraphs (~70 words each, Zipf-
distributed vocabulary, like real summaries) and whose session holds `--messages`
consolidated messages, then measures through `memory.search.HistorySearch`:

- cold: index build + first query, with no index file (a chat's first search ever);
- restart: the first query of a new process on the persisted index (search.sqlite; no rebuild);
- warm: the median and 95th percentile of queries on the built index (the common case);
- append: a query right after a new HISTORY.md entry and two new messages (read incrementally);
- the resident memory the index adds, and whether a planted entry ranks first.

    python bench/search.py [--entries 10000] [--messages 20000] [--queries 300]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory import files as memfiles  # noqa: E402
from memory.search import HistorySearch, delete_index  # noqa: E402
from memory.session import Message, SessionStore  # noqa: E402

DAY = 86_400
COMMON = ("the we and to a of about for is that it on with was they he she plan talked asked decided agreed "
          "wanted week meeting project trip dinner book work home family call friday monday weekend").split()


def vocabulary(rng: random.Random, size: int = 6000) -> tuple[list[str], list[float]]:
    letters = "abcdefghijklmnoprstuvwyz"
    words = COMMON + ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(size)]
    return words, [1 / (rank + 1) for rank in range(len(words))]


def paragraph(rng: random.Random, vocab: tuple[list[str], list[float]], n: int) -> str:
    return " ".join(rng.choices(vocab[0], weights=vocab[1], k=n)).capitalize() + "."


def long_chat(entries: int, messages: int) -> tuple[list[tuple[float, str]], list[Message]]:
    """The chat: (time, text) HISTORY.md entries and messages, a planted answer in each."""
    rng = random.Random(8)
    vocab = vocabulary(rng)
    start = time.time() - entries * DAY / 4
    history = []
    for i in range(entries):
        text = paragraph(rng, vocab, 70)
        if i == entries // 3:
            text = "We decided the summer trip goes to Lisbon in May; Bob books the night train."
        history.append((start + i * DAY / 4, text))
    batch = [Message("user" if i % 2 == 0 else "assistant", paragraph(rng, vocab, 25), ts=start + i * 60)
             for i in range(messages)]
    if messages:
        batch[messages // 3] = Message("user", "We decided: the summer trip goes to Lisbon in May, I book the night train.",
                                       ts=start + messages // 3 * 60, sender_id="7", sender_name="Bob")
    return history, batch


def seed(home: Path, entries: int, messages: int) -> SessionStore:
    history, batch = long_chat(entries, messages)
    store = SessionStore(home)
    session = store.get("bench", "longchat")
    lines = [f"## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(at))}\n\n{text}\n\n" for at, text in history]
    session.files.dir.mkdir(parents=True, exist_ok=True)
    session.files.history.write_text("".join(lines), encoding="utf-8")
    store.append(session, batch)
    store.set_pointer(session, max(0, messages - 20))
    return store


def warm_queries(count: int) -> list[str]:
    rng = random.Random(1)
    words = vocabulary(random.Random(8))[0]
    return [" ".join(rng.sample(words[:800], 3)) for _ in range(count)]


def report_warm(times: list[float], count: int) -> str:
    times = sorted(times)
    return (f"warm query ({count} three-word queries, limit 5): median {statistics.median(times) * 1000:.2f} ms, "
            f"p95 {times[int(len(times) * 0.95)] * 1000:.2f} ms")


async def postgres(url: str, entries: int, messages: int, queries: int) -> None:
    """The same chat in PostgreSQL: written through the store, searched through store/postgres/search.py."""
    import psycopg

    from memory.keys import ChatKey
    from store.base import Entry
    from store.postgres import migrations
    from store.postgres.chats import PgChats
    from store.postgres.pool import Database
    from store.postgres.search import PgSearch

    db = Database(url)
    await db.open()
    try:
        await migrations.require_current(db)
        chats, key = PgChats(db), ChatKey("bench", "longchat")
        history, batch = long_chat(entries, messages)
        t = time.perf_counter()
        chat = await chats.open(key)
        for i in range(0, len(batch), 100):  # a turn's messages are appended in one transaction each
            await chats.append(chat, batch[i:i + 100])
        await chats.set_pointer(chat, max(0, messages - 20))
        await chats.handle(key).replace_history([Entry(at, text) for at, text in history])
        wrote = time.perf_counter() - t
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("VACUUM ANALYZE")  # as autovacuum would have by now
            size = (await (await conn.execute(
                "SELECT pg_total_relation_size('search_docs') + pg_total_relation_size('search_words')")).fetchone())[0]
        print(f"postgres: written through the store in {wrote:,.1f} s (messages in transactions of 100, then the "
              f"history replaced and the index rebuilt); index {size / 1e6:.1f} MB with its GIN indexes")
        search = PgSearch(db)
        hits = await search.search(key, "what did Bob decide about the summer trip?")
        print(f"  planted entry or message ranks first: {bool(hits) and 'Lisbon' in hits[0].text}")
        warm = []
        for query in warm_queries(queries):
            t = time.perf_counter()
            await search.search(key, query, 5)
            warm.append(time.perf_counter() - t)
        print("postgres " + report_warm(warm, queries))
        t = time.perf_counter()
        await chats.append(chat, [Message("user", "The plumber comes on Tuesday."), Message("assistant", "Noted.")])
        appended = time.perf_counter() - t
        await chats.set_pointer(chat, chat.session.total)
        t = time.perf_counter()
        hits = await search.search(key, "plumber")
        print(f"postgres append of a turn (two messages, indexed in its transaction): {appended * 1000:.2f} ms; "
              f"then a query: {(time.perf_counter() - t) * 1000:.2f} ms, found: {bool(hits)}")
    finally:
        await db.close()


def rss_kib() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--postgres", action="store_true", help="also the same chat in PostgreSQL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = seed(Path(tmp), args.entries, args.messages)
        session = store.get("bench", "longchat")
        files = session.files
        size = sum(f.stat().st_size for f in (files.history, files.session) if f.exists()) / 1e6
        print(f"chat: {args.entries:,} HISTORY.md entries + {args.messages:,} consolidated messages ({size:.1f} MB)")

        colds, cpus, restarts = [], [], []
        for _ in range(3):
            delete_index(files)
            search = HistorySearch()
            before = rss_kib()
            t, cpu = time.perf_counter(), time.process_time()
            hits = search.search(files, "what did Bob decide about the summer trip?")
            colds.append(time.perf_counter() - t)
            cpus.append(time.process_time() - cpu)
            grown = rss_kib() - before
            t = time.perf_counter()
            HistorySearch().search(files, "what did Bob decide about the summer trip?")
            restarts.append(time.perf_counter() - t)
        first = hits[0].text if hits else "(nothing)"
        disk = sum(p.stat().st_size for p in files.dir.glob("search.sqlite*")) / 1e6
        print(f"cold (index build + first query), median of 3: {statistics.median(colds) * 1000:,.0f} ms "
              f"({statistics.median(cpus) * 1000:,.0f} ms CPU); index adds ~{grown / 1024:.0f} MiB RSS, "
              f"{disk:.1f} MB on disk")
        print(f"first query after a restart (persisted index): {statistics.median(restarts) * 1000:.1f} ms")
        print(f"  planted entry or message ranks first: {'Lisbon' in first}")

        warm, warm_cpu = [], []
        for query in warm_queries(args.queries):
            t, cpu = time.perf_counter(), time.process_time()
            search.search(files, query, 5)
            warm.append(time.perf_counter() - t)
            warm_cpu.append(time.process_time() - cpu)
        warm_cpu.sort()
        p95 = int(len(warm) * 0.95)
        print(f"{report_warm(warm, args.queries)} (CPU: median {statistics.median(warm_cpu) * 1000:.2f}, "
              f"p95 {warm_cpu[p95] * 1000:.2f} ms)")

        memfiles.append_history(files, "The plumber comes on Tuesday.")
        store.append(session, [Message("user", "new question"), Message("assistant", "new answer")])
        t = time.perf_counter()
        hits = search.search(files, "plumber")
        print(f"query after an append (incremental read): {(time.perf_counter() - t) * 1000:.2f} ms, "
              f"found: {bool(hits)}")
    if args.postgres:
        from tests.pg_server import PgServer

        with PgServer() as server:
            asyncio.run(postgres(server.new_database(), args.entries, args.messages, args.queries))


if __name__ == "__main__":
    main()
