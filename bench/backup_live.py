"""Turns of 20 chats talking while a backup runs: is any turn delayed by more than 100 ms?

A real Tusk (TuskApp, its HTTP channel on 127.0.0.1, litellm) against tests/fakes/fake_llm.py answering at
once, its settings explicit (no .env, no TUSK_* of this shell), on a temporary TUSK_HOME made as
bench/backup.py makes it (--chats chats, one with --largest messages) plus the --talkers chats that talk,
each with --messages messages of history. Each talker sends a plain turn, waits about --pause (0.5-1.5x:
talkers out of step), and again.
Three phases, --seconds each at least: no backup (the baseline); `tusk backup FILE` run again and again,
a separate process as a user runs it next to a running Tusk; the daily backup (TUSK_BACKUP_DIR), what
Tusk's scheduler runs. A turn counts for a backup phase when it overlaps a backup. "Added" is the longest
turn minus the median without backup; turns more than 100 ms over that median are counted, and those of
them caught in a full garbage collection of this process (Tusk's: backup or not) apart.

    python bench/backup_live.py [--chats 1000] [--largest 10000] [--talkers 20] [--pause 1.0] [--seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
for _name in [n for n in os.environ if n.startswith(("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_"))]:
    del os.environ[_name]  # nothing of the developer's setup reaches the Tusk measured
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

BOUND = 0.100  # seconds a backup may add to a turn


def talkers_home(home: Path, talkers: int, messages: int) -> None:
    """The chats that talk: http/talk-N, each with `messages` messages of history."""
    import json

    for n in range(talkers):
        folder = home / "chats" / "http" / f"talk-{n}"
        folder.mkdir(parents=True)
        lines = [{"record": "meta", "schema": 1, "channel": "http", "chat_id": f"talk-{n}", "created": 1.7e9}]
        lines += [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "words " * 30,
                   "ts": 1.7e9 + i, "tokens": 40} for i in range(messages)]
        (folder / "session.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


async def talk(tusk, chats: list[str], pause: float, turns: list[tuple[float, float]], stop: asyncio.Event) -> None:
    async def one(chat: str) -> None:
        pauses = random.Random(chat)  # a talker's own rhythm: in step, 20 chats would queue behind each other
        await asyncio.sleep(pauses.uniform(0, pause))
        i = 0
        while not stop.is_set():
            started = time.perf_counter()
            await tusk.say(chat, f"turn {i}")
            turns.append((started, time.perf_counter()))
            i += 1
            await asyncio.sleep(pauses.uniform(0.5, 1.5) * pause)

    await asyncio.gather(*(one(chat) for chat in chats))


async def cli_backup(env: dict[str, str], target: Path) -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.ops.cli", "backup", str(target), env=env,
                                                cwd=target.parent, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE, start_new_session=True)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"tusk backup failed: {err.decode()}")


async def measure(args) -> dict[str, list]:
    from bench.backup import make_home
    from bot.config import load_settings
    from bot.places import SettingsFile
    from tests.conftest import running
    from tests.fakes.fake_llm import FakeLLM, Reply
    from tests.procs import clean_env

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        home = tmp / "home"
        make_home(home, args.chats, 50, args.largest)
        (home / "usage.sqlite").unlink()  # Tusk's own ledger instead (bench/backup.py's has another schema)
        talkers_home(home, args.talkers, args.messages)
        os.chdir(tmp)  # no .env of the directory the bench is run from
        async with FakeLLM() as fake:
            fake.responder = lambda body: Reply(text="a short answer.")
            env = {"TUSK_HOME": home, "TUSK_MODEL": "openai/fake-model", "TUSK_API_BASE": fake.base_url,
                   "TUSK_API_KEY": "sk-bench", "TUSK_HTTP_PORT": "0", "TUSK_DM_POLICY": "open",
                   "TUSK_BACKUP_DIR": tmp / "daily"}
            settings = load_settings(SettingsFile(tmp / "no.env", False, "bench"), **{k: str(v) for k, v in env.items()})
            cli_env = clean_env(tmp / "user", **env)
            async with running(settings) as tusk:
                chats = [f"talk-{n}" for n in range(args.talkers)]
                await asyncio.gather(*(tusk.say(chat, "warm up") for chat in chats))
                await tusk.sweeper.sweep()  # the first consolidation sweep (30 s after a start) reads every
                # chat's file on the loop; done here, before measuring, its 10-minutely runs then find only the talkers
                turns: list[tuple[float, float]] = []
                stop = asyncio.Event()
                talking = asyncio.create_task(talk(tusk, chats, args.pause, turns, stop))
                await asyncio.sleep(3)  # settled: the sweep's sessions collected, every talker in its rhythm
                marks = {"start": time.perf_counter()}
                await asyncio.sleep(args.seconds)
                backups: dict[str, list[tuple[float, float]]] = {"cli": [], "daily": []}
                for kind, spans in backups.items():
                    marks[kind] = time.perf_counter()
                    while time.perf_counter() - marks[kind] < args.seconds:
                        started = time.perf_counter()
                        if kind == "cli":
                            await cli_backup(cli_env, tmp / "cli.tar.gz")
                        else:
                            await tusk._backup()  # what the scheduler calls every 24 h
                        spans.append((started, time.perf_counter()))
                marks["end"] = time.perf_counter()
                stop.set()
                await talking
    base = [t for t in turns if marks["start"] <= t[0] and t[1] < marks["cli"]]
    during = {kind: [t for t in turns if overlaps(t, spans)] for kind, spans in backups.items()}
    return {"no backup": base, "tusk backup (process)": during["cli"], "daily (TUSK_BACKUP_DIR)": during["daily"],
            "backups": backups, "start": marks["start"]}


def overlaps(turn: tuple[float, float], spans: list[tuple[float, float]]) -> bool:
    return any(turn[0] < end and turn[1] > start for start, end in spans)


def full_collections() -> list[tuple[float, float]]:
    """(start, end) of each full garbage collection in this process, Tusk's: they stop every turn, backup or not."""
    spans: list[tuple[float, float]] = []

    def timed(phase: str, info: dict) -> None:
        if info["generation"] == 2 and phase == "start":
            spans.append((time.perf_counter(), 0.0))
        elif info["generation"] == 2:
            spans.append((spans.pop()[0], time.perf_counter()))

    gc.callbacks.append(timed)
    return spans


def row(name: str, turns: list[tuple[float, float]], base_p50: float, collections: list) -> tuple[str, int]:
    """The row's text and how many of its turns a backup delayed by more than BOUND (not a full collection)."""
    ms = sorted((end - start) * 1000 for start, end in turns)
    over = [t for t in turns if t[1] - t[0] - base_p50 > BOUND]
    by_gc = sum(overlaps(t, collections) for t in over)
    return (f"  {name:<24} {len(ms):>6} {statistics.median(ms):7.1f} {ms[int(0.95 * (len(ms) - 1))]:7.1f}"
            f" {ms[-1]:7.1f} {ms[-1] - base_p50 * 1000:7.1f} {len(over):>6} {by_gc:>11}"), len(over) - by_gc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--largest", type=int, default=10_000)
    parser.add_argument("--talkers", type=int, default=20)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds each talker waits (on average) between its turns")
    parser.add_argument("--seconds", type=float, default=15)
    args = parser.parse_args()
    collections = full_collections()
    figures = asyncio.run(measure(args))
    p50 = statistics.median(end - start for start, end in figures["no backup"])
    print(f"{args.talkers} chats talking (pause {args.pause} s) in a home of {args.chats:,} more chats; turn latency in ms;"
          " added = max - median without backup")
    print(f"  {'':<24} {'turns':>6} {'p50':>7} {'p95':>7} {'max':>7} {'added':>7} {'>+100':>6} {'in full GC':>11}")
    delayed = 0
    for name in ("no backup", "tusk backup (process)", "daily (TUSK_BACKUP_DIR)"):
        text, by_backup = row(name, figures[name], p50, collections)
        print(text)
        delayed += by_backup if name != "no backup" else 0
    for kind, spans in figures["backups"].items():
        took = sorted(end - start for start, end in spans)
        print(f"  {kind} backup: {len(took)} runs, {statistics.median(took):.2f} s each (median), "
              f"{took[0]:.2f}-{took[-1]:.2f} s")
    measured = [end - start for start, end in collections if start >= figures["start"] and end]
    print(f"  full collections of Tusk's heap while measuring: {len(measured)}, "
          f"the longest {max(measured, default=0) * 1000:.0f} ms")
    print(f"turns a backup delayed by more than {BOUND * 1000:.0f} ms (outside a full collection): {delayed}")


if __name__ == "__main__":
    main()
