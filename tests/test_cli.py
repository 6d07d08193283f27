"""The `tusk` command as a user runs it: a real process, real stdin/stdout."""

import asyncio
import re

from tests import procs



def env_for(fake_llm, tmp_path, **extra):
    """A clean environment (tests.procs.clean_env) for a Tusk on the fake LLM with its data in `tmp_path/data`."""
    base = {"TUSK_HOME": tmp_path / "data", "TUSK_MODEL": "openai/fake-model", "TUSK_API_BASE": fake_llm.base_url,
            "TUSK_API_KEY": "sk-test", "TUSK_LLM_RETRIES": "0"}
    return procs.clean_env(**{**base, **extra})


def api_from(line, home=None):
    """(base URL, headers for API calls) from the line `tusk run` prints: the token comes from the URL's
    `#token=` fragment (first start) or else `$TUSK_HOME/console-token`; writes need the Origin."""
    url = re.search(r"http://[^\s/]+(/#token=\S+)?", line)
    base, token = url[0].split("/#token=")[0], (url[1] or "").removeprefix("/#token=")
    if not token and home is not None and (home / "console-token").exists():
        token = (home / "console-token").read_text().strip()
    return base, {"Origin": base, **({"Authorization": f"Bearer {token}"} if token else {})}


async def tusk(*args, env, stdin=b"", cwd=None):
    """Run `tusk *args` to the end in a temporary directory: (exit code, stdout, stderr)."""
    return await procs.tusk(*args, env=env, stdin=stdin, cwd=cwd)


async def test_terminal_chat_holds_a_conversation(fake_llm, tmp_path):
    """`tusk chat` answers typed lines through the model, handles commands, and keeps the chat's memory on disk."""
    code, out, err = await tusk("chat", "--chat", "work", env=env_for(fake_llm, tmp_path),
                                stdin=b"hello\n/status\nsecond\n")
    assert code == 0, err
    assert "Tusk> echo: [context: " in out and "Messages in this chat: 2" in out
    assert (tmp_path / "data/chats/terminal/work/session.jsonl").exists()
    assert len(fake_llm.requests) == 2 and fake_llm.requests[1]["messages"][1]["content"] == "hello"


async def test_missing_model_fails_at_start_naming_the_variable(fake_llm, tmp_path):
    """No TUSK_MODEL: exit 2 with a message that says exactly what to set."""
    env = env_for(fake_llm, tmp_path)
    del env["TUSK_MODEL"]
    code, out, err = await tusk("run", env=env)
    assert code == 2 and "TUSK_MODEL is not set" in err and "openai/gpt-4o-mini" in err


async def test_invalid_value_names_the_variable(fake_llm, tmp_path):
    """A malformed setting stops Tusk at start with the variable's name."""
    code, out, err = await tusk("run", env=env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="eighty"))
    assert code == 2 and "TUSK_HTTP_PORT" in err


async def test_help_lists_commands(fake_llm, tmp_path):
    """`tusk --help` lists the commands."""
    code, out, _ = await tusk("--help", env=env_for(fake_llm, tmp_path))
    assert code == 0 and "run" in out and "chat" in out


async def test_run_serves_http_and_stops_cleanly_on_sigterm(fake_llm, tmp_path):
    """`tusk run` with no platform credentials says it runs the HTTP channel alone, answers, exits 0 on SIGTERM."""
    import aiohttp
    import signal

    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    proc = await procs.start_tusk("run", env=env,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
    assert "only the HTTP channel" in line
    url, headers = api_from(line)
    async with aiohttp.ClientSession(headers=headers) as client:
        async with client.post(f"{url}/v1/chats/z/messages", json={"text": "ping"}) as resp:
            assert resp.status == 200 and (await resp.json())["replies"][0].startswith("echo:")
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), timeout=30) == 0


def test_every_command_names_a_handler_that_exists():
    """Each `tusk` command's parser names its handler (module:function), and that function exists."""
    from bot.ops import cli

    commands = cli._parser()._subparsers._group_actions[0].choices
    handlers = {name: parser.get_default("handler") for name, parser in commands.items()}
    assert len(handlers) == 19 and all(callable(cli._handler(handler)) for handler in handlers.values()), handlers


async def test_errors_are_one_line_and_an_exit_code_for_every_command(fake_llm, tmp_path):
    """A missing API key or a damaged pairing.json is one `tusk: ...` line and exit 1 (no doctor hint outside
    run and chat, no traceback); a bad setting is exit 2 whatever the command."""
    env = env_for(fake_llm, tmp_path)
    code, _, err = await tusk("apikey", "revoke", "nope", env=env)
    assert code == 1 and err == "tusk: no API key 'nope': `tusk apikey list` shows them\n"
    (tmp_path / "data").mkdir(mode=0o700)
    (tmp_path / "data/pairing.json").write_text("{")
    code, _, err = await tusk("pairing", "list", env=env)
    assert code == 1 and err.startswith("tusk: ") and "pairing.json" in err and len(err.splitlines()) == 1, err
    assert "tusk doctor" not in err
    code, _, err = await tusk("chats", env={**env, "TUSK_HTTP_PORT": "high"})
    assert code == 2 and err.startswith("tusk: invalid configuration: TUSK_HTTP_PORT:") and len(err.splitlines()) == 1
