"""The doctor's checks of where settings come from and where Tusk will listen and write.

    settings file (which one was read)  unknown variables (typos, with the closest known name)  HTTP port

None of them creates anything: the data dir check in bot/ops/doctor.py only reports where the
folder will be made at first start.
"""

from __future__ import annotations

import difflib
import errno
import os
import socket
from collections.abc import Mapping
from pathlib import Path

import aiohttp
from dotenv import dotenv_values

from bot.config import Settings
from bot.places import SettingsFile
from bot.ops.check import Check

PREFIXES = ("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_")
EXTRA_KNOWN = frozenset({"TUSK_ENV_FILE"})  # read before the settings, so not a Settings field
HEALTH_TIMEOUT = aiohttp.ClientTimeout(total=3)


def known_names() -> frozenset[str]:
    """Every variable Tusk reads: the Settings fields' names plus the few read before them."""
    return frozenset(str(f.validation_alias).upper() for f in Settings.model_fields.values()) | EXTRA_KNOWN


def settings_file(source: SettingsFile) -> Check:
    """Which settings file this run read, or that none was found (then only the environment counts)."""
    return Check("settings file", "ok", source.describe())  # the words of `tusk run`'s first log line


def unknown_variables(environ: Mapping[str, str], env_file: Path) -> list[Check]:
    """One warning per TUSK_/platform variable Tusk does not know, in the environment or the settings file."""
    known = known_names()
    sources = [("the environment", list(environ))]
    if env_file.is_file():
        try:
            sources.append((str(env_file.resolve()), list(dotenv_values(env_file))))
        except (OSError, UnicodeDecodeError):
            pass  # load_settings reported an unreadable file already
    checks = []
    for where, names in sources:
        for name in sorted({n for n in names if n.upper().startswith(PREFIXES) and n.upper() not in known}):
            close = difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.75)
            fix = f"did you mean {close[0]}? Rename it" if close else "remove it (see .env.example for every variable)"
            checks.append(Check("unknown variable", "warn", f"{name} (in {where}) is not a Tusk setting and is ignored",
                                fix))
    return checks


async def http_port(settings: Settings) -> Check:
    """Whether `tusk run` can listen on TUSK_HTTP_HOST:TUSK_HTTP_PORT (a Tusk already there is fine)."""
    host, port = settings.http_host, settings.http_port
    if port == 0:
        return Check("HTTP port", "ok", "TUSK_HTTP_PORT=0: a free port is chosen at each start")
    try:
        socket.create_server((host or "", port)).close()  # SO_REUSEADDR, as `tusk run` binds
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return Check("HTTP port", "fail", f"cannot listen on {host}:{port} ({exc.strerror})",
                         "set TUSK_HTTP_HOST to an address of this machine and TUSK_HTTP_PORT to 1024 or more")
        if await _tusk_answers(host, port):
            return Check("HTTP port", "ok", f"a Tusk is already running on {host}:{port} (it answers /healthz)")
        return Check("HTTP port", "fail", f"{host}:{port} is in use by another program",
                     "stop that program, or set TUSK_HTTP_PORT to a free port")
    return Check("HTTP port", "ok", f"{host}:{port} is free")


async def _tusk_answers(host: str, port: int) -> bool:
    target = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    url = f"http://{'[' + target + ']' if ':' in target else target}:{port}/healthz"
    try:
        async with aiohttp.ClientSession(timeout=HEALTH_TIMEOUT) as client, client.get(url) as resp:
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
        return False
    return resp.status == 200 and isinstance(body, dict) and body.get("ok") is True


def data_dir_to_be(home: Path) -> Check | None:
    """For a data dir that does not exist yet: where it will be made, if its nearest parent allows it."""
    if os.path.lexists(home):
        return None
    parent = home.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        return Check("data dir", "fail", f"{home} does not exist and {parent} is not writable",
                     "create it and give the user running Tusk write access, or set TUSK_HOME")
    return Check("data dir", "ok", f"{home} does not exist yet: it will be created at first start")
