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
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.fake_llm import FakeLLM  # noqa: E402
from tests.fakes.fake_telegram import FakeTelegram  # noqa: E402

PROMPT = b"you>"  # what `tusk chat` shows when it waits for a line (prompt_toolkit moves the cursor after it)
IDLE = 1.0  # seconds after the first reply before the idle RSS is read


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def cpu_s(pid: int) -> float:
    """CPU seconds the process has used (user + system, all threads): a figure a busy machine inflates less."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(home: str, **extra: str) -> dict[str, str]:
    """Only PATH and locale of this environment (no TUSK_* or platform variables, no .env: cwd is `home`)."""
    env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL") if k in os.environ}
    return {**env, "HOME": home, "TUSK_HOME": f"{home}/data", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "TUSK_LOG_LEVEL": "warning", "TUSK_DM_POLICY": "open", **extra}


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the child never got there")
        await asyncio.sleep(0.005)


async def run_http(llm: FakeLLM, model: str = "openai/fake-model", base: str | None = None) -> dict[str, float]:
    home, port = tempfile.mkdtemp(prefix="tusk-startup-"), free_port()
    env = clean_env(home, TUSK_MODEL=model, TUSK_API_BASE=base or llm.base_url, TUSK_API_KEY="sk-bench",
                    TUSK_HTTP_PORT=str(port), TUSK_HTTP_TOKEN="off")
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.ops.cli", "run", env=env, cwd=home,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession(headers={"Origin": url}) as client:
            async def healthy() -> bool:
                try:
                    async with client.get(f"{url}/healthz") as resp:
                        return resp.status == 200
                except aiohttp.ClientError:
                    return False

            await until(healthy)
            ready, ready_rss, ready_cpu = time.monotonic() - started, rss_mb(proc.pid), cpu_s(proc.pid)
            async with client.post(f"{url}/v1/chats/bench/messages", json={"text": "hello"}) as resp:
                assert resp.status == 200, await resp.text()
            first, first_cpu = time.monotonic() - started, cpu_s(proc.pid)
            await asyncio.sleep(IDLE)
            return {"ready": ready, "CPU to ready": ready_cpu, "first reply": first,
                    "reply after ready": first - ready, "CPU to reply": first_cpu, "RSS ready": ready_rss,
                    "RSS idle": rss_mb(proc.pid)}
    finally:
        proc.kill()
        await proc.wait()


async def run_telegram(llm: FakeLLM) -> dict[str, float]:
    async with FakeTelegram() as tg:
        home = tempfile.mkdtemp(prefix="tusk-startup-")
        env = clean_env(home, TUSK_MODEL="openai/fake-model", TUSK_API_BASE=llm.base_url, TUSK_API_KEY="sk-bench",
                        TUSK_HTTP_PORT=str(free_port()), TELEGRAM_BOT_TOKEN=tg.token,
                        TELEGRAM_API_BASE=tg.base_url, TELEGRAM_ALLOW_FROM="1")
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.ops.cli", "run", env=env, cwd=home,
                                                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            async def polling() -> bool:
                return any(method == "getUpdates" for method, _ in tg.calls)

            await until(polling)
            return {"polling": time.monotonic() - started, "CPU to polling": cpu_s(proc.pid)}
        finally:
            proc.kill()
            await proc.wait()


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
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.ops.cli", "chat", env=env, cwd=home,
                                                stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)

    async def shows(text: bytes, after: int = 0) -> int:
        while (at := seen.find(text, after)) < 0:
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), 60)
            except TimeoutError:
                raise TimeoutError(f"{text!r} never came: {bytes(seen[-2000:])!r}") from None
        return at + len(text)

    try:
        at = await shows(PROMPT)
        ready, ready_rss, ready_cpu = time.monotonic() - started, rss_mb(proc.pid), cpu_s(proc.pid)
        os.write(master, b"hello\r")
        await shows(PROMPT, await shows(b"Tusk>", at))  # the reply, then the next prompt
        first, first_cpu = time.monotonic() - started, cpu_s(proc.pid)
        await asyncio.sleep(IDLE)
        return {"prompt": ready, "CPU to prompt": ready_cpu, "first reply": first, "reply after prompt": first - ready,
                "CPU to reply": first_cpu, "RSS prompt": ready_rss, "RSS idle": rss_mb(proc.pid)}
    finally:
        loop.remove_reader(master)
        proc.kill()
        await proc.wait()
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
