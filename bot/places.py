"""Where things live: the settings file Tusk reads and the data dir it writes.

    settings   TUSK_ENV_FILE, else `.env` in the working directory, else the user config dir's
               `tusk.env` (platformdirs: ~/.config/tusk/tusk.env on Linux); none at all is fine
    data       TUSK_HOME, else the user data dir (platformdirs: ~/.local/share/tusk on Linux)

The systemd unit and the Docker image set TUSK_HOME (and the installer's `tusk` wrapper
TUSK_ENV_FILE) themselves. Nothing here creates a file or folder: `describe()` is the one
sentence both `tusk run`'s first log line and `tusk doctor` use to say which file was read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP = "tusk"
LOCAL = ".env"


def user_settings_path() -> Path:
    """The settings file `tusk init` writes by default: `tusk.env` in the user config dir."""
    return platformdirs.user_config_path(APP, appauthor=False) / "tusk.env"


def default_home() -> Path:
    """The data dir when TUSK_HOME is not set: the user data dir."""
    return platformdirs.user_data_path(APP, appauthor=False)


@dataclass(frozen=True, slots=True)
class SettingsFile:
    path: Path  # the file read, or the last place looked for one
    found: bool
    origin: str  # "TUSK_ENV_FILE", "working directory" or "user config dir"

    def describe(self) -> str:
        """Which file was read (or that none was), in the words the log and the doctor share."""
        path = self.path.absolute()
        if self.found:
            return f"read {path} ({'named by TUSK_ENV_FILE' if self.origin == 'TUSK_ENV_FILE' else self.origin})"
        if self.origin == "TUSK_ENV_FILE":
            return f"TUSK_ENV_FILE names {path}, which does not exist"
        return (f"none found (no {LOCAL} in the working directory, no {path}): settings come from the "
                "environment only (`tusk init` writes one)")


def settings_file(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> SettingsFile:
    """The settings file to read: TUSK_ENV_FILE, else ./.env, else the user config dir's tusk.env."""
    environ = os.environ if environ is None else environ
    if named := environ.get("TUSK_ENV_FILE", "").strip():
        path = Path(named).expanduser()
        return SettingsFile(path, path.is_file(), "TUSK_ENV_FILE")
    local = (cwd or Path.cwd()) / LOCAL
    if local.is_file():
        return SettingsFile(local, True, "working directory")
    user = user_settings_path()
    return SettingsFile(user, user.is_file(), "user config dir")
