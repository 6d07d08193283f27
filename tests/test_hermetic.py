"""The suite cannot see the developer's setup: a hostile `.env`, settings file or `TUSK_*` variables where
pytest runs change nothing, and no process a test starts outlives it."""

import asyncio
import os
import signal
from pathlib import Path

import aiohttp
import pytest

from tests import procs
from tests.test_cli import api_from, env_for

HOSTILE = {"TUSK_MODEL": "openai/hostile", "TUSK_API_BASE": "http://127.0.0.1:9/v1", "TUSK_API_KEY": "sk-hostile",
           "TUSK_HTTP_PORT": "1", "TUSK_HOME": "/nonexistent/tusk", "TUSK_LOG_LEVEL": "nonsense",
           "TELEGRAM_BOT_TOKEN": "1:hostile", "TELEGRAM_API_BASE": "http://127.0.0.1:9",
           "DISCORD_BOT_TOKEN": "hostile", "SLACK_BOT_TOKEN": "xoxb-hostile", "SLACK_APP_TOKEN": "xapp-hostile"}


def write_hostile(folder: Path) -> Path:
    """A filled-in settings file that would break any Tusk reading it; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".env"
    path.write_text("".join(f"{k}={v}\n" for k, v in HOSTILE.items()))
    return path


@pytest.fixture
def hostile_setup(tmp_path, monkeypatch):
    """The developer's side: a hostile .env in the current directory and in the user config dir, and
    hostile variables (TUSK_ENV_FILE among them) in the environment pytest runs in."""
    here = tmp_path / "developer"
    env_file = write_hostile(here)
    config = tmp_path / "developer-home/.config/tusk"
    config.mkdir(parents=True)
    (config / "tusk.env").write_text(env_file.read_text())
    monkeypatch.chdir(here)
    monkeypatch.setenv("HOME", str(tmp_path / "developer-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "developer-home/.config"))
    monkeypatch.setenv("TUSK_ENV_FILE", str(env_file))
    for name, value in HOSTILE.items():
        monkeypatch.setenv(name, value)
    return here


def test_clean_env_keeps_nothing_of_the_developer(hostile_setup):
    """clean_env passes PATH and locale only: no TUSK_/platform variable, a temporary HOME and config dir."""
    env = procs.clean_env(TUSK_MODEL="openai/fake-model")
    assert not [k for k in env if k.startswith(("TELEGRAM_", "DISCORD_", "SLACK_"))]
    assert [k for k in env if k.startswith("TUSK_")] == ["TUSK_MODEL"]
    assert "developer-home" not in env["HOME"] and env["XDG_CONFIG_HOME"].startswith(env["HOME"])
    assert env["PATH"] == os.environ["PATH"]


async def test_terminal_chat_ignores_a_hostile_env_where_pytest_runs(hostile_setup, fake_llm, tmp_path):
    """`tusk chat` through the suite's helper answers through the fake LLM, keeps data in the test's folder."""
    code, out, err = await procs.tusk("chat", "--chat", "h", env=env_for(fake_llm, tmp_path), stdin=b"hello\n")
    assert code == 0, err
    assert "echo:" in out and len(fake_llm.requests) == 1
    assert (tmp_path / "data/chats/terminal/h/session.jsonl").exists()
    assert "hostile" not in out + err


async def test_run_ignores_a_hostile_env_and_is_killed_at_the_end(hostile_setup, fake_llm, tmp_path):
    """`tusk run` via the helper: HTTP only on a free port (not 1), answers, and its group dies at cleanup."""
    proc = await procs.start_tusk("run", env=env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0"),
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
    assert "only the HTTP channel" in line, line
    url, headers = api_from(line)
    assert not url.endswith(":1")
    async with aiohttp.ClientSession(headers=headers) as client:
        async with client.post(f"{url}/v1/chats/z/messages", json={"text": "ping"}) as resp:
            assert resp.status == 200 and (await resp.json())["replies"][0].startswith("echo:")
    assert procs.cleanup() == []  # what the autouse fixture does after a failing test too
    assert await asyncio.wait_for(proc.wait(), timeout=10) == -signal.SIGKILL


def test_helpers_refuse_an_inherited_environment():
    """Starting a process without an explicit env is an error, not a silent inheritance."""
    with pytest.raises(ValueError, match="explicit env"):
        procs.popen(["true"], env=None)


@pytest.fixture
def pytest_started_in_hostile_dir(tmp_path, monkeypatch):
    """pytest's own working directory holds a hostile .env and TUSK_* variables are set (before make_settings)."""
    monkeypatch.chdir(write_hostile(tmp_path / "start").parent)
    for name, value in HOSTILE.items():
        monkeypatch.setenv(name, value)


def test_in_process_settings_never_read_the_starting_directory(pytest_started_in_hostile_dir, make_settings, tmp_path):
    """conftest's make_settings moves to tmp_path and drops TUSK_/platform variables: the hostile .env is unused."""
    settings = make_settings()
    assert Path.cwd() == tmp_path and not (tmp_path / ".env").exists()
    assert settings.model == "openai/fake-model" and settings.http_port == 0
    assert settings.telegram_bot_token is None and str(settings.home) == str(tmp_path / "data")
