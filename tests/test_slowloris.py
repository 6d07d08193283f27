"""A slow-loris flood against a real `tusk run` with a 1,024 file limit: the bot stays up."""

import asyncio
import resource
import signal

import aiohttp
import pytest

from tests import procs
from tests.fakes.fake_telegram import FakeTelegram
from tests.test_cli import api_from, env_for

FLOOD = 1100
FILE_LIMIT = 1024


def low_file_limit() -> None:
    """In the child before exec: the soft and hard RLIMIT_NOFILE of a small VPS default."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


async def half_open(port: int) -> asyncio.StreamWriter | None:
    """A connection that sends the start of a request head and never finishes it."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout=0.5)
    except (OSError, TimeoutError):  # a server no longer accepting: the connect would hang for minutes
        return None
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return writer


async def test_slow_loris_leaves_healthz_and_telegram_working(fake_llm, tmp_path):
    """1,100 half-open connections under a 1,024 file limit: /healthz answers and a Telegram message is answered."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < FLOOD + 200:
        pytest.skip(f"this test process needs {FLOOD + 200} file handles (ulimit -n is {soft})")
    async with FakeTelegram() as tg:
        env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TELEGRAM_BOT_TOKEN=tg.token,
                      TELEGRAM_API_BASE=tg.base_url, TELEGRAM_ALLOW_FROM="7")
        proc = await procs.start_tusk("run", env=env, cwd=tmp_path,
                                      stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                      preexec_fn=low_file_limit)
        flood: list[asyncio.StreamWriter | None] = []
        stderr = asyncio.create_task(proc.stderr.read())  # drained all along: a full pipe would stall the bot
        try:
            line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
            url, _ = api_from(line)
            port = int(url.rsplit(":", 1)[1])
            async with asyncio.timeout(60):  # bounded in time as in count, whatever the server does
                for _ in range(FLOOD):
                    flood.append(await half_open(port))
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as client:
                async with client.get(url + "/healthz") as resp:
                    assert resp.status == 200
            tg.push_message(42, "still there?", user_id=7)
            await tg.wait_for(lambda: tg.sent, timeout=procs.FIRST_TURN)
            assert tg.sent[0]["plain"].startswith("echo: ")
        finally:
            for writer in flood:
                if writer is not None:
                    writer.close()
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), timeout=30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        err = (await stderr).decode()
        assert "Too many open files" not in err and "could not journal" not in err
        assert proc.returncode == 0, err[-2000:]
