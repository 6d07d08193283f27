"""The store's cost, files against PostgreSQL, on this machine (a PostgreSQL started for the run by
tests/pg_server.py; both on the same disk):

1. a turn through the real app (TuskApp, the HTTP channel, litellm) against tests/fakes/fake_llm.py answering
   at once: Tusk's own cost per turn, in a chat of --small and --large messages (all but the last 50 behind
   the consolidation pointer). The figure must not grow with the chat.
2. one consolidation round: `/new` after 20 new messages, the model answering save_memory at once.
3. `tusk restore` of a backup of --chats chats into PostgreSQL (bot/ops/restore.py, database_url=), then
   `tusk backup` out of it (bot/ops/backup.py create_from).
4. a turn's crossings of the store seam alone, in chats of --small, --large and --huge messages (all but the
   last 50 behind the pointer): `open` (warm: the chat cached, as in a running Tusk), `append` of the turn's
   two messages, and `commit_round` (a consolidation round's write: the pointer moved two on, a MEMORY.md
   version, a HISTORY.md entry); and a cold `open` (a new store: a restarted process). Must not grow with the
   chat.
5. kill -9 (bench/store_kill.py): a `tusk run` on PostgreSQL with --talkers chats talking over the HTTP API,
   killed with SIGKILL mid-traffic and started again: messages acknowledged, answered, lost, duplicated.

    python bench/store.py [--turns 100] [--small 100] [--large 10000] [--huge 100000] [--rounds 20]
                          [--chats 200] [--talkers 20] [--only app,transfer,seam,kill]
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


async def seam(kind: str, database_url: str | None, sizes: list[int], count: int) -> dict[str, float]:
    """Per size: the median ms of a warm `open`, an `append` of two messages and a `commit_round` over `count`
    turns (after 5 to warm up), and of a cold `open` by a new store (median of 5). The sizes take turns, one
    turn each in a row, so that a machine busier for a while slows them all alike."""
    from memory.keys import ChatKey
    from store import open_store, opened

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as home:
        async with opened(Path(home), database_url) as store:
            chats = store.chats
            keys = {n: ChatKey("http", f"seam{n}") for n in sizes}
            for n in sizes:
                started = time.perf_counter()
                await seed_chat(chats, keys[n], n)
                out[f"seed {n}"] = time.perf_counter() - started
            os.sync()  # the seeding's writes on disk: not written back during the turns' own fsyncs
            times: dict[str, list[float]] = {f"{name} {n}": [] for n in sizes for name in ("open", "append", "commit")}
            for i in range(count + 5):
                for n in sizes:
                    for name, took in zip(("open", "append", "commit"), await seam_turn(chats, keys[n], i)):
                        times[f"{name} {n}"].append(took)
            for name, values in times.items():
                out[name] = statistics.median(values[5:]) * 1000
            for n in sizes:
                parts = [times[f"{name} {n}"][5:] for name in ("open", "append", "commit")]
                out[f"turn {n}"] = statistics.median(map(sum, zip(*parts))) * 1000
            colds: dict[int, list[float]] = {n: [] for n in sizes}
            for _ in range(5):
                for n in sizes:
                    fresh = open_store(Path(home), database_url)
                    await fresh.start()
                    t0 = time.perf_counter()
                    await fresh.chats.open(keys[n])
                    colds[n].append(time.perf_counter() - t0)
                    await fresh.close()
            out |= {f"cold {n}": statistics.median(colds[n]) * 1000 for n in sizes}
    print(f"  seam, {kind}: done", file=sys.stderr)
    return out


async def seed_chat(chats, key, n: int) -> None:
    """`n` messages through the store, appended 1,000 at a time; the pointer 50 back."""
    from memory.session import Message

    for start in range(0, n, 1000):
        chat = await chats.open(key)
        await chats.append(chat, [Message("user" if i % 2 == 0 else "assistant", f"{i}: {TEXT}")
                                  for i in range(start, min(n, start + 1000))])
    await chats.set_pointer(await chats.open(key), max(0, n - 50))


async def seam_turn(chats, key, i: int) -> tuple[float, float, float]:
    """One turn's crossings of the seam, each timed: open, append (the turn's two messages), commit_round
    (the pointer kept 50 back, a new MEMORY.md, a HISTORY.md entry)."""
    from memory.session import Message
    from store.base import Entry, RoundCommit

    t0 = time.perf_counter()
    chat = await chats.open(key)
    t1 = time.perf_counter()
    await chats.append(chat, [Message("user", f"turn {i}: {TEXT}"), Message("assistant", "fine")])
    t2 = time.perf_counter()
    await chats.commit_round(chat, RoundCommit(start=chat.session.last_consolidated, pointer=chat.session.total - 50,
                                               memory_version=chat.memory.version, memory=f"- a fact, round {i}\n",
                                               entry=Entry(time.time(), f"They talked ({i}).")))
    return t1 - t0, t2 - t1, time.perf_counter() - t2


def seam_table(files: dict[str, float], pg: dict[str, float], sizes: list[int]) -> None:
    print(f"\nthe store seam alone, per turn (median ms){'':<9} {'files':>10} {'postgres':>10}")
    for n in sizes:
        for name, what in (("open", "open (warm)"), ("append", "append (2 messages)"),
                           ("commit", "commit_round"), ("turn", "the three together"), ("cold", "open (cold)")):
            print(f"  {f'{n:,} messages: {what}':<49} {files[f'{name} {n}']:>7.2f} ms {pg[f'{name} {n}']:>7.2f} ms")
    small, huge = sizes[0], sizes[-1]
    ratio = f"the three together, {huge:,} / {small:,}"
    print(f"  {ratio:<49} {files[f'turn {huge}'] / files[f'turn {small}']:>8.2f}x "
          f"{pg[f'turn {huge}'] / pg[f'turn {small}']:>8.2f}x")
    print(f"  {f'seeding {huge:,} messages (appends of 1,000)':<49} {files[f'seed {huge}']:>8.1f} s "
          f"{pg[f'seed {huge}']:>8.1f} s")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--huge", type=int, default=100_000)
    parser.add_argument("--talkers", type=int, default=20)
    parser.add_argument("--only", default="app,transfer,seam,kill", help="the parts to run, comma-separated")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    from tests.pg_server import PgServer

    with PgServer() as server:
        if "app" in parts:
            app_figures(await backend("files", None, args), await backend("postgres", server.new_database(), args),
                        args)
        if "transfer" in parts:
            restored, made, entries = await asyncio.to_thread(transfer, server, args.chats)
            print(f"restore of {args.chats} chats (50 messages each, one of 1,000) into PostgreSQL: {restored:.1f} s; "
                  f"backup out of it: {made:.1f} s ({entries} files)")
        if "seam" in parts:
            sizes = [args.small, args.large, args.huge]
            seam_table(await seam("files", None, sizes, args.turns),
                       await seam("postgres", server.new_database(), sizes, args.turns), sizes)
        if "kill" in parts:
            from bench.store_kill import kill_nine

            await kill_nine(server.new_database(), args.talkers)


def app_figures(files: dict[str, float], pg: dict[str, float], args: argparse.Namespace) -> None:
    print(f"{'':<34} {'files':>10} {'postgres':>10}")
    for n in (args.small, args.large):
        print(f"{f'turn, chat of {n:,} messages (median)':<34} {files[f'turn {n}']:>7.1f} ms {pg[f'turn {n}']:>7.1f} ms")
    print(f"{'turn: large / small':<34} {files[f'turn {args.large}'] / files[f'turn {args.small}']:>9.2f}x "
          f"{pg[f'turn {args.large}'] / pg[f'turn {args.small}']:>9.2f}x")
    print(f"{'consolidation round (/new, median)':<34} {files['round']:>7.1f} ms {pg['round']:>7.1f} ms")
    print(f"{f'seeding {args.large:,} messages':<34} {files[f'seed {args.large}']:>8.2f} s {pg[f'seed {args.large}']:>8.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
