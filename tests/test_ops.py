"""Running unattended: the per-turn log line, no secrets or text in logs, graceful shutdown."""

import asyncio
import json
import signal

import aiohttp

from tests import procs
from tests.fakes.fake_llm import Reply
from tests.test_cli import api_from, env_for

SECRET_KEY = "sk-live-abcdef123456"


async def start(env):
    proc = await procs.start_tusk("run", env=env,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
    return proc, api_from(line)


async def post(api, chat, text):
    url, headers = api
    async with aiohttp.ClientSession(headers=headers) as client:
        async with client.post(f"{url}/v1/chats/{chat}/messages", json={"text": text}) as resp:
            return resp.status, await resp.json()


async def stop(proc):
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(proc.wait(), timeout=30)
    return code, (await proc.stderr.read()).decode()


async def test_json_log_has_one_turn_line_and_no_secrets_or_text(fake_llm, tmp_path):
    """TUSK_LOG_FORMAT=json: a `turn done` line with tokens and timings; no key, token or message text."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TUSK_LOG_FORMAT="json", TUSK_API_KEY=SECRET_KEY,
                  TUSK_HTTP_TOKEN="http-token-987654", TELEGRAM_ALLOW_FROM="1")
    fake_llm.script(Reply(text=f"the reply mentions {SECRET_KEY}"))
    proc, (url, headers) = await start(env)
    async with aiohttp.ClientSession(headers=headers) as client:
        async with client.post(f"{url}/v1/chats/ops/messages", json={"text": "private words"},
                               headers={"Authorization": "Bearer http-token-987654"}) as resp:
            assert resp.status == 200
    code, err = await stop(proc)
    assert code == 0
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    turn = next(line for line in lines if line["msg"].startswith("turn done"))
    assert turn["chat"] == "http:ops" and turn["llm_calls"] == 1 and turn["tokens_in"] > 0
    assert turn["tokens_out"] > 0 and turn["total_ms"] >= turn["llm_ms"] >= 0 and turn["consolidations"] == 0
    for needle in (SECRET_KEY, "http-token-987654", "private words"):
        assert needle not in err


async def test_log_content_is_opt_in(fake_llm, tmp_path):
    """With TUSK_LOG_CONTENT=true the text of messages and replies is logged (and secrets still masked)."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TUSK_LOG_CONTENT="true", TUSK_API_KEY=SECRET_KEY)
    proc, url = await start(env)
    assert (await post(url, "ops", f"words to log {SECRET_KEY}"))[0] == 200
    code, err = await stop(proc)
    assert code == 0 and "words to log ***" in err and "reply: echo:" in err and SECRET_KEY not in err


async def test_sigterm_during_a_slow_turn_finishes_it(fake_llm, tmp_path):
    """SIGTERM while the model is answering: the turn completes, its reply is delivered and saved, exit 0."""
    fake_llm.script(Reply(text="worth the wait", delay=1.5))
    proc, url = await start(env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0"))
    reply = asyncio.create_task(post(url, "slow", "take your time"))
    await fake_llm.wait_for_requests(1, timeout=procs.FIRST_TURN)
    proc.send_signal(signal.SIGTERM)
    assert await reply == (200, {"replies": ["worth the wait"], "formats": ["markdown"]})
    assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    assert "worth the wait" in (tmp_path / "data/chats/http/slow/session.jsonl").read_text()
