"""Where things live: the settings file (TUSK_ENV_FILE, ./.env, the user config dir) and the data dir
(TUSK_HOME, else the user data dir); Tusk says which file it read and creates nothing when asked to check."""

import asyncio
import os
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.errors import ConfigError
from bot.places import default_home, settings_file, user_settings_path
from tests import procs


@pytest.fixture
def bare(tmp_path, monkeypatch):
    """No TUSK_/platform variable in the environment; the working directory is an empty folder."""
    for name in [n for n in os.environ if n.startswith(("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_"))]:
        monkeypatch.delenv(name)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    return here


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_are_the_user_config_and_data_dirs(bare, tmp_path):
    """With no file and no TUSK_HOME: the settings file looked for is ~/.config/tusk/tusk.env, data goes to
    ~/.local/share/tusk (as XDG names them)."""
    assert user_settings_path() == tmp_path / "xdg-config/tusk/tusk.env"
    assert default_home() == tmp_path / "xdg-data/tusk"
    source = settings_file()
    assert source.path == user_settings_path() and not source.found
    assert "none found" in source.describe() and "tusk init" in source.describe()
    assert load_settings().home == tmp_path / "xdg-data/tusk"


def test_the_user_config_file_is_read_and_a_local_env_wins(bare, tmp_path):
    """tusk.env in the user config dir is read; a .env in the working directory wins over it."""
    write(user_settings_path(), "TUSK_MODEL=openai/from-config-dir\nTUSK_HOME=\n")
    settings = load_settings()
    assert settings.model == "openai/from-config-dir" and settings.home == default_home()  # blank: the default
    assert settings_file().describe() == f"read {user_settings_path()} (user config dir)"
    write(bare / ".env", "TUSK_MODEL=openai/from-here\nTUSK_HOME=mine\n")
    settings = load_settings()
    assert settings.model == "openai/from-here" and settings.home == Path("mine")
    assert settings_file().describe() == f"read {bare / '.env'} (working directory)"


def test_tusk_env_file_wins_and_must_exist(bare, tmp_path, monkeypatch):
    """TUSK_ENV_FILE wins over ./.env; naming a file that does not exist stops with the variable's name."""
    write(bare / ".env", "TUSK_MODEL=openai/from-here\n")
    named = write(tmp_path / "elsewhere/tusk.env", "TUSK_MODEL=openai/named\n")
    monkeypatch.setenv("TUSK_ENV_FILE", str(named))
    assert load_settings().model == "openai/named" and "named by TUSK_ENV_FILE" in settings_file().describe()
    monkeypatch.setenv("TUSK_ENV_FILE", str(tmp_path / "missing.env"))
    with pytest.raises(ConfigError, match="TUSK_ENV_FILE=.*missing.env does not exist"):
        load_settings()


def test_mcp_json_is_looked_for_beside_the_settings_file_read(bare, tmp_path):
    """mcp.json is read beside the user config dir's tusk.env when that is the file read."""
    write(user_settings_path(), "TUSK_MODEL=openai/x\n")
    write(user_settings_path().parent / "mcp.json", '{"mcpServers": {"notes": {"command": "true"}}}')
    assert [server.name for server in load_settings().mcp_servers()] == ["notes"]


async def test_run_says_which_file_it_read_and_where_data_goes(fake_llm, tmp_path):
    """`tusk run`'s log names the settings file (the user config dir's here) and the data dir, as the doctor does."""
    home = tmp_path / "home"
    env = procs.clean_env(home=home, TUSK_HTTP_PORT="0")
    config = write(home / ".config/tusk/tusk.env", f"TUSK_MODEL=openai/fake-model\nTUSK_API_BASE={fake_llm.base_url}\n"
                   "TUSK_API_KEY=sk-test\n")
    proc = await procs.start_tusk("run", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    said = f"settings file: read {config} (user config dir); data dir: {home / '.local/share/tusk'}"
    try:
        await asyncio.wait_for(proc.stdout.readline(), 60)  # "Tusk is running ..."
        log = (await asyncio.wait_for(proc.stderr.read(1 << 16), 10)).decode()  # what it logged until then
        assert said in log, log
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
    assert (home / ".local/share/tusk/console-token").exists()  # `tusk run` made its data dir where it said
    code, out, _ = await procs.tusk("doctor", "--no-model", env=env)
    assert f"OK    settings file: read {config} (user config dir)" in out


async def test_checks_and_listings_create_no_data_dir(fake_llm, tmp_path):
    """`tusk doctor`, `tusk chats` and `tusk pairing list` on a fresh machine leave no data folder behind."""
    home = tmp_path / "home"
    env = procs.clean_env(home=home, TUSK_MODEL="openai/fake-model", TUSK_API_BASE=fake_llm.base_url,
                          TUSK_API_KEY="sk-test", TUSK_HTTP_PORT="0")
    code, out, _ = await procs.tusk("doctor", env=env)
    assert code == 0 and f"{home / '.local/share/tusk'} does not exist yet" in out, out
    for args in (("chats",), ("pairing", "list")):
        code, _, err = await procs.tusk(*args, env=env)
        assert code == 0, err
    assert not (home / ".local/share").exists() and not (home / ".config").exists()
