"""Streamed replies per channel: time to the first visible text, time to the final message, edit calls.

A fake model (tests/fakes/fake_llm.py, real HTTP on 127.0.0.1) streams a reply of `--tokens`
words at `--rate` tokens a second to a running Tusk with each channel pointed at its fake
platform server (Telegram, Discord, Slack) or the HTTP API's Server-Sent Events. Times are
from the model's first token; the channels keep their real paces (Telegram 1 s in private
chats, 3 s in groups; Discord and Slack 1 s), and the final update keeps that pace too. The fake
model runs in the same process, so on a loaded machine its 600 tokens take longer than 15 s:
"after the last token" is the delay the channel itself adds. Goal: the first text within 1 s of
the first token.

    python bench/streaming.py [--tokens 600] [--rate 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import aiohttp  # noqa: E402

from bot.app import TuskApp  # noqa: E402
from bot.config import load_settings  # noqa: E402
from tests.fakes.fake_discord import FakeDiscord, snowflake  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, Reply  # noqa: E402
from tests.fakes.fake_slack import FakeSlack  # noqa: E402
from tests.fakes.fake_telegram import FakeTelegram  # noqa: E402
from tests.fakes.loopback import wait_until  # noqa: E402


def settings(home: Path, llm: FakeLLM, **env: str):
    for name in list(os.environ):
        if name.startswith(("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_")):
            del os.environ[name]
    return load_settings(TUSK_HOME=str(home), TUSK_MODEL="openai/fake-model", TUSK_API_BASE=llm.base_url,
                         TUSK_API_KEY="sk-bench", TUSK_HTTP_PORT="0", TUSK_LLM_RETRIES="0", TUSK_DM_POLICY="open",
                         TUSK_LLM_TIMEOUT="600", **env)


@contextlib.asynccontextmanager
async def tusk(home: Path, llm: FakeLLM, **env: str):
    app = TuskApp(settings(home, llm, **env))
    http = app.add_http()
    app.add_platforms()
    async with app:
        yield app, http


async def telegram(home: Path, llm: FakeLLM, group: bool) -> tuple[float, float, int]:
    async with FakeTelegram() as tg, tusk(home, llm, TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url):
        if group:
            tg.push_message(-100, "@tusk_bot tell me", chat_type="supergroup")
            await wait_until(lambda: any(m.get("parse_mode") == "HTML" and m["method"] == "editMessageText"
                                         for m in tg.sent), 600)
            edits = [m for m in tg.sent if m["method"] == "editMessageText"]
            return tg.sent[0]["at"], edits[-1]["at"], len(edits)
        tg.push_message(42, "tell me")
        await wait_until(lambda: tg.sent, 600)
        return tg.drafts[0]["at"], tg.sent[-1]["at"], len(tg.drafts)


async def discord(home: Path, llm: FakeLLM) -> tuple[float, float, int]:
    async with FakeDiscord() as dc:
        user = dc.add_user("alice")
        async with tusk(home, llm, DISCORD_BOT_TOKEN=dc.token, DISCORD_API_BASE=dc.api_base,
                        DISCORD_GATEWAY_URL=dc.gateway_url) as (app, _):
            await dc.message(snowflake(), user, "tell me")
            await wait_until(lambda: app.bus.active_chats == 0 and dc.edits, 600)
            await asyncio.sleep(0.2)
            return dc.sent[0]["at"], dc.edits[-1]["at"], len(dc.edits)


async def slack(home: Path, llm: FakeLLM, thread: bool) -> tuple[float, float, int]:
    async with FakeSlack() as sl:
        sl.add_user("U0ANN", "ann")
        async with tusk(home, llm, SLACK_BOT_TOKEN=sl.bot_token, SLACK_APP_TOKEN=sl.app_token,
                        SLACK_API_URL=sl.api_url):
            await sl.wait_connected()
            if thread:
                await sl.send_event(sl.mention("tell me"))
                await wait_until(lambda: any(c["method"] == "chat.stopStream" for c in sl.stream_calls), 600)
                calls = sl.stream_calls
                return calls[0]["at"], calls[-1]["at"], len(calls) - 1
            await sl.send_event(sl.dm("tell me"))
            await wait_until(lambda: sl.reactions and sl.reactions[-1][0] == "reactions.remove", 600)
            updates = [u for u in sl.updates if u["method"] == "chat.update"]
            return sl.posted[0]["at"], updates[-1]["at"], len(updates)


async def http_sse(home: Path, llm: FakeLLM) -> tuple[float, float, int]:
    async with tusk(home, llm) as (_, http):
        headers = {"Authorization": f"Bearer {http.settings.token}", "Origin": f"http://127.0.0.1:{http.port}"}
        times: list[tuple[str, float]] = []
        async with aiohttp.ClientSession(headers=headers) as client, client.post(
                f"http://127.0.0.1:{http.port}/v1/chats/b/messages", json={"text": "tell me", "stream": True}) as resp:
            async for line in resp.content:
                if line.startswith(b"event: "):
                    times.append((line[7:].decode().strip(), time.monotonic()))
        deltas = [t for name, t in times if name == "delta"]
        return deltas[0], times[-1][1], len(deltas)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=600)
    parser.add_argument("--rate", type=float, default=40.0)
    args = parser.parse_args()
    text = " ".join(f"word{i}" for i in range(args.tokens))
    runs = [("telegram private (drafts)", lambda h, llm: telegram(h, llm, group=False)),
            ("telegram group (edits)", lambda h, llm: telegram(h, llm, group=True)),
            ("discord (edits)", discord),
            ("slack thread (chat stream)", lambda h, llm: slack(h, llm, thread=True)),
            ("slack DM (chat.update)", lambda h, llm: slack(h, llm, thread=False)),
            ("http API (SSE)", http_sse)]
    print(f"{args.tokens}-token reply at {args.rate:g} tokens/s (model's own time "
          f"{args.tokens / args.rate:.1f} s); times from the model's first token")
    print(f"{'channel':<28} {'first text':>11} {'final':>9} {'after the last token':>21} {'updates':>8}")
    for name, run in runs:
        with tempfile.TemporaryDirectory() as tmp:
            async with FakeLLM() as llm:
                llm.responder = lambda body: Reply(text=text, token_delay=1 / args.rate)
                first, final, updates = await run(Path(tmp), llm)
                start, end = llm.first_tokens[0], llm.last_tokens[0]
                print(f"{name:<28} {first - start:>9.2f} s {final - start:>7.2f} s {final - end:>19.2f} s "
                      f"{updates:>8}")


if __name__ == "__main__":
    asyncio.run(main())
