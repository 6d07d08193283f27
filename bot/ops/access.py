"""Who may use the HTTP API and web console: the console token and the bind rule.

    $TUSK_HOME/console-token     one line, a random token made at first start (mode 0600)

`TUSK_HTTP_TOKEN` decides: unset -> the token in that file (created if missing); a value ->
that value; `off` -> no token at all (loopback binds only). `tusk run` prints the console
URL with the token once, when the file is created; `tusk console-url` prints it again.
"""

from __future__ import annotations

import argparse
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from bot.config import Settings
from bot.errors import ConfigError
from memory.paths import private_dir

TOKEN_FILE = "console-token"
OFF = "off"


@dataclass(frozen=True, slots=True)
class HttpAccess:
    token: str | None  # None: TUSK_HTTP_TOKEN=off
    created: bool = False  # the token file was made just now (first start)


def token_path(home: Path) -> Path:
    return Path(home) / TOKEN_FILE


def saved_token(home: Path) -> str | None:
    """The token in `$TUSK_HOME/console-token`, or None if there is none yet (never follows a symlink)."""
    try:
        fd = os.open(token_path(home), os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {token_path(home)} ({exc.strerror}): delete it and start Tusk again "
                          "to make a new console token") from exc
    with os.fdopen(fd, encoding="utf-8") as fh:
        return fh.read().strip() or None


def _create_token(home: Path) -> str | None:
    """Write a new random token, owner-only; None if another process made the file first."""
    private_dir(Path(home))
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(token_path(home), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return token


def configured(settings: Settings) -> str | None:
    """TUSK_HTTP_TOKEN as given: a token, `off`, or None when unset."""
    return settings.http_token.get_secret_value().strip() if settings.http_token else None


def http_access(settings: Settings, create: bool = True) -> HttpAccess:
    """The token the HTTP channel requires, reading or (first start) creating the token file."""
    given = configured(settings)
    if given is not None:
        return HttpAccess(None if given.lower() == OFF else given)
    token = saved_token(settings.home)
    if token is None and create:
        token = _create_token(settings.home)
        if token is not None:
            return HttpAccess(token, created=True)
        token = saved_token(settings.home)
    return HttpAccess(token)


def console_url(host: str, port: int, token: str | None) -> str:
    """`http://127.0.0.1:8765/#token=...`: the console page takes the token from the fragment
    (never sent to the server, so it stays out of access logs) and keeps it in the browser."""
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    base = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}/"
    return base + (f"#token={token}" if token else "")


def log_secrets(settings: Settings) -> list[str]:
    """The console token too, if there is one yet, for the log's masking."""
    try:
        token = http_access(settings, create=False).token
    except ConfigError:
        return []
    return [token] if token else []


# -- the commands: `tusk console-url`, `tusk apikey` (called by bot/ops/cli.py) -------------------------------

def console_url_command(args: argparse.Namespace, settings: Settings) -> int:  # noqa: ARG001
    private_dir(settings.home, follow=True)
    print(console_url(settings.http_host, settings.http_port, http_access(settings).token))
    return 0


def apikey_command(args: argparse.Namespace, settings: Settings) -> int:
    """`tusk apikey create --prefix P | list | revoke ID`: the keys of the OpenAI-compatible endpoint."""
    from bot.access.api_keys import ApiKeys, listing

    keys = ApiKeys(settings.home)
    if args.action == "create":
        key, secret = keys.create(args.prefix)
        print(f"{secret}\n\nAPI key {key.id} for the chats http:{key.prefix}... (shown once; only its hash is kept)")
    elif args.action == "list":
        print(listing(keys.keys()))
    else:
        print(f"revoked {keys.revoke(args.id).id}")
    return 0
