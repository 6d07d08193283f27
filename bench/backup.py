"""`tusk backup` and `tusk restore` of a generated data dir: time and peak memory.

    --chats N chats with --messages M messages each, one chat with --largest messages; usage.sqlite
    with 10,000 rows. Backup (a .tar.gz with its manifest), verify, restore into a fresh home.

    python bench/backup.py [--chats 1000] [--messages 50] [--largest 10000]
"""

from __future__ import annotations

import argparse
import json
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.ops import backup, restore  # noqa: E402


def make_home(home: Path, chats: int, messages: int, largest: int) -> None:
    for c in range(chats):
        folder = home / "chats" / "telegram" / str(1000 + c)
        folder.mkdir(parents=True)
        n = largest if c == 0 else messages
        with open(folder / "session.jsonl", "w") as fh:
            meta = {"record": "meta", "schema": 1, "channel": "telegram", "chat_id": str(1000 + c)}
            fh.write(json.dumps(meta) + "\n")
            for i in range(n):
                fh.write(json.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                     "content": f"message {i} " + "words " * 30, "ts": 1.7e9 + i, "tokens": 40}) + "\n")
        (folder / "MEMORY.md").write_text(f"- chat {c} facts\n" * 20)
        (folder / "HISTORY.md").write_text("## 2026-01-01 10:00 UTC\n\nsummary\n\n" * 10)
    db = sqlite3.connect(home / "usage.sqlite")
    db.execute("CREATE TABLE calls (ts REAL, chat TEXT, tokens INTEGER)")
    db.executemany("INSERT INTO calls VALUES (?, ?, ?)", [(1.7e9 + i, str(i % 100), i) for i in range(10_000)])
    db.commit()
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--largest", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, archive = Path(tmp) / "home", Path(tmp) / "b.tar.gz"
        make_home(home, args.chats, args.messages, args.largest)
        size = sum(p.stat().st_size for p in home.rglob("*") if p.is_file()) / 1e6
        start = time.perf_counter()
        entries = backup.create(home, archive, "bench")
        made = time.perf_counter() - start
        start = time.perf_counter()
        backup.verify(archive)
        verified = time.perf_counter() - start
        start = time.perf_counter()
        restore.restore(archive, Path(tmp) / "fresh", "bench")
        restored = time.perf_counter() - start
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{len(entries):,} files, {size:.0f} MB -> {archive.stat().st_size / 1e6:.1f} MB archive; "
              f"backup {made:.1f} s, verify {verified:.1f} s, restore {restored:.1f} s; peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
