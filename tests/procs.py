"""The one way tests start processes: an explicit environment from a clean base, a temporary working
directory, and a kill (of the whole process group) when the test ends, pass or fail.

Nothing of the developer's setup reaches a child: no `TUSK_*`/platform variables, no `.env` of the
directory pytest runs in, no config or data dir under the real home (HOME and XDG dirs are temporary)."""

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIRST_TURN = 90.0  # seconds a started Tusk's first reply may take: it waits for litellm's import (bot/llm/warmup.py)
PASSED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT", "VIRTUAL_ENV")  # nothing else is inherited

_started: list = []  # processes (each leading its group) started during the current test
_scratch: list[Path] = []  # temporary directories made for them
_ptys: list = []  # pexpect children (spawn_pty), closed with a SIGKILL at the end of the test


def scratch_dir(prefix="tusk-proc-") -> Path:
    """A fresh empty directory, removed when the test ends."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _scratch.append(path)
    return path


def clean_env(home=None, **extra) -> dict[str, str]:
    """An environment with only the basics of this one (PATH, locale) plus `extra`; HOME and the XDG
    config/data/cache dirs point into a temporary home so no user settings file can be found."""
    home = Path(home) if home is not None else scratch_dir("tusk-home-")
    env = {name: os.environ[name] for name in PASSED if name in os.environ}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
                "XDG_CACHE_HOME": str(home / ".cache"), "PYTHONDONTWRITEBYTECODE": "1",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _checked(env, cwd):
    if env is None:
        raise ValueError("a test process needs an explicit env (tests.procs.clean_env)")
    return env, Path(cwd) if cwd is not None else scratch_dir()


async def start(*argv, env, cwd=None, **kw) -> asyncio.subprocess.Process:
    """`argv` started in its own process group, killed at the end of the test if still running."""
    env, cwd = _checked(env, cwd)
    proc = await asyncio.create_subprocess_exec(*argv, env=env, cwd=cwd, start_new_session=True, **kw)
    _started.append(proc)
    return proc


async def start_tusk(*args, env, cwd=None, **kw) -> asyncio.subprocess.Process:
    """`python -m bot.ops.cli *args` as a user runs `tusk *args`."""
    return await start(sys.executable, "-m", "bot.ops.cli", *args, env=env, cwd=cwd, **kw)


async def tusk(*args, env, cwd=None, stdin=b"", timeout=120):
    """Run `tusk *args` to the end: (exit code, stdout, stderr); killed if it outlives `timeout`."""
    proc = await start_tusk(*args, env=env, cwd=cwd, stdin=asyncio.subprocess.PIPE,
                            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout=timeout)
    return proc.returncode, out.decode(), err.decode()


def popen(argv, *, env, cwd=None, **kw) -> subprocess.Popen:
    """A blocking-API child under the same rules as `start`."""
    env, cwd = _checked(env, cwd)
    proc = subprocess.Popen(argv, env=env, cwd=cwd, start_new_session=True, **kw)
    _started.append(proc)
    return proc


def spawn(argv, *, env, cwd=None, rows=40, cols=200, timeout=30):
    """`argv` on a pseudo-terminal (pexpect), as a person at a terminal runs it, under the same rules as
    `start` (pexpect's child leads its own session); closed and killed when the test ends."""
    import pexpect

    env, cwd = _checked(env, cwd)
    child = pexpect.spawn(argv[0], list(argv[1:]), env=env, cwd=str(cwd), dimensions=(rows, cols), timeout=timeout,
                          encoding="utf-8", codec_errors="replace")
    _started.append(child)
    return child


def spawn_tusk(*args, env, cwd=None, **kw):
    """`tusk *args` on a pseudo-terminal (`spawn`)."""
    return spawn([sys.executable, "-m", "bot.ops.cli", *args], env=env, cwd=cwd, **kw)


def _running(proc) -> bool:
    if isinstance(proc, subprocess.Popen):
        return proc.poll() is None
    if hasattr(proc, "isalive"):  # a pexpect child
        return proc.isalive()
    return proc.returncode is None


def run(argv, *, env, cwd=None, timeout=120, **kw) -> subprocess.CompletedProcess:
    """`subprocess.run` under the same rules as `start` (the group is killed if it outlives `timeout`)."""
    if kw.pop("capture_output", False):
        kw.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with popen(argv, env=env, cwd=cwd, **kw) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                kill_group(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def spawn_pty(argv, *, env, cwd=None, **kw):
    """`argv` on a pseudo-terminal (pexpect.spawn, its own session) under the same rules as `start`:
    an explicit env, a temporary working directory, killed when the test ends."""
    import pexpect

    env, cwd = _checked(env, cwd)
    child = pexpect.spawn(argv[0], list(argv[1:]), env=env, cwd=str(cwd), **kw)
    _ptys.append(child)
    return child


def kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _gone(pid) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")  # dead; its parent's child watcher reaps it


def cleanup(wait=10.0):
    """Kill every process group started in this test whose leader is still ours (not yet reaped, so its id
    cannot have been reused) and wait until each leader is dead."""
    for child in _ptys:
        child.close(force=True)
    _ptys.clear()
    started, _started[:] = list(_started), []
    alive = [proc for proc in started if _running(proc)]
    pids = [proc.pid for proc in alive]
    for pid in pids:
        kill_group(pid)
    for proc in alive:
        if isinstance(proc, subprocess.Popen):
            proc.wait(timeout=wait)  # reaped here; an asyncio child is reaped by its loop's child watcher
    for proc in started:
        if hasattr(proc, "isalive"):
            proc.close(force=True)  # a pexpect child: its pty closed, the process reaped
    deadline = time.monotonic() + wait
    for pid in pids:
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
    for path in _scratch:
        shutil.rmtree(path, ignore_errors=True)
    _scratch.clear()
    return [pid for pid in pids if not _gone(pid)]
