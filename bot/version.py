"""The installed Tusk's version, as pip recorded it from pyproject.toml (CLI, backups, doctor)."""

from __future__ import annotations


def installed() -> str:
    """The package's version; run from a source tree that was never installed, it says so."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tuskbot")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"
