"""`tusk import` of a generated Telegram Desktop export: parse rate and peak memory, the model's time excluded.

    parse   the streaming read (bot/ops/imports/telegram.py) of a `--mb` MB result.json: messages/s, MB/s
    import  the whole `tusk import --yes` into a temporary $TUSK_HOME (both passes, sessions, import record,
            and the consolidation rounds, against the tests' fake model server on 127.0.0.1 answering at
            once); the rounds' time as the usage ledger measured it is reported and taken out of the rate
    rss     peak resident memory of this process (ru_maxrss), which stays flat as the file grows

    python bench/import.py [--mb 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import load_settings  # noqa: E402
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
        asyncio.run(import_all(Path(tmp) / "home", export, n))


async def import_all(home: Path, export: Path, n: int) -> None:
    from tests.fakes.fake_llm import FakeLLM, attributing_responder

    for name in [k for k in os.environ if k.startswith("TUSK_")]:
        del os.environ[name]
    async with FakeLLM() as llm:
        def answer(body):  # the fake runs in this process: its log of request bodies is not Tusk's memory
            llm.requests.clear()
            return attributing_responder(body)

        llm.responder = answer
        settings = load_settings(TUSK_HOME=str(home), TUSK_MODEL="openai/fake-model", TUSK_API_BASE=llm.base_url,
                                 TUSK_API_KEY="sk-bench", TUSK_LLM_RETRIES="0")
        from bot.llm import litellm

        litellm()  # its import (seconds) is a start-up cost, not the import's
        loaded = rss_mb()
        start = time.perf_counter()
        await run_import(settings, export, "telegram", None, yes=True, say=lambda line: None)
        total = time.perf_counter() - start
    db = sqlite3.connect(home / "usage.sqlite")
    rounds, model_ms = db.execute("SELECT count(*), sum(latency_ms) FROM calls WHERE purpose='import'").fetchone()
    model = (model_ms or 0) / 1000
    print(f"import: {n:,} messages written and folded in {total:.1f} s ({rounds} rounds, {model:.1f} s of them "
          f"in model calls) = {n / (total - model):,.0f} msg/s without the model; peak RSS {rss_mb():.0f} MB "
          f"({loaded:.0f} MB with litellm loaded, before the import)")

if __name__ == "__main__":
    main()
