"""Fast start-up: litellm loads in the background once Tusk is up; the commands that need no model never load it."""

import asyncio
import json
import shutil
import signal
import sqlite3
import sys

import aiohttp

from bot.app import TuskApp
from memory import tokens
from tests import procs
from tests.fakes.fake_telegram import FakeTelegram
from tests.test_cli import api_from, env_for

# Imported first by every process started with PYTHONPATH at its folder: holds `import litellm` (not a mere
# find_spec, which the tokenizer check makes) until the file HOLD_LITELLM_UNTIL names exists.
HOLD = '''
import importlib.machinery, os, sys, time

class _Held:
    def __init__(self, loader):
        self.loader = loader
    def create_module(self, spec):
        return self.loader.create_module(spec)
    def exec_module(self, module):
        while not os.path.exists(os.environ["HOLD_LITELLM_UNTIL"]):
            time.sleep(0.01)
        module.__loader__ = module.__spec__.loader = self.loader  # litellm reads its files through it
        self.loader.exec_module(module)

class _Gate:
    def find_spec(self, name, path=None, target=None):
        if name != "litellm":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _Held(spec.loader)
        return spec

sys.meta_path.insert(0, _Gate())
'''


def held_litellm(tmp_path):
    """(extra environment, release file): litellm's import in the child waits until the file exists."""
    folder = tmp_path / "hold"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(HOLD)
    release = tmp_path / "release-litellm"
    return {"PYTHONPATH": str(folder), "HOLD_LITELLM_UNTIL": str(release)}, release


async def test_run_answers_while_litellm_loads_then_goes_through_it(fake_llm, tmp_path):
    """With litellm's import held: /healthz answers and a Telegram message is journaled and answered, its
    request sent on the OpenAI wire directly and recorded in the usage ledger; once the import is through,
    with TUSK_LLM_CLIENT=litellm the next turn's request goes through litellm."""
    hold, release = held_litellm(tmp_path)
    async with FakeTelegram() as tg:
        env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TELEGRAM_BOT_TOKEN=tg.token,
                      TELEGRAM_API_BASE=tg.base_url, TELEGRAM_ALLOW_FROM="7", TUSK_LLM_CLIENT="litellm", **hold)
        proc = await procs.start_tusk("run", env=env, stdout=asyncio.subprocess.PIPE,
                                      stderr=asyncio.subprocess.PIPE)
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        url, _ = api_from(line)
        async with aiohttp.ClientSession() as client, client.get(f"{url}/healthz") as resp:
            assert resp.status == 200
        tg.push_message(chat_id=42, text="are you there?", user_id=7)
        await tg.wait_for(lambda: any(m == "sendMessage" for m, _ in tg.calls), timeout=procs.FIRST_TURN)
        sent = [p for m, p in tg.calls if m == "sendMessage"]
        assert "are you there?" in sent[0]["text"] and fake_llm.agents == ["tusk-direct"]
        with sqlite3.connect(tmp_path / "data/usage.sqlite") as db:
            rows = db.execute("SELECT chat, purpose, model, input_tokens, estimated FROM calls").fetchall()
        assert len(rows) == 1 and rows[0][:3] == ("42", "reply", "openai/fake-model") and rows[0][3] > 0
        assert rows[0][4] == 0  # the server's own count, not an estimate
        release.touch()
        while b"litellm loaded" not in await asyncio.wait_for(proc.stderr.readline(), timeout=procs.FIRST_TURN):
            pass
        tg.push_message(chat_id=42, text="and now?", user_id=7)
        await tg.wait_for(lambda: sum(m == "sendMessage" for m, _ in tg.calls) == 2, timeout=30)
        assert fake_llm.agents[1].startswith("AsyncOpenAI")  # litellm's OpenAI client
        proc.send_signal(signal.SIGTERM)
        await asyncio.gather(proc.stdout.read(), proc.stderr.read())
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0


async def test_chat_answers_while_litellm_loads(fake_llm, tmp_path):
    """`tusk chat` shows its prompt and answers its first line with litellm's import held (the default client:
    the OpenAI wire directly, before and after the import)."""
    hold, release = held_litellm(tmp_path)
    proc = await procs.start_tusk("chat", env=env_for(fake_llm, tmp_path, **hold), stdin=asyncio.subprocess.PIPE,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert await asyncio.wait_for(proc.stdout.readuntil(b"you> "), timeout=60)
    proc.stdin.write(b"hello there\n")
    await proc.stdin.drain()
    reply = await asyncio.wait_for(proc.stdout.readuntil(b"you> "), timeout=procs.FIRST_TURN)
    assert b"hello there" in reply and fake_llm.agents == ["tusk-direct"]
    release.touch()
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    await proc.stdout.read()


def imported(tmp_path, env, *args):
    """The top-level modules `tusk *args` imported (python -X importtime), and its exit code."""
    out = procs.run([sys.executable, "-X", "importtime", "-m", "bot.ops.cli", *args], env=env, cwd=tmp_path,
                    capture_output=True, text=True, timeout=120)
    return {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}, \
        out.returncode


def test_admin_commands_and_a_doctor_without_model_never_import_litellm(fake_llm, tmp_path):
    """chats, memory, export, forget, status, a doctor with no model set and `doctor --no-model` run without importing
    litellm (nor platforms); `--no-model` says the model was not checked and sends the provider nothing."""
    env = env_for(fake_llm, tmp_path)
    chat = tmp_path / "data/chats/http/dora"
    chat.mkdir(parents=True)
    (chat / "session.jsonl").write_text(json.dumps({"role": "user", "content": "hi"}) + "\n")
    (chat / "MEMORY.md").write_text("# Memory\n- likes tea\n")
    runs = [("chats",), ("memory", "show", "http:dora"), ("memory", "history", "http:dora"),
            ("export", "http:dora", "-o", str(tmp_path / "dora.tar.gz")), ("forget", "http:dora", "--yes"), ("status",)]
    for args in runs:
        modules, code = imported(tmp_path, env, *args)
        assert code == 0, args
        assert "litellm" not in modules and "openai" not in modules and "telegram" not in modules, args
    no_model = {k: v for k, v in env.items() if k != "TUSK_MODEL"}
    modules, code = imported(tmp_path, no_model, "doctor")
    assert code == 1 and "litellm" not in modules and "mcp" not in modules
    modules, code = imported(tmp_path, env, "doctor", "--no-model")
    assert code == 0 and "litellm" not in modules and fake_llm.requests == []
    out = procs.run([sys.executable, "-m", "bot.ops.cli", "doctor", "--no-model"], env=env, cwd=tmp_path,
                    capture_output=True, text=True, timeout=60).stdout
    assert "SKIP  LLM: openai/fake-model not checked (--no-model)" in out and "All is well." in out, out


async def test_the_window_litellm_knows_is_applied_once_it_is_loaded(make_settings):
    """Until the warm-up ran the budget is the default; after it, the window litellm's model list gives."""
    app = TuskApp(make_settings(TUSK_MODEL="openai/gpt-4o-mini"))
    assert app.consolidator.budget.source == "default"
    await app.ready()
    budget = app.consolidator.budget
    assert budget.source == "litellm" and budget.window == 128_000 and app.profile.known_output == 16_384


async def test_after_the_warm_up_a_full_collection_no_longer_walks_litellm(make_settings):
    """litellm and Tusk's modules are frozen out of the garbage collector once loaded: a full collection,
    which stops every turn while it runs, then walks only what the chats made since."""
    import gc

    app = TuskApp(make_settings())
    await app.ready()
    assert gc.get_freeze_count() > 100_000  # litellm alone is ~390,000 objects
    await app.warmup.aclose()


def test_the_tokenizer_check_reads_the_file_without_building(tmp_path, monkeypatch):
    """The start-up check accepts an intact cl100k_base file and refuses a damaged or missing one."""
    tokens.bundle_intact()  # points TIKTOKEN_CACHE_DIR at the litellm wheel's copy
    bundled = tokens.Path(tokens.os.environ["TIKTOKEN_CACHE_DIR"])
    name = tokens.hashlib.sha1(tokens.CL100K_URL.encode()).hexdigest()
    shutil.copy(bundled / name, tmp_path / name)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokens.bundle_intact()
    (tmp_path / name).write_bytes((tmp_path / name).read_bytes()[:-10])
    assert not tokens.bundle_intact()
    (tmp_path / name).unlink()
    assert not tokens.bundle_intact()
