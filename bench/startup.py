"""Start-up of Tusk: time to ready, time to the first reply, and resident memory.

Starts the real `tusk` as a child process (a clean environment, a fresh data dir, the loopback
fake LLM of tests/fakes/) a few times and measures, from the moment the process is spawned:

- `tusk run`: the first 200 from `/healthz` (and the CPU time used until then); then the reply to a message
  posted at that moment, and how long after ready its bytes came (litellm still loads in the background
  then: the request goes out on the OpenAI wire directly, bot/llm/direct.py); RSS when ready and once idle
  after it. Three models: `openai/fake-model` (a model litellm does not know) and `openai/gpt-4o-mini` (one
  it knows: its window comes from litellm's list) at the fake server, and `openai/tiny` at the real
  llama.cpp server on 127.0.0.1:18790 when one answers there (`--local-port`).
- `tusk run` with Telegram: the first `getUpdates` the fake Telegram server sees (from then on
  messages are taken and journaled).
- `tusk chat` (in a pseudo-terminal): the prompt; then the reply to a first line typed at once;
  RSS at the prompt and idle after the reply.

    python bench/startup.py [--runs 5] [--local-port 18790]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.tusk_process import clean_env, cpu_s, free_port, rss_mb, serving, spawned, until  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402
from tests.fakes.fake_telegram import FakeTelegram  # noqa: E402

PROMPT = b"you>"  # what `tusk chat` shows when it waits for a line (prompt_toolkit moves the cursor after it)
IDLE = 1.0  # seconds after the first reply before the idle RSS is read


async def run_http(llm: FakeLLM, model: str = "openai/fake-model", base: str | None = None) -> dict[str, float]:
    home = tempfile.mkdtemp(prefix="tusk-startup-")
    async with serving(home, TUSK_MODEL=model, TUSK_API_BASE=base or llm.base_url, TUSK_API_KEY="sk-bench") as tusk:
        ready, ready_rss, ready_cpu = tusk.ready, rss_mb(tusk.proc.pid), cpu_s(tusk.proc.pid)
        async with tusk.client.post(f"{tusk.url}/v1/chats/bench/messages", json={"text": "hello"}) as resp:
            assert resp.status == 200, await resp.text()
        first, first_cpu = time.monotonic() - tusk.started, cpu_s(tusk.proc.pid)
        await asyncio.sleep(IDLE)
        return {"ready": ready, "CPU to ready": ready_cpu, "first reply": first,
                "reply after ready": first - ready, "CPU to reply": first_cpu, "RSS ready": ready_rss,
                "RSS idle": rss_mb(tusk.proc.pid)}


async def run_telegram(llm: FakeLLM) -> dict[str, float]:
    async with FakeTelegram() as tg:
        home = tempfile.mkdtemp(prefix="tusk-startup-")
        env = clean_env(home, TUSK_MODEL="openai/fake-model", TUSK_API_BASE=llm.base_url, TUSK_API_KEY="sk-bench",
                        TUSK_HTTP_PORT=str(free_port()), TELEGRAM_BOT_TOKEN=tg.token,
                        TELEGRAM_API_BASE=tg.base_url, TELEGRAM_ALLOW_FROM="1")
        started = time.monotonic()
        async with spawned("run", env=env, cwd=home) as proc:
            async def polling() -> bool:
                return any(method == "getUpdates" for method, _ in tg.calls)

            await until(polling)
            return {"polling": time.monotonic() - started, "CPU to polling": cpu_s(proc.pid)}


async def run_chat(llm: FakeLLM) -> dict[str, float]:
    home = tempfile.mkdtemp(prefix="tusk-startup-")
    env = clean_env(home, TUSK_MODEL="openai/fake-model", TUSK_API_BASE=llm.base_url, TUSK_API_KEY="sk-bench",
                    TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")  # the pty answers no cursor-position request
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    seen = bytearray()
    arrived = asyncio.Event()
    loop = asyncio.get_running_loop()

    def read() -> None:
        try:
            seen.extend(os.read(master, 65536))
        except OSError:
            return
        arrived.set()

    loop.add_reader(master, read)

    async def shows(text: bytes, after: int = 0) -> int:
        while (at := seen.find(text, after)) < 0:
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), 60)
            except TimeoutError:
                raise TimeoutError(f"{text!r} never came: {bytes(seen[-2000:])!r}") from None
        return at + len(text)

    started = time.monotonic()
    try:
        async with spawned("chat", env=env, cwd=home, stdin=slave, stdout=slave, stderr=slave) as proc:
            os.close(slave)
            at = await shows(PROMPT)
            ready, ready_rss, ready_cpu = time.monotonic() - started, rss_mb(proc.pid), cpu_s(proc.pid)
            os.write(master, b"hello\r")
            await shows(PROMPT, await shows(b"Tusk>", at))  # the reply, then the next prompt
            first, first_cpu = time.monotonic() - started, cpu_s(proc.pid)
            await asyncio.sleep(IDLE)
            return {"prompt": ready, "CPU to prompt": ready_cpu, "first reply": first,
                    "reply after prompt": first - ready, "CPU to reply": first_cpu, "RSS prompt": ready_rss,
                    "RSS idle": rss_mb(proc.pid)}
    finally:
        loop.remove_reader(master)
        os.close(master)


def report(name: str, runs: list[dict[str, float]]) -> None:
    print(f"{name} ({len(runs)} runs: median [min-max])")
    for key in runs[0]:
        values = [r[key] for r in runs]
        unit, fmt = ("MB", "{:.0f}") if key.startswith("RSS") else ("s", "{:.2f}")
        print(f"  {key:<15} {fmt.format(statistics.median(values))} {unit} "
              f"[{fmt.format(min(values))}-{fmt.format(max(values))}]")


def local_server(port: int) -> str | None:
    base = f"http://127.0.0.1:{port}/v1"
    try:
        with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
            return base if resp.status == 200 else None
    except OSError:
        return None


async def main(runs: int, local_port: int) -> None:
    local = local_server(local_port)
    async with FakeLLM() as llm:
        scenarios = [("tusk run (HTTP only), openai/fake-model at the fake server", run_http),
                     ("tusk run (HTTP only), openai/gpt-4o-mini (litellm knows it) at the fake server",
                      lambda fake: run_http(fake, "openai/gpt-4o-mini")),
                     *([(f"tusk run (HTTP only), openai/tiny at the llama.cpp server on :{local_port}",
                         lambda fake: run_http(fake, "openai/tiny", local))] if local else []),
                     ("tusk run with Telegram: polling", run_telegram),
                     ("tusk chat: the prompt", run_chat)]
        for name, scenario in scenarios:
            report(name, [await scenario(llm) for _ in range(runs)])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--local-port", type=int, default=18790, help="a real llama.cpp server's port")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.local_port))
