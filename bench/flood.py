"""A slow-loris flood against a real `tusk run` under a 1,024 file limit: what still works, how fast.

Opens N connections that send the start of a request head and never finish it (the attack of
issue 15), then measures /healthz latency and the time a Telegram message takes to be answered
(through the Telegram fake), and how many of the flood's connections the server kept open.

    python bench/flood.py [--connections 1100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.fake_llm import FakeLLM  # noqa: E402
from tests.fakes.fake_telegram import FakeTelegram  # noqa: E402


def low_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


async def half_open(port: int) -> asyncio.StreamWriter | None:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout=0.5)
    except (OSError, TimeoutError):
        return None
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return writer


async def main(count: int) -> None:
    async with FakeLLM() as llm, FakeTelegram() as tg:
        home = tempfile.mkdtemp(prefix="tusk-flood-")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_"))},
               "TUSK_HOME": home, "TUSK_MODEL": "openai/fake-model", "TUSK_API_BASE": llm.base_url,
               "TUSK_API_KEY": "sk-bench", "TUSK_HTTP_PORT": "0", "TUSK_HTTP_TOKEN": "off", "TUSK_LOG_LEVEL": "error",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TELEGRAM_BOT_TOKEN": tg.token,
               "TELEGRAM_API_BASE": tg.base_url, "TELEGRAM_ALLOW_FROM": "7"}
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.ops.cli", "run", env=env, cwd=home,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                                                    preexec_fn=low_file_limit)
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=120)).decode()
        url = "http://" + line.split("http://", 1)[1].split()[0]
        t0 = time.monotonic()
        flood = [await half_open(int(url.rsplit(":", 1)[1])) for _ in range(count)]
        opened = time.monotonic() - t0
        await asyncio.sleep(0.5)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as client:
            t0 = time.monotonic()
            async with client.get(url + "/healthz") as resp:
                health = (time.monotonic() - t0) * 1000, resp.status
        t0 = time.monotonic()
        tg.push_message(42, "still there?", user_id=7)
        await tg.wait_for(lambda: tg.sent, timeout=30)
        answered = time.monotonic() - t0
        fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        for writer in flood:
            if writer is not None:
                writer.close()
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
    print(f"flood: {count} half-open connections opened in {opened:.1f} s (file limit of tusk run: 1,024)")
    print(f"file handles open in tusk run during the flood: {fds}")
    print(f"/healthz during the flood: {health[1]} in {health[0]:.0f} ms")
    print(f"Telegram message answered during the flood in {answered * 1000:.0f} ms (polling included)")
    print(f"exit code after SIGTERM: {proc.returncode}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1100)
    asyncio.run(main(parser.parse_args().connections))
