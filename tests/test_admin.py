"""The admin CLI (`tusk chats`, `memory`, `forget`, `export`) and `tusk doctor`."""

import json
import re
import tarfile

from bot.ops import doctor
from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.fake_telegram import FakeTelegram
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli
from tests import kept


async def test_chats_memory_and_history_from_the_data_dir(tusk, fake_llm, tmp_path):
    """`tusk chats` lists every chat with its counts; `memory show/history` print its files."""
    await tusk.say("alice", "hello")
    await tusk.say("bob", "hi")
    files = kept.files(tusk, "http", "alice")
    files.memory.write_text("- Alice likes tea\n")
    files.history.write_text("## 2026-11-02 10:00 UTC\nPlanned the trip to Oslo.\n")
    env = env_for(fake_llm, tmp_path)
    code, out, _ = await tusk_cli("chats", env=env)
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert code == 0 and set(rows) == {"http:alice", "http:bob"}
    assert rows["http:alice"][1] == "2" and rows["http:alice"][4] == "1"  # 2 messages, 1 history entry
    assert (await tusk_cli("memory", "show", "http:alice", env=env))[1].strip() == "- Alice likes tea"
    assert "Oslo" in (await tusk_cli("memory", "history", "http:alice", env=env))[1]
    code, _, err = await tusk_cli("memory", "show", "http:nobody", env=env)
    assert code == 1 and "no chat http:nobody" in err


async def test_forget_beside_a_running_bot(tusk, fake_llm, tmp_path):
    """`tusk forget CHAT --yes` reports each deleted file, and the running bot no longer sends that history."""
    await tusk.say("carol", "my secret is 4711")
    env = env_for(fake_llm, tmp_path)
    code, out, _ = await tusk_cli("forget", "http:carol", env=env, stdin=b"n\n")
    assert code == 1 and "session messages" in out and "Nothing deleted" in out
    code, out, _ = await tusk_cli("forget", "http:carol", "--yes", env=env)
    assert code == 0 and "deleted 2 session messages (session.jsonl)" in out
    assert not (tusk.settings.home / "chats/http/carol").exists()
    await tusk.say("carol", "what is my secret?")
    assert "4711" not in json.dumps(fake_llm.requests[-1]["messages"])


async def test_export_writes_the_chat_files(tusk, fake_llm, tmp_path):
    """`tusk export CHAT -o FILE` writes a .tar.gz holding the chat's session and memory."""
    await tusk.say("dave", "hello")
    kept.files(tusk, "http", "dave").memory.write_text("- Dave")
    target = tmp_path / "dave.tar.gz"
    code, out, _ = await tusk_cli("export", "http:dave", "-o", str(target), env=env_for(fake_llm, tmp_path))
    assert code == 0 and "2 files" in out
    with tarfile.open(target) as tar:
        assert sorted(tar.getnames()) == ["dave/MEMORY.md", "dave/session.jsonl"]
        assert tar.extractfile("dave/MEMORY.md").read() == b"- Dave"


async def test_doctor_all_well_with_a_good_setup(make_settings, fake_llm):
    """Against a working LLM and a Telegram token the API accepts, every check passes but the open allow-list."""
    fake_llm.models = [{"id": "fake-model", "object": "model", "max_model_len": 32768}]
    fake_llm.script(Reply(text=None, tool_calls=[("c", "current_time", {})], reasoning="the tool tells the time"))
    async with FakeTelegram(token="123:GOOD") as tg:
        checks = await doctor.run_checks(make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url))
    verdicts = {c.name: c.verdict for c in checks}
    assert verdicts == {"config": "ok", "data dir": "ok", "HTTP access": "ok", "HTTP port": "ok", "tokenizer": "ok",
                        "LLM": "ok",
                        "tools": "ok", "reasoning": "ok", "window": "ok", "local models": "ok", "truncation": "ok",
                        "price": "ok", "Telegram": "ok", "web": "ok", "allow-list": "warn"}
    detail = {c.name: c.detail for c in checks}
    assert "32,768 tokens (server (/v1/models))" in detail["window"] and "fake-model" in detail["local models"]
    assert fake_llm.requests[0]["tools"][0]["function"]["name"] == "current_time"
    assert fake_llm.requests[0]["max_tokens"] <= 64 and doctor.exit_code(checks) == 0


async def test_doctor_sees_a_server_that_cuts_prompts_and_a_model_answering_in_text(make_settings, fake_llm):
    """A reply in text is a tools warning; a server counting far fewer prompt tokens than sent fails with the fix."""
    fake_llm.script(Reply(text="It is noon."), Reply(text="OK", usage={"prompt_tokens": 200, "completion_tokens": 1,
                                                                      "total_tokens": 201}))
    checks = {c.name: c for c in await doctor.run_checks(make_settings(TUSK_CONTEXT_WINDOW=4096))}
    assert checks["tools"].verdict == "warn" and "4,096 tokens (configured)" in checks["window"].detail
    assert checks["truncation"].verdict == "fail" and "ollama_chat/" in checks["truncation"].fix


async def test_doctor_names_what_is_broken(make_settings, fake_llm):
    """A refused platform token, a failing LLM and unreachable APIs (platform and model) each fail with a fix;
    exit code 1."""
    fake_llm.script(Reply(status=401))
    async with FakeTelegram(token="123:GOOD") as tg:
        checks = await doctor.run_checks(make_settings(TELEGRAM_BOT_TOKEN="123:WRONG", TELEGRAM_API_BASE=tg.base_url,
                                                       TELEGRAM_ALLOW_FROM="7"))
    failed = {c.name: c for c in checks if c.verdict == "fail"}
    assert set(failed) == {"LLM", "Telegram"} and doctor.exit_code(checks) == 1
    assert "@BotFather" in failed["Telegram"].fix and "TUSK_API_KEY" in failed["LLM"].fix  # a 401: the key
    checks = await doctor.run_checks(make_settings(TELEGRAM_BOT_TOKEN="1:X", TELEGRAM_API_BASE="http://127.0.0.1:9",
                                                   TUSK_API_BASE="http://127.0.0.1:9/v1"))
    assert next(c for c in checks if c.name == "Telegram").detail.startswith("cannot reach")
    llm = next(c for c in checks if c.name == "LLM")
    assert llm.verdict == "fail" and "server running at http://127.0.0.1:9/v1" in llm.fix and doctor.exit_code(checks) == 1


async def test_doctor_checks_discord_and_slack_tokens(make_settings, fake_llm):
    """Discord `users/@me` and Slack `auth.test` accept the right tokens and refuse wrong ones."""
    async with FakeDiscord(token="dc-good") as dc, FakeSlack() as slack:
        def settings(dc_token, slack_token):
            return make_settings(DISCORD_BOT_TOKEN=dc_token, DISCORD_API_BASE=dc.api_base, DISCORD_ALLOW_FROM="1",
                                 SLACK_BOT_TOKEN=slack_token, SLACK_APP_TOKEN=slack.app_token,
                                 SLACK_API_URL=slack.api_url, SLACK_ALLOW_FROM="U1")

        good = {c.name: c.verdict for c in await doctor.run_checks(settings("dc-good", slack.bot_token))}
        bad = {c.name: c for c in await doctor.run_checks(settings("dc-bad", "xoxb-bad"))}
    assert good["Discord"] == good["Slack"] == "ok" and "allow-list" not in good
    assert bad["Discord"].verdict == bad["Slack"].verdict == "fail"
    assert "Developer Portal" in bad["Discord"].fix and "xoxb-" in bad["Slack"].fix


async def test_doctor_command_exit_codes(fake_llm, tmp_path):
    """`tusk doctor` prints one verdict per check and exits 0 when nothing fails, 1 when something does."""
    code, out, _ = await tusk_cli("doctor", env=env_for(fake_llm, tmp_path))
    assert code == 0 and "OK    LLM" in out and "All is well." in out
    broken = env_for(fake_llm, tmp_path, TUSK_HTTP_HOST="0.0.0.0", TUSK_HTTP_TOKEN="short")  # the model: in-process
    code, out, _ = await tusk_cli("doctor", "--no-model", env=broken)
    assert code == 1 and "FAIL  HTTP access" in out and "fix:" in out and "Something is broken" in out


async def test_doctor_output_never_contains_a_configured_secret(fake_llm, tmp_path):
    """APIs that echo the credentials back in their errors: `tusk doctor` prints them masked, as the log does."""
    from aiohttp import web

    secrets = {"TUSK_API_KEY": "sk-doctor-secret-1", "TUSK_HTTP_TOKEN": "http-doctor-secret-2",
               "TELEGRAM_BOT_TOKEN": "123:doctor-secret-3", "TELEGRAM_WEBHOOK_SECRET": "hook-doctor-secret-4",
               "SLACK_BOT_TOKEN": "xoxb-doctor-secret-5", "SLACK_APP_TOKEN": "xapp-doctor-secret-6",
               "DISCORD_BOT_TOKEN": "discord-doctor-secret-7"}

    async def echo(request: web.Request) -> web.Response:
        told = f"{request.path} {request.headers.get('Authorization', '')} {await request.text()}"
        return web.json_response({"ok": False, "description": told, "error": told,
                                  "message": told, "detail": told}, status=401)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        env = env_for(fake_llm, tmp_path, TUSK_API_BASE=base + "/v1", TELEGRAM_API_BASE=base, SLACK_API_URL=base + "/api/",
                      DISCORD_API_BASE=base, TUSK_HTTP_HOST="0.0.0.0", **secrets)
        code, out, err = await tusk_cli("doctor", env=env)
    finally:
        await runner.cleanup()
    assert code == 1 and "FAIL  Telegram" in out and "***" in out
    assert "FAIL  HTTP access" in out and "at least 32" in out  # the rule `tusk run` enforces
    for name, value in secrets.items():
        assert value not in out and value not in err, name


async def test_doctor_times_the_models_answer_apart_from_loading_litellm(fake_llm, tmp_path):
    """`tusk doctor` in a fresh process: the model's answer time is the request's own (at least the model's
    1.5 s, less than that plus litellm's import), and litellm's import is reported beside it, not inside it."""
    fake_llm.script(Reply(text=None, tool_calls=[("t1", "current_time", {})], delay=1.5))
    code, out, err = await tusk_cli("doctor", env=env_for(fake_llm, tmp_path))
    assert code == 0, out + err
    timing = re.search(r"OK    LLM: fake-model answered in (\d+\.\d)s \(loading litellm took (\d+\.\d)s\)", out)
    assert timing is not None, out
    answered, loading = float(timing[1]), float(timing[2])
    assert 1.5 <= answered < 1.5 + loading  # the import's seconds are not in the model's figure
