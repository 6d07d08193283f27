"""The store's cost, files against PostgreSQL, on this machine (a PostgreSQL started for the run by
tests/pg_server.py; both on the same disk):

1. a turn through the real app (TuskApp, the HTTP channel, litellm) against tests/fakes/fake_llm.py answering
   at once: Tusk's own cost per turn, in a chat of --small and --large messages (all but the last 50 behind
   the consolidation pointer). The figure must not grow with the chat.
2. one consolidation round: `/new` after 20 new messages, the model answering save_memory at once.
3. `tusk restore` of a backup of --chats chats into PostgreSQL (bot/ops/restore.py, database_url=), then
   `tusk backup` out of it (bot/ops/backup.py create_from).

    python bench/store.py [--turns 100] [--small 100] [--large 10000] [--rounds 20] [--chats 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TEXT = "a message of ordinary length, about as long as people write in a chat " * 2


def settings_for(home: Path, llm_url: str, database_url: str | None):
    from bot.config import load_settings

    env = {"TUSK_HOME": str(home), "TUSK_MODEL": "openai/fake-model", "TUSK_API_BASE": llm_url,
           "TUSK_API_KEY": "sk-bench", "TUSK_HTTP_PORT": "0", "TUSK_DM_POLICY": "open"}
    if database_url:
        env["TUSK_DATABASE_URL"] = database_url
    return load_settings(**env)


async def seed(app, chat: str, n: int) -> None:
    """`n` messages in the chat through the app's store, all but the last 50 consolidated."""
    from bot.events import ChatKey
    from memory.session import Message

    key = ChatKey("http", chat)
    for start in range(0, n, 1000):
        opened = await app.chats.open(key)
        await app.chats.append(opened, [Message("user" if i % 2 == 0 else "assistant", f"{i}: {TEXT}")
                                        for i in range(start, min(n, start + 1000))])
    opened = await app.chats.open(key)
    await app.chats.set_pointer(opened, max(0, n - 50))


async def turns(app, chat: str, count: int) -> float:
    """The median turn (ms) of `count` turns after 5 to warm up; the pointer kept 50 messages back."""
    from bot.events import ChatKey

    key, times = ChatKey("http", chat), []
    for i in range(count + 5):
        start = time.perf_counter()
        await app.say(chat, f"how are you {i}")
        times.append(time.perf_counter() - start)
        opened = await app.chats.open(key)
        await app.chats.set_pointer(opened, opened.session.total - 50)
    return statistics.median(times[5:]) * 1000


async def rounds(app, fake, count: int) -> float:
    """The median time (ms) of `/new` consolidating the 20 messages said since the last one."""
    from tests.fakes.fake_llm import Reply

    def model(body):
        if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
            return Reply(text=None, tool_calls=[("s", "save_memory", {"history_entry": "They talked.",
                                                                      "memory_update": "- likes tea\n"})])
        return Reply(text="fine")

    fake.responder, times = model, []
    for i in range(count):
        for j in range(10):
            await app.say("rounds", f"message {i}.{j}: {TEXT}")
        start = time.perf_counter()
        (answer,) = await app.say("rounds", "/new")
        times.append(time.perf_counter() - start)
        assert "summarised" in answer, answer
    return statistics.median(times) * 1000


async def backend(name: str, database_url: str | None, args: argparse.Namespace) -> dict[str, float]:
    from tests.conftest import running
    from tests.fakes.fake_llm import FakeLLM, Reply

    out: dict[str, float] = {}
    async with FakeLLM() as fake:
        fake.responder = lambda body: Reply(text="fine, thanks")
        with tempfile.TemporaryDirectory() as home:
            async with running(settings_for(Path(home), fake.base_url, database_url)) as app:
                for n in (args.small, args.large):
                    started = time.perf_counter()
                    await seed(app, f"c{n}", n)
                    out[f"seed {n}"] = time.perf_counter() - started
                    out[f"turn {n}"] = await turns(app, f"c{n}", args.turns)
                out["round"] = await rounds(app, fake, args.rounds)
    print(f"  {name}: done", file=sys.stderr)
    return out


def transfer(server, chats: int) -> tuple[float, float, int]:
    """Seconds to restore a backup of `chats` chats into a fresh database, and to back it up again; archive files."""
    from bench.backup import make_home
    from bot.ops import backup, restore

    url = server.new_database()
    with tempfile.TemporaryDirectory() as tmp:
        source, archive = Path(tmp) / "source", Path(tmp) / "files.tar.gz"
        make_home(source, chats, 50, 1_000)
        (source / "usage.sqlite").unlink()  # make_home's is a stand-in table, not a ledger
        backup.create(source, archive, "bench")
        start = time.perf_counter()
        restore.restore(archive, Path(tmp) / "pg-home", "bench", database_url=url)
        restored = time.perf_counter() - start
        start = time.perf_counter()
        entries = backup.create_from(Path(tmp) / "pg-home", url, Path(tmp) / "pg.tar.gz", "bench")
        made = time.perf_counter() - start
    return restored, made, len(entries)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--chats", type=int, default=200)
    args = parser.parse_args()
    from tests.pg_server import PgServer

    with PgServer() as server:
        files = await backend("files", None, args)
        pg = await backend("postgres", server.new_database(), args)
        restored, made, entries = await asyncio.to_thread(transfer, server, args.chats)
    print(f"{'':<34} {'files':>10} {'postgres':>10}")
    for n in (args.small, args.large):
        print(f"{f'turn, chat of {n:,} messages (median)':<34} {files[f'turn {n}']:>7.1f} ms {pg[f'turn {n}']:>7.1f} ms")
    print(f"{'turn: large / small':<34} {files[f'turn {args.large}'] / files[f'turn {args.small}']:>9.2f}x "
          f"{pg[f'turn {args.large}'] / pg[f'turn {args.small}']:>9.2f}x")
    print(f"{'consolidation round (/new, median)':<34} {files['round']:>7.1f} ms {pg['round']:>7.1f} ms")
    print(f"{f'seeding {args.large:,} messages':<34} {files[f'seed {args.large}']:>8.2f} s {pg[f'seed {args.large}']:>8.2f} s")
    print(f"restore of {args.chats} chats (50 messages each, one of 1,000) into PostgreSQL: {restored:.1f} s; "
          f"backup out of it: {made:.1f} s ({entries} files)")


if __name__ == "__main__":
    asyncio.run(main())
