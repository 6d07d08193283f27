"""Where the HTTP API may listen: loopback names, the token rule for other addresses, socket errors explained."""

from __future__ import annotations

import errno
import ipaddress

from bot.errors import ConfigError

MIN_REMOTE_TOKEN = 32  # characters a token must have when the API is reachable beyond this machine


def host_name(host: str) -> str:
    """The name in a Host header, without its port: `[::1]:8765` -> `::1`, `localhost:80` -> `localhost`."""
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback(host: str) -> bool:
    """True for `localhost`, `127.x.x.x` and `::1` (with or without brackets)."""
    host = host.strip().strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_problem(host: str, token: str | None) -> str | None:
    """Why serving the API on `host` with `token` is unsafe (one line with the fix), or None if it is fine.
    The one rule: `tusk run` refuses to start on it, `tusk doctor` reports it."""
    if is_loopback(host):
        return None
    where = f"TUSK_HTTP_HOST={host or '(all interfaces)'} exposes the HTTP API and the web console beyond this machine"
    if not token:
        return (f"{where}, but TUSK_HTTP_TOKEN=off: set TUSK_HTTP_TOKEN to a long random secret "
                "(e.g. `openssl rand -hex 32`) or unset it to use the console token, or set TUSK_HTTP_HOST=127.0.0.1.")
    if len(token) < MIN_REMOTE_TOKEN:
        return (f"{where}, but TUSK_HTTP_TOKEN is only {len(token)} characters long: use at least "
                f"{MIN_REMOTE_TOKEN} (e.g. `openssl rand -hex 32`), or set TUSK_HTTP_HOST=127.0.0.1.")
    return None


def bind_error(exc: OSError, host: str, port: int) -> ConfigError:
    """One line naming the setting to change when the listening socket cannot be opened."""
    where = f"{host or '*'}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return ConfigError(f"TUSK_HTTP_PORT={port}: {where} is already in use (another Tusk, or another program). "
                           f"Fix: stop that program, or set TUSK_HTTP_PORT to a free port (0 picks one)")
    if exc.errno == errno.EACCES:
        return ConfigError(f"TUSK_HTTP_PORT={port}: not allowed to listen on {where} (ports below 1024 need "
                           f"privileges). Fix: set TUSK_HTTP_PORT to a port of 1024 or more")
    return ConfigError(f"TUSK_HTTP_HOST={host}, TUSK_HTTP_PORT={port}: cannot listen on {where} "
                       f"({exc.strerror or exc}). Fix: set TUSK_HTTP_HOST to an address of this machine")


def local_url(host: str, port: int) -> str:
    """The address a client on this machine reaches a server listening on `host` at: all interfaces (``,
    `0.0.0.0`, `::`) through loopback."""
    target = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    return f"http://{'[' + target + ']' if ':' in target else target}:{port}"
