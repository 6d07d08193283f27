"""The price of the door: the allow-list / pairing check and the flood gate per platform message.

Measures, in-process, what every platform message now pays before the bus: `AllowList.check`
(a stat of pairing.json, and a re-read when it changed) for an approved sender, a stranger who
already holds a code (silence), and 10,000 distinct strangers (a code each, capped pending list,
one atomic write each); and `FloodGate.publish` for messages under the limits.

    python bench/gate.py [--n 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.events import ChatKey, InboundMessage  # noqa: E402
from bot.access.flood import FloodGate, FloodLimits  # noqa: E402
from bot.access.pairing import PairingStore  # noqa: E402
from channels.base import AllowList  # noqa: E402


def per_call(fn, n: int) -> float:
    """Median of 5 runs of `n` calls, in microseconds per call."""
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


async def flood(n: int) -> float:
    loop = asyncio.get_running_loop()

    def publish(msg: InboundMessage) -> asyncio.Future[None]:
        done = loop.create_future()
        done.set_result(None)
        return done

    async def send(msg) -> None:
        return None

    gate = FloodGate(FloodLimits(10**9, 10**9, 10**9), publish, send, lambda key: True)
    msgs = [InboundMessage(ChatKey("telegram", str(i % 500)), "hi", str(i % 700)) for i in range(n)]
    return per_call(lambda i: gate.publish(msgs[i]), n)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory() as home:
        store = PairingStore(Path(home), ttl=3600, max_pending=20)
        allow = AllowList(frozenset(), "TELEGRAM_ALLOW_FROM", "telegram", "pairing", store)
        store.approve(store.request("telegram", "user", "1")[0].code)
        print(f"approved sender:            {per_call(lambda i: allow.check('1'), n):7.1f} us/message")
        allow.check("2")
        print(f"stranger holding a code:    {per_call(lambda i: allow.check('2'), n):7.1f} us/message")
        strangers = iter(range(10, 10**9))
        print(f"new stranger (code, write): {per_call(lambda i: allow.check(str(next(strangers))), 2000):7.1f} "
              f"us/message; pending kept: {len(store.state().pending)}")
    print(f"flood gate, under limits:   {asyncio.run(flood(n)):7.1f} us/message")


if __name__ == "__main__":
    main()
