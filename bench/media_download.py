"""Downloading a message's file on each platform: time and extra peak memory for one large file.

Each platform channel (real python-telegram-bot, discord.py, slack-bolt) runs against its fake
server on 127.0.0.1, in a process of its own, and takes one file of --mb megabytes into a MediaStore
in a temporary folder. The fake holds the file in that process already, so "extra peak RSS" is the
growth of the process's high-water mark during the download: streamed, it stays far below the file size.

    python bench/media_download.py [--mb 19]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from channels.discord_bot import DiscordChannel, DiscordSettings  # noqa: E402
from channels.slack import SlackChannel, SlackSettings  # noqa: E402
from channels.telegram import TelegramChannel, TelegramSettings  # noqa: E402
from store.files.chats import FileChats
from memory.media import MB, MediaLimits, MediaStore  # noqa: E402
from tests.fakes.fake_discord import FakeDiscord, snowflake  # noqa: E402
from tests.fakes.fake_slack import FakeSlack  # noqa: E402
from tests.fakes.fake_telegram import FakeTelegram  # noqa: E402
from tests.fakes.loopback import wait_until  # noqa: E402
from tests.published import Published  # noqa: E402


PLATFORMS = ("telegram", "discord", "slack")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


async def measure(name: str, data: bytes, start, send) -> None:
    with tempfile.TemporaryDirectory() as home:
        store = MediaStore(FileChats(Path(home)), MediaLimits(file_bytes=len(data) + MB))
        published = Published()
        channel = await start(store, published)
        try:
            before, t0 = peak_mb(), time.perf_counter()
            await send()
            await wait_until(lambda: published, timeout=120)
            elapsed = time.perf_counter() - t0
            kept = store.path(published[0].key, published[0].attachments[0]).stat().st_size
        finally:
            await channel.stop()
    assert kept == len(data)
    print(f"{name:<9} {len(data) / MB:5.1f} MB in {elapsed:5.2f} s ({len(data) / MB / elapsed:6.1f} MB/s), "
          f"extra peak RSS {peak_mb() - before:5.1f} MB")


async def main(mb: float, platform: str) -> None:
    data = os.urandom(int(mb * MB))
    if platform == "telegram":
        await telegram(data)
    elif platform == "discord":
        await discord(data)
    else:
        await slack_(data)


async def telegram(data: bytes) -> None:
    async with FakeTelegram() as tg:
        async def start_tg(store, published):
            channel = TelegramChannel(TelegramSettings(tg.token, api_base=tg.base_url, poll_timeout=1), published,
                                      [("help", "help")], media=store)
            await channel.start()
            return channel

        async def send_tg():
            tg.push_message(42, None, document=data, file_name="big.bin")

        await measure("Telegram", data, start_tg, send_tg)


async def discord(data: bytes) -> None:
    async with FakeDiscord() as dc:
        async def start_dc(store, published):
            channel = DiscordChannel(DiscordSettings(dc.token, api_base=dc.api_base, gateway_url=dc.gateway_url),
                                     published, [("help", "help")], media=store)
            await channel.start()
            return channel

        async def send_dc():
            await dc.message(snowflake(), dc.add_user("alice"), "", attachments=(dc.attachment("big.bin", data),))

        await measure("Discord", data, start_dc, send_dc)


async def slack_(data: bytes) -> None:
    async with FakeSlack() as slack:
        slack.add_user("U0ANN", "ann")

        async def start_slack(store, published):
            channel = SlackChannel(SlackSettings(slack.bot_token, app_token=slack.app_token, api_url=slack.api_url),
                                   published, [("help", "help")], media=store)
            await channel.start()
            await slack.wait_connected()
            return channel

        async def send_slack():
            file = slack.add_file("big.bin", data)
            await slack.send_event(slack.dm("", subtype="file_share", files=[file]))

        await measure("Slack", data, start_slack, send_slack)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=19.0)
    parser.add_argument("--platform", choices=PLATFORMS, help="measure one (default: each in its own process)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.platform:
        asyncio.run(main(args.mb, args.platform))
    else:
        print(f"one {args.mb:g} MB file per platform, from its fake on 127.0.0.1 into media/")
        for name in PLATFORMS:
            subprocess.run([sys.executable, __file__, "--mb", str(args.mb), "--platform", name], check=True)
