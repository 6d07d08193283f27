"""What reading real Telegram updates costs: the getUpdates sieve (channels/telegram/sieve.py, every update
parsed once more before python-telegram-bot parses it) and `to_inbound` on a rich message (a reply with a
quote, a forward, entities). Medians per update over `rounds` rounds of a 100-update batch.

    python bench/telegram_updates.py [--rounds 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telegram import Update, User  # noqa: E402

from channels.telegram.inbound import to_inbound  # noqa: E402
from channels.telegram.sieve import sieve  # noqa: E402

ME = User(id=123, first_name="Tusk", is_bot=True, username="tusk_bot")
ALICE = {"id": 7, "is_bot": False, "first_name": "Alice", "username": "alice"}
GROUP = {"id": -1004001, "type": "supergroup", "title": "Hikers"}


def batch(n: int = 100) -> list[dict]:
    earlier = {"message_id": 1, "date": 1_764_680_000, "chat": GROUP, "from": ALICE,
               "text": "The summit is 2,962 m high and the path is closed in winter."}
    return [{"update_id": i, "message": {
        "message_id": i + 2, "date": 1_764_680_000, "chat": GROUP, "from": ALICE,
        "text": "@tusk_bot why is it closed? " + "words " * 40,
        "entities": [{"type": "mention", "offset": 0, "length": 9}],
        "reply_to_message": earlier, "quote": {"text": "closed in winter", "position": 40},
        "forward_origin": {"type": "user", "date": 1_764_679_000, "sender_user": ALICE}}} for i in range(n)]


def per_update(work, updates: list[dict], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work(updates)
        times.append((time.perf_counter() - start) / len(updates))
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    rounds = parser.parse_args().rounds
    updates = batch()
    parsed = [Update.de_json(u, None).message for u in updates]
    figures = {"PTB's own parse": lambda us: [Update.de_json(u, None) for u in us],
               "sieve (extra parse)": sieve,
               "to_inbound (rich group)": lambda _: [to_inbound(m, ME, frozenset({"help"})) for m in parsed]}
    for name, work in figures.items():
        print(f"{name:<24}{per_update(work, updates, rounds):7.1f} µs/update")


if __name__ == "__main__":
    main()
