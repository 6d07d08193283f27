"""`tusk init`: answers checked live against the fakes, the settings file written 0600 and edited in place,
nothing written when a check fails; once through a pseudo-terminal answering its questions."""

import asyncio
import contextlib
import io
import os
import sys
from pathlib import Path

import pexpect
import pytest

from bot.ops import cli
from bot.ops.envfile import edited
from bot.ops.init import run
from bot.places import user_settings_path
from tests import procs
from tests.fakes.fake_telegram import FakeTelegram


def init_env(home, fake_llm, **extra):
    """A clean environment whose user config dir is in `home` (tests/procs.py)."""
    return procs.clean_env(home=home, TUSK_HTTP_PORT="0", **extra)


@pytest.fixture
def here(tmp_path, monkeypatch):
    """In-process `tusk init`: no TUSK_/platform variable, an empty working directory, the user config dir
    under tmp_path (tests/conftest.py). Returns `init(*args)` -> (exit code, stdout, stderr)."""
    for name in [n for n in os.environ if n.startswith(("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TUSK_HTTP_PORT", "0")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)

    async def init(*args):
        parsed = cli._parser().parse_args(["init", *args])
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = await asyncio.to_thread(run, parsed)  # its own event loops, beside the fakes' loop
        return code, out.getvalue(), err.getvalue()

    return init


def llm_flags(fake_llm):
    return ("--model", "openai/fake-model", "--api-base", fake_llm.base_url)


async def test_yes_writes_a_private_file_then_runs_the_doctor(fake_llm, here, tmp_path, monkeypatch):
    """Good key and Telegram token: ~/.config/tusk/tusk.env is written 0600, the doctor runs, the next command
    is printed; the key never appears in the output."""
    fake_llm.api_keys = {"sk-right-key-123"}
    monkeypatch.setenv("TUSK_API_KEY", "sk-right-key-123")
    async with FakeTelegram(token="123:ABC") as tg:
        monkeypatch.setenv("TELEGRAM_API_BASE", tg.base_url)
        code, out, err = await here("--yes", *llm_flags(fake_llm), "--telegram-token", "123:ABC")
    settings = user_settings_path()
    assert code == 0, out + err
    assert "OK    LLM: " in out and "OK    Telegram: token accepted: @tusk_bot" in out
    assert f"Wrote {settings}" in out and "Running `tusk doctor`" in out and "All is well." in out
    assert f"OK    settings file: read {settings} (user config dir)" in out
    assert "Next: tusk run" in out and "sk-right-key-123" not in out + err
    assert settings.stat().st_mode & 0o777 == 0o600 and settings.parent.stat().st_mode & 0o777 == 0o700
    text = settings.read_text()
    assert f"TUSK_API_BASE={fake_llm.base_url}\n" in text and "TUSK_API_KEY=sk-right-key-123\n" in text
    assert "TELEGRAM_BOT_TOKEN=123:ABC\n" in text


async def test_a_wrong_key_writes_nothing_and_says_why(fake_llm, here, monkeypatch):
    """A key the provider refuses: the check fails with the fix, nothing is written, exit 1; --save-anyway writes."""
    fake_llm.api_keys = {"sk-right-key-123"}
    monkeypatch.setenv("TUSK_API_KEY", "sk-wrong-key-456")
    code, out, err = await here("--yes", *llm_flags(fake_llm))
    assert code == 1 and "FAIL  LLM: openai/fake-model did not answer" in out
    assert "refused the API key (TUSK_API_KEY)" in out
    assert "Nothing written" in out and "--save-anyway" in out and "sk-wrong-key-456" not in out + err
    assert not user_settings_path().parent.exists()
    code, out, _ = await here("--yes", *llm_flags(fake_llm), "--save-anyway")
    assert "Wrote" in out and user_settings_path().exists()


async def test_a_wrong_telegram_token_is_explained(fake_llm, here, monkeypatch):
    """A token Telegram refuses fails with where to copy it from; nothing is written."""
    async with FakeTelegram(token="123:ABC") as tg:
        monkeypatch.setenv("TELEGRAM_API_BASE", tg.base_url)
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "999:WRONG")
        code, out, _ = await here("--yes", *llm_flags(fake_llm))
    assert code == 1 and "FAIL  Telegram: token refused" in out and "@BotFather" in out
    assert not user_settings_path().exists()


async def test_rerun_edits_the_file_in_place(fake_llm, here, tmp_path):
    """Re-running changes only the keys asked; comments, unknown lines and other settings stay as they were."""
    local = Path.cwd() / ".env"  # a .env in the working directory is the file Tusk reads, so init edits it
    local.write_text(f"# my notes\nTUSK_MODEL=openai/old\nTUSK_API_BASE={fake_llm.base_url}\nMY_OWN=keep me\n"
                     "TUSK_TIMEZONE=Europe/Berlin  # comment kept\n")
    local.chmod(0o644)
    code, out, err = await here("--yes", "--model", "openai/fake-model")
    assert code == 0, out + err
    assert local.read_text() == (f"# my notes\nTUSK_MODEL=openai/fake-model\nTUSK_API_BASE={fake_llm.base_url}\n"
                                 "MY_OWN=keep me\nTUSK_TIMEZONE=Europe/Berlin  # comment kept\n")
    assert local.stat().st_mode & 0o777 == 0o600 and not user_settings_path().parent.exists()
    assert f"settings file: read {local}" in out and "Next: tusk run" in out


async def test_file_elsewhere_gets_the_variable_in_the_next_command(fake_llm, here, tmp_path):
    """--file writes that file; the doctor reads it and the next command names it with TUSK_ENV_FILE."""
    target = tmp_path / "conf" / "bot.env"
    code, out, err = await here("--yes", *llm_flags(fake_llm), "--no-check", "--file", str(target))
    assert code == 0, out + err
    assert "TUSK_MODEL=openai/fake-model\n" in target.read_text() and f"settings file: read {target}" in out
    assert f"Next: TUSK_ENV_FILE={target} tusk run" in out and "OK    LLM" in out  # the doctor's own check


async def test_yes_without_a_model_and_no_terminal_are_clear_errors(fake_llm, tmp_path):
    """--yes with no model names --model; without --yes and without a terminal, init says how to script it."""
    code, _, err = await procs.tusk("init", "--yes", env=init_env(tmp_path, fake_llm))
    assert code == 2 and "--model" in err and "Traceback" not in err
    code, _, err = await procs.tusk("init", env=init_env(tmp_path, fake_llm))  # stdin is a pipe
    assert code == 2 and "no terminal" in err and "--yes" in err
    assert not (tmp_path / ".config").exists()


def test_edited_keeps_every_other_byte():
    """Only the bindings of the keys asked change; a missing key is appended; odd values are quoted."""
    text = "# head\n\nA=1\nexport B=\"x y\"  # note\nA=2\nno newline=here"
    assert edited(text, {"A": "new", "C": "has space's"}) == (
        "# head\n\nA=new\nexport B=\"x y\"  # note\nA=new\nno newline=here\nC='has space\\'s'\n")
    with pytest.raises(ValueError):
        edited("", {"A": "two\nlines"})


async def test_interactive_init_through_a_terminal(fake_llm, tmp_path):
    """Answering the questions on a pseudo-terminal: provider, URL, model, hidden key, Telegram; a refused
    token is asked again; the file holds the answers."""
    fake_llm.api_keys = {"sk-typed-key-789"}
    async with FakeTelegram(token="123:ABC") as tg:
        env = init_env(tmp_path, fake_llm, TELEGRAM_API_BASE=tg.base_url, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm")
        child = procs.spawn_pty([sys.executable, "-m", "bot.ops.cli", "init"], env=env, encoding="utf-8", timeout=60,
                                dimensions=(40, 200))
        child.logfile_read = seen = io.StringIO()
        try:
            steps = [("Model provider", "9"), ("Server URL", fake_llm.base_url), ("Model", "openai/fake-model"),
                     ("API key", "sk-typed-key-789"), ("OK    LLM", None),
                     ("does not say its window", None), ("Context window", "8192"), ("Connect Telegram", "y"),
                     ("Telegram bot token", "999:WRONG"), ("token refused", None), ("Answer again", "y"),
                     ("Telegram bot token", "123:ABC"), ("token accepted", None), ("Connect Discord", "n"),
                     ("Connect Slack", ""), ("Wrote", None), ("Next: tusk run", None)]
            for expected, answer in steps:
                await asyncio.to_thread(child.expect, expected)
                if answer is not None:
                    child.sendline(answer)
            await asyncio.to_thread(child.expect, pexpect.EOF)
        finally:
            child.close(force=True)
    text = (tmp_path / ".config/tusk/tusk.env").read_text()
    assert "TUSK_API_KEY=sk-typed-key-789\n" in text and "TELEGRAM_BOT_TOKEN=123:ABC\n" in text
    assert "TUSK_MODEL=openai/fake-model\n" in text and "sk-typed-key-789" not in seen.getvalue()
    assert "TUSK_CONTEXT_WINDOW=8192\n" in text


async def test_answering_again_keeps_the_answers_and_asks_only_what_failed(fake_llm, tmp_path):
    """A model named without its provider gets a clear sentence (the route to add, no litellm text, no server
    hint); answering again asks only the model, then only the refused key, everything else kept; a local
    server's window is asked with the server's own figure offered, and written."""
    fake_llm.api_keys = {"sk-right-key-123"}
    fake_llm.models = [{"id": "fake-model", "object": "model", "max_model_len": 12288}]  # as vLLM lists it
    env = init_env(tmp_path, fake_llm, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm")
    child = procs.spawn_pty([sys.executable, "-m", "bot.ops.cli", "init"], env=env, encoding="utf-8", timeout=60,
                            dimensions=(40, 200))
    child.logfile_read = seen = io.StringIO()
    questions = [r"Model provider \(number\)", r"Server URL[^\n]*:", r"Model \(a litellm model string\)[^\n]*:",
                 r"API key[^\n]*:", r"Context window[^\n]*:", r"Connect Telegram"]

    answered = [-1]

    async def next_question(expected: int, answer: str) -> None:
        """The next question asked is `expected` (prompt_toolkit redraws the one just answered as it is typed)."""
        asked = answered[0]
        while asked == answered[0]:
            asked = await asyncio.to_thread(child.expect, questions)
        assert asked == expected, f"asked {questions[asked]!r}, expected {questions[expected]!r}"
        child.sendline(answer)
        answered[0] = asked

    try:
        await next_question(0, "9")
        await next_question(1, fake_llm.base_url)
        await next_question(2, "fake-model")
        await next_question(3, "sk-wrong-key-456")
        await asyncio.to_thread(child.expect, "FAIL  LLM: fake-model names no provider")
        await asyncio.to_thread(child.expect, "fix: set TUSK_MODEL to openai/fake-model")
        await asyncio.to_thread(child.expect, "Answer again")
        child.sendline("y")
        await asyncio.to_thread(child.expect, r"Model \(a litellm model string\) \[fake-model\]")  # the answer kept
        child.sendline("openai/fake-model")
        answered[0] = 2
        await asyncio.to_thread(child.expect, "refused the API key")
        await asyncio.to_thread(child.expect, "Answer again")
        child.sendline("y")
        await next_question(3, "sk-right-key-123")  # only the key: provider, URL and model are kept
        await asyncio.to_thread(child.expect, "OK    LLM")
        await asyncio.to_thread(child.expect, "a window of 12,288 tokens")
        await asyncio.to_thread(child.expect, r"Context window \(tokens\) \[12288\]")
        child.sendline("")
        for platform in ("Telegram", "Discord", "Slack"):
            await asyncio.to_thread(child.expect, f"Connect {platform}")
            child.sendline("n")
        await asyncio.to_thread(child.expect, "Wrote")
        await asyncio.to_thread(child.expect, pexpect.EOF)
    finally:
        child.close(force=True)
    out = seen.getvalue()
    assert "LLM Provider NOT provided" not in out and "is the server running" not in out
    text = (tmp_path / ".config/tusk/tusk.env").read_text()
    assert f"TUSK_API_BASE={fake_llm.base_url}\n" in text and "TUSK_MODEL=openai/fake-model\n" in text
    assert "TUSK_API_KEY=sk-right-key-123\n" in text and "TUSK_CONTEXT_WINDOW=12288\n" in text


async def test_an_unwritable_folder_is_one_clear_line(fake_llm, here, tmp_path):
    """A settings file whose folder cannot be written: one line naming the file and the way out, no traceback."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "sub").write_text("a file where a folder should be")
    code, out, err = await here("--yes", "--model", "openai/fake-model", "--no-check", "--file",
                                str(locked / "sub" / "tusk.env"))
    assert code == 1 and "tusk init: cannot write" in err and "--file PATH" in err and "Wrote" not in out


async def test_the_new_files_header_points_to_a_variable_list_that_exists(fake_llm, here):
    """A settings file `tusk init` starts says where every variable is described, and those files exist."""
    import re

    code, out, err = await here("--yes", *llm_flags(fake_llm), "--no-check")
    assert code == 0, out + err
    header = "".join(line for line in user_settings_path().read_text().splitlines(True) if line.startswith("#"))
    named = re.findall(r"[\w./-]+\.(?:example|md)\b", header)
    repo = Path(__file__).parents[1]
    assert ".env.example" in named and "docs/reference/configuration.md" in named
    assert all((repo / name).is_file() for name in named) and "README" not in header
