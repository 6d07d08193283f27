"""Footprint of a running Tusk: start-up time, resident memory idle and after 1,000 chats.

Starts the real `tusk run` as a child process with every channel configured (Telegram,
Discord, Slack in Socket Mode, the HTTP API) against the loopback fakes in tests/fakes/,
then measures:

- time from process start to "Tusk is running" (every channel connected),
- RSS at idle a few seconds later,
- RSS after 1,000 different chats have each had one turn (through the HTTP API, 25 at a time),
  and again after a further 1,000 chats (idle chats must not pile up in memory).

    python bench/footprint.py [--chats 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.fake_discord import FakeDiscord  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402
from tests.fakes.fake_slack import FakeSlack  # noqa: E402
from tests.fakes.fake_telegram import FakeTelegram  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def turns(url: str, chats: range, parallel: int = 25) -> None:
    gate = asyncio.Semaphore(parallel)
    async with aiohttp.ClientSession(headers={"Origin": url}) as client:  # writes must come from the same origin
        async def one(i: int) -> None:
            async with gate, client.post(f"{url}/v1/chats/c{i}/messages", json={"text": f"hello {i}"}) as resp:
                assert resp.status == 200, await resp.text()

        await asyncio.gather(*(one(i) for i in chats))


async def main(chats: int) -> None:
    async with FakeLLM() as llm, FakeTelegram() as tg, FakeDiscord() as dc, FakeSlack() as slack:
        dc.add_guild()
        home = tempfile.mkdtemp(prefix="tusk-footprint-")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_"))},
               "TUSK_HOME": home, "TUSK_MODEL": "openai/fake-model", "TUSK_API_BASE": llm.base_url,
               "TUSK_API_KEY": "sk-bench", "TUSK_HTTP_PORT": "0", "TUSK_HTTP_TOKEN": "off", "TUSK_LOG_LEVEL": "warning",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "TELEGRAM_BOT_TOKEN": tg.token, "TELEGRAM_API_BASE": tg.base_url, "TELEGRAM_ALLOW_FROM": "1",
               "DISCORD_BOT_TOKEN": dc.token, "DISCORD_API_BASE": dc.api_base, "DISCORD_GATEWAY_URL": dc.gateway_url,
               "DISCORD_ALLOW_FROM": "1", "SLACK_BOT_TOKEN": slack.bot_token, "SLACK_APP_TOKEN": slack.app_token,
               "SLACK_API_URL": slack.api_url, "SLACK_ALLOW_FROM": "U1"}
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.ops.cli", "run", env=env, cwd=home,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=120)).decode()
        ready = time.monotonic() - started
        assert "running on telegram, discord, slack" in line, line
        url = "http://" + line.split("http://", 1)[1].split()[0]
        await asyncio.sleep(3)
        idle = rss_mb(proc.pid)
        t0 = time.monotonic()
        await turns(url, range(chats))
        first = time.monotonic() - t0
        after = rss_mb(proc.pid)
        await turns(url, range(chats, 2 * chats))
        after2 = rss_mb(proc.pid)
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
        print(f"start-up to ready (all channels connected): {ready:.1f} s")
        print(f"RSS at idle:                                {idle:.0f} MB")
        print(f"RSS after {chats:,} chats had a turn:          {after:.0f} MB  ({chats / first:.0f} turns/s through HTTP)")
        print(f"RSS after {2 * chats:,} chats had a turn:          {after2:.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=1000)
    asyncio.run(main(parser.parse_args().chats))
