"""seen.sqlite (bot/dedupe.py): what recording each platform message costs, and a search over documents.

    seen()      per call, on a fresh file and on one already at its row cap (pruning included)
    documents   a chat with --docs kept documents of --chars characters each: the first search (indexing
                them all), a search after one more document, a search with nothing new

    python bench/dedupe.py [--messages 2000] [--docs 50] [--chars 40000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.dedupe import SeenStore  # noqa: E402
from memory import documents  # noqa: E402
from memory.paths import ChatFiles  # noqa: E402
from memory.search import HistorySearch  # noqa: E402

WORDS = ("harbour survey lighthouse keeper boats quay council tide lamp cat biscuit rope sail anchor gull pier "
         "storm fog bell chart").split()


def per_call(store: SeenStore, start: int, n: int) -> list[float]:
    times = []
    for i in range(start, start + n):
        t = time.perf_counter()
        store.seen("telegram", f"42:{i}")
        times.append((time.perf_counter() - t) * 1000)
    return times


def text(seed: int, chars: int) -> str:
    out, i = [], seed
    while sum(map(len, out)) < chars:
        out.append(" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12)) + f" line{i}.")
        i += 1
    return "\n\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--docs", type=int, default=50)
    ap.add_argument("--chars", type=int, default=40_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SeenStore(Path(tmp), keep_rows=args.messages)
        fresh = per_call(store, 0, args.messages)
        full = per_call(store, args.messages, args.messages)  # past the cap: pruned every 1,000
        print(f"seen(), fresh file:    median {statistics.median(fresh):.3f} ms, "
              f"p99 {sorted(fresh)[int(len(fresh) * .99)]:.3f} ms ({args.messages} calls)")
        print(f"seen(), at its cap:    median {statistics.median(full):.3f} ms, "
              f"p99 {sorted(full)[int(len(full) * .99)]:.3f} ms, max {max(full):.3f} ms")
        store.close()
        print(f"seen.sqlite: {(Path(tmp) / 'seen.sqlite').stat().st_size / 1024:.0f} KiB at {args.messages} rows")
    with tempfile.TemporaryDirectory() as tmp:
        files = ChatFiles.locate(Path(tmp), "telegram", "42")
        limits = documents.DocumentLimits(max_chars=args.chars, chat_max_chars=args.docs * args.chars * 2)
        for d in range(args.docs):
            documents.keep(files, documents.KeptDocument(f"d{d}.pdf", "file", text(d, args.chars), 1.7e9 + d, "7",
                                                         "Ann"), limits)
        search = HistorySearch()
        t = time.perf_counter()
        hits = search.search(files, "where does the lighthouse keeper ring the bell?")
        first = time.perf_counter() - t
        documents.keep(files, documents.KeptDocument("new.pdf", "file", text(999, args.chars), 1.8e9, "7", "Ann"),
                       limits)
        t = time.perf_counter()
        search.search(files, "storm fog anchor")
        one_more = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(20):
            search.search(files, "storm fog anchor")
        warm = (time.perf_counter() - t) / 20
        size = files.search_index.stat().st_size / 1024 / 1024
        print(f"documents: {args.docs} x {args.chars:,} chars; first search (indexing all) {first:.2f} s, "
              f"after one more document {one_more * 1000:.0f} ms, warm {warm * 1000:.1f} ms; "
              f"index {size:.1f} MiB; {len(hits)} hits")


if __name__ == "__main__":
    main()
