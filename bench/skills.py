"""Skills: what they cost the fixed prompt, and `tusk run` with 200 of them.

- The fixed prompt (system prompt + tool schemas, as /status counts it) of a chat with 0, 1, 2, 5, 10, 50
  and 200 offered skills, at the default TUSK_SKILLS_MAX_TOKENS (a 65,536-token window) and with no cap to
  speak of (a window large enough): the first skill adds the Skills frame and read_skill's schema, each
  further one its line.
- The catalog's cost per prompt build with 200 skills: reading and parsing them all once, then the
  check every turn makes when nothing changed (a listing and a stat per SKILL.md).
- `tusk run` (the real process, HTTP only, the loopback fake LLM of tests/fakes/) with no skills and with
  200: time to the first 200 of /healthz, and the tokens of the first request's system prompt.

Each skill is a folder with a SKILL.md whose description is ~120 characters, as real ones are (nanobot's
packaged skills average 130), and a body of ~40 lines.

    python bench/skills.py [--runs 3]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.tusk_process import cpu_s, serving  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

COUNTS = (0, 1, 2, 5, 10, 50, 200)
BODY = "\n".join(f"{i}. Step {i} of the procedure: check the order, then answer in the house style." for i in range(40))


def make_skills(root: Path, n: int) -> None:
    for i in range(n):
        name = f"playbook-{i:03d}"
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        description = (f"How the team handles case {i} (refunds, exchanges and late deliveries). Use when a "
                       f"customer asks about case {i}.")
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{BODY}\n")


async def fixed_prompt(n: int, cap: int) -> tuple[int, int]:
    """(fixed tokens of a chat with `n` skills, of which the Skills section) with TUSK_SKILLS_MAX_TOKENS=cap."""
    from bot.app import TuskApp
    from bot.config import load_settings
    from bot.events import ChatKey

    home = Path(tempfile.mkdtemp(prefix="tusk-skills-"))
    make_skills(home / "skills", n)
    os.environ["HOME"] = str(home)  # no ~/.agents/skills of this machine's
    app = TuskApp(load_settings(TUSK_HOME=str(home), TUSK_MODEL="openai/fake-model", TUSK_SKILLS_MAX_TOKENS=cap,
                                TUSK_CONTEXT_WINDOW=max(65_536, 16 * cap)))  # the skills get 1/16 of the window
    key = ChatKey("http", "bench")
    chat = await app.chats.open(key)
    try:
        return app.agent.context.fixed_tokens(chat), app.skills.section(key, True).tokens
    finally:
        await app.store.close()


def catalog_costs(n: int = 200, rounds: int = 200) -> tuple[float, float]:
    """(ms to read and parse `n` skills once, ms of the unchanged check a prompt build makes)."""
    from bot.skills.catalog import Catalog, Root

    root = Path(tempfile.mkdtemp(prefix="tusk-skills-"))
    make_skills(root, n)
    catalog = Catalog([Root(root, "home", "$TUSK_HOME/skills")], log=False)
    started = time.perf_counter()
    catalog.snapshot()
    first = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    for _ in range(rounds):
        catalog.snapshot()
    return first, (time.perf_counter() - started) * 1000 / rounds


async def run_http(llm: FakeLLM, n: int) -> dict[str, float]:
    from memory.tokens import count_text

    home = tempfile.mkdtemp(prefix="tusk-skills-run-")
    make_skills(Path(home) / "data" / "skills", n)
    async with serving(home, TUSK_MODEL="openai/fake-model", TUSK_API_BASE=llm.base_url,
                       TUSK_API_KEY="sk-bench") as tusk:
        ready, cpu = tusk.ready, cpu_s(tusk.proc.pid)
        llm.requests.clear()
        async with tusk.client.post(f"{tusk.url}/v1/chats/bench/messages", json={"text": "hello"}) as resp:
            assert resp.status == 200, await resp.text()
        system = llm.requests[0]["messages"][0]["content"]
        return {"ready (s)": ready, "CPU to ready (s)": cpu, "system prompt (tokens)": count_text(system)}


async def main(runs: int) -> None:
    print("Fixed prompt (system prompt + tool schemas) of a chat with N offered skills:")
    print(f"  {'N':>4}  {'cap 1,000':>16}  {'cap 100,000':>16}")
    base = None
    for n in COUNTS:
        (capped, section), (open_, open_section) = await fixed_prompt(n, 1000), await fixed_prompt(n, 100_000)
        base = capped if base is None else base
        print(f"  {n:>4}  {capped:>7,} (+{capped - base:>5,})  {open_:>7,} (+{open_ - base:>6,})"
              f"   section {section:,} / {open_section:,}")
    first, check = catalog_costs()
    print(f"Catalog of 200 skills: first read {first:.0f} ms; the check on each prompt build {check:.2f} ms")
    async with FakeLLM() as llm:
        for n in (0, 200):
            results = [await run_http(llm, n) for _ in range(runs)]
            print(f"tusk run with {n} skills ({runs} runs: median [min-max])")
            for key in results[0]:
                values = [r[key] for r in results]
                fmt = "{:.2f}" if "(s)" in key else "{:,.0f}"
                print(f"  {key:<24} {fmt.format(statistics.median(values))} "
                      f"[{fmt.format(min(values))}-{fmt.format(max(values))}]")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(main(parser.parse_args().runs))
