"""What a new user meets first: `tusk --version`, errors one can act on, and what `tusk doctor` points out."""

import socket
from importlib.metadata import version

from bot.ops import doctor
from tests import procs
from tests.test_cli import env_for
from tests import kept


async def tusk_in(tmp_path, *args, env, stdin=b""):
    """`tusk ARGS` in `tmp_path` with exactly `env` (tests/procs.py: killed if it outlives the test)."""
    return await procs.tusk(*args, env=env, cwd=tmp_path, stdin=stdin, timeout=60)


def busy_port():
    """A socket listening on a loopback port that is not Tusk (close it when done)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


async def test_version_is_the_installed_package_version(fake_llm, tmp_path):
    """`tusk --version` prints the version pip recorded for the package."""
    code, out, _ = await tusk_in(tmp_path, "--version", env=env_for(fake_llm, tmp_path))
    assert code == 0 and out.strip() == f"tusk {version('tuskbot')}"


async def test_run_on_a_busy_port_is_one_line_naming_the_setting(fake_llm, tmp_path):
    """`tusk run` on a port in use exits non-zero with one line naming TUSK_HTTP_PORT and the fix, no traceback."""
    with busy_port() as sock:
        port = sock.getsockname()[1]
        code, out, err = await tusk_in(tmp_path, "run", env=env_for(fake_llm, tmp_path, TUSK_HTTP_PORT=str(port)))
    last = err.strip().splitlines()[-1]
    assert code == 2 and "Traceback" not in err and "Tusk is running" not in out
    assert last.startswith(f"tusk: TUSK_HTTP_PORT={port}:") and "already in use" in last and "free port" in last


async def test_forget_without_a_terminal_asks_for_yes(tusk, fake_llm, tmp_path):
    """`tusk forget` with stdin closed and no --yes names --yes, deletes nothing; with --yes it deletes."""
    await tusk.say("dora", "keep this")
    env = env_for(fake_llm, tmp_path)
    code, out, err = await tusk_in(tmp_path, "forget", "http:dora", env=env)
    assert code == 1 and "--yes" in err and "EOFError" not in err and "Traceback" not in err
    assert "session messages" in out and kept.files(tusk, "http", "dora").session.exists()
    code, out, _ = await tusk_in(tmp_path, "forget", "http:dora", "--yes", env=env)
    assert code == 0 and "deleted 2 session messages" in out


async def test_doctor_names_the_settings_file_and_typos(fake_llm, tmp_path):
    """The doctor says which file it read and suggests the known name for a typo'd variable, file or environment."""
    (tmp_path / ".env").write_text("TUSK_MODLE=openai/gpt-4o\nTELEGRAM_BOT_TOKN=1:X\n")
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TUSK_HTTP_PROT="9000", SLACK_WHATEVER="1")
    code, out, _ = await tusk_in(tmp_path, "doctor", "--no-model", env=env)  # the model is another test's
    assert code == 0 and f"OK    settings file: read {tmp_path / '.env'}" in out
    assert f"WARN  unknown variable: TUSK_MODLE (in {tmp_path / '.env'})" in out and "did you mean TUSK_MODEL?" in out
    assert "did you mean TELEGRAM_BOT_TOKEN?" in out
    assert "TUSK_HTTP_PROT (in the environment)" in out and "did you mean TUSK_HTTP_PORT?" in out
    assert "SLACK_WHATEVER (in the environment)" in out and "OK    HTTP port: TUSK_HTTP_PORT=0" in out
    (tmp_path / ".env").unlink()
    code, out, _ = await tusk_in(tmp_path, "doctor", "--no-model", env=env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0"))
    assert code == 0 and "settings file: none found" in out and "unknown variable" not in out


async def test_doctor_creates_no_data_dir(make_settings, tmp_path):
    """A data dir that does not exist yet is reported as made at first start, and the doctor does not make it."""
    home = tmp_path / "nested" / "data"
    checks = {c.name: c for c in await doctor.run_checks(make_settings(TUSK_HOME=home))}
    assert checks["data dir"].verdict == "ok" and "created at first start" in checks["data dir"].detail
    assert not (tmp_path / "nested").exists()


async def test_doctor_checks_the_http_port(make_settings, tusk):
    """A port held by another program fails with the fix; the port this home's running Tusk answers on is fine."""
    with busy_port() as sock:
        port = sock.getsockname()[1]
        checks = {c.name: c for c in await doctor.run_checks(make_settings(TUSK_HTTP_PORT=port))}
    assert checks["HTTP port"].verdict == "fail" and "in use by another program" in checks["HTTP port"].detail
    assert "TUSK_HTTP_PORT" in checks["HTTP port"].fix and doctor.exit_code(list(checks.values())) == 1
    tusk_port = int(tusk.url.rsplit(":", 1)[1])
    checks = {c.name: c for c in await doctor.run_checks(make_settings(TUSK_HTTP_PORT=tusk_port))}
    assert checks["HTTP port"].verdict == "ok" and "this home's Tusk is running" in checks["HTTP port"].detail
