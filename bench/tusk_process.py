"""A real `tusk` child process for the benchmarks: a clean environment in a fresh home, started as a user
starts it (`python -m bot.ops.cli`), measured from /proc, and killed when the measurement ends.

    async with spawned("run", env=clean_env(home, TUSK_MODEL=...), cwd=home) as proc:   # killed on exit
        await until(check)                  # an async check, polled (TimeoutError after 60 s)
        cpu_s(proc.pid), rss_mb(proc.pid)   # CPU seconds used so far, resident memory now

    async with serving(home, TUSK_MODEL=..., TUSK_API_BASE=...) as tusk:   # `tusk run`, HTTP only, no token
        tusk.ready                          # seconds from the spawn to the first 200 of /healthz
        await tusk.client.post(f"{tusk.url}/v1/chats/bench/messages", json={"text": "hello"})
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp


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


@contextlib.asynccontextmanager
async def spawned(*args: str, env: dict[str, str], cwd: str, **io: Any) -> AsyncIterator[asyncio.subprocess.Process]:
    """`tusk *args` as a child (its output thrown away unless `io` says where it goes), killed on exit."""
    io = {"stdout": asyncio.subprocess.DEVNULL, "stderr": asyncio.subprocess.DEVNULL, **io}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.ops.cli", *args, env=env, cwd=cwd, **io)
    try:
        yield proc
    finally:
        proc.kill()
        await proc.wait()


@dataclass(frozen=True)
class Serving:
    proc: asyncio.subprocess.Process
    url: str  # http://127.0.0.1:<port>
    client: aiohttp.ClientSession  # sends the console's Origin header
    started: float  # time.monotonic() just before the spawn
    ready: float  # seconds from the spawn to the first 200 of /healthz


@contextlib.asynccontextmanager
async def serving(home: str, **env: str) -> AsyncIterator[Serving]:
    """`tusk run` in `home` with its HTTP channel alone on a free port and no token (`env` added to its clean
    environment), once /healthz answers 200; killed on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_env(home, TUSK_HTTP_PORT=str(port), TUSK_HTTP_TOKEN="off", **env)
    started = time.monotonic()
    async with spawned("run", env=env, cwd=home) as proc, aiohttp.ClientSession(headers={"Origin": url}) as client:
        async def healthy() -> bool:
            try:
                async with client.get(f"{url}/healthz") as resp:
                    return resp.status == 200
            except aiohttp.ClientError:
                return False

        await until(healthy)
        yield Serving(proc, url, client, started, time.monotonic() - started)
