"""`tusk import` of a generated Telegram Desktop export: parse rate and peak memory, no model involved.

    parse   the streaming read (bot/ops/imports/telegram.py) of a `--mb` MB result.json: messages/s, MB/s
    write   the whole import into a temporary $TUSK_HOME (both passes, sessions and import record)
    rss     peak resident memory of this process (ru_maxrss), which stays flat as the file grows

    python bench/import.py [--mb 200]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.ops.imports import run_import  # noqa: E402
from bot.ops.imports.telegram import read  # noqa: E402


def generate(path: Path, mb: float) -> int:
    """A personal chat of ~`mb` MB: mixed text, entity lists, replies, forwards and photos."""
    n = 0
    with open(path, "w") as fh:
        fh.write('{"name": "Big", "type": "personal_chat", "id": 1234, "messages": [\n')
        while fh.tell() < mb * 1e6:
            m = {"id": n + 1, "type": "message", "date": "2024-01-01T00:00:00", "date_unixtime": str(1704067200 + n),
                 "from": "Alice", "from_id": "user1234",
                 "text": f"message {n}: " + "lorem ipsum dolor sit amet " * (1 + n % 7), "text_entities": []}
            if n % 5 == 0:
                m["text"] = ["see ", {"type": "bold", "text": "this"}, f" number {n}"]
            if n % 11 == 0:
                m["reply_to_message_id"] = n
            if n % 13 == 0:
                m["photo"] = "photos/p.jpg"
            fh.write(("," if n else "") + json.dumps(m) + "\n")
            n += 1
        fh.write("]}\n")
    return n


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "result.json"
        n = generate(export, args.mb)
        size = export.stat().st_size / 1e6
        before = rss_mb()
        start = time.perf_counter()
        count = sum(1 for _ in read(export))
        parse_s = time.perf_counter() - start
        print(f"parse: {count:,} messages, {size:.0f} MB in {parse_s:.1f} s = {count / parse_s:,.0f} msg/s, "
              f"{size / parse_s:.1f} MB/s; peak RSS {rss_mb():.0f} MB (before {before:.0f} MB)")
        start = time.perf_counter()
        for line in run_import(Path(tmp) / "home", export, "telegram", None, yes=True):
            pass
        total = time.perf_counter() - start
        print(f"import: {n:,} messages written in {total:.1f} s = {n / total:,.0f} msg/s; peak RSS {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
