"""The doctor's checks of where settings come from and where Tusk will listen and write.

    settings file (which one was read)  unknown variables (typos, with the closest known name)  HTTP port
    (free, this home's running Tusk, or a Tusk of another home: bot/running.py's lock record tells them apart)

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
from urllib.parse import urlparse

import aiohttp
from dotenv import dotenv_values

from bot.config import Settings
from bot.places import SettingsFile
from bot.ops.check import Check
from channels.http.binding import local_url

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
    """Whether `tusk run` can listen on TUSK_HTTP_HOST:TUSK_HTTP_PORT: free, or held by this home's own Tusk (its
    lock record says where it serves, bot/running.py); a Tusk of another home there is a conflict."""
    from bot import running

    host, port = settings.http_host, settings.http_port
    there = running.holder(settings.home)
    ours = there.url if there is not None and there.engine else None  # where this home's Tusk serves
    pid = there.pid if there is not None else None
    running_here = f"; this home's Tusk (pid {pid}) is running on {ours}" if ours else ""
    if port == 0:
        return Check("HTTP port", "ok", f"TUSK_HTTP_PORT=0: a free port is chosen at each start{running_here}")
    try:
        socket.create_server((host or "", port)).close()  # SO_REUSEADDR, as `tusk run` binds
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return Check("HTTP port", "fail", f"cannot listen on {host}:{port} ({exc.strerror})",
                         "set TUSK_HTTP_HOST to an address of this machine and TUSK_HTTP_PORT to 1024 or more")
        if ours and urlparse(ours).port == port:
            return Check("HTTP port", "ok", f"this home's Tusk is running on {host}:{port} (pid {pid})")
        if await _tusk_answers(host, port):
            return Check("HTTP port", "fail", f"{host}:{port} is taken by a Tusk of another home (it answers "
                         f"/healthz, but this home's lock does not name it){running_here}",
                         "stop that Tusk, or give each home a TUSK_HTTP_PORT of its own")
        return Check("HTTP port", "fail", f"{host}:{port} is in use by another program{running_here}",
                     "stop that program, or set TUSK_HTTP_PORT to a free port")
    return Check("HTTP port", "ok", f"{host}:{port} is free{running_here}")


async def _tusk_answers(host: str, port: int) -> bool:
    url = f"{local_url(host, port)}/healthz"
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
