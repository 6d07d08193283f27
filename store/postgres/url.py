"""TUSK_DATABASE_URL: `postgresql://user:password@host:5432/db` (libpq's URI form, so `?sslmode=require`
and the other libpq parameters work too), checked at start and shown without its password."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit, urlunsplit

from store.errors import StoreSetupError

SETTING = "TUSK_DATABASE_URL"
SCHEMES = ("postgresql", "postgres")


def check(url: str) -> str:
    """The URL if it is one psycopg can use; otherwise StoreSetupError saying what is wrong (no password)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError as exc:
        raise StoreSetupError(f"{SETTING} is not a URL ({exc}): write it as "
                              "postgresql://user:password@host:5432/db") from None
    if parts.scheme not in SCHEMES:
        raise StoreSetupError(f"{SETTING} must start with postgresql:// (got {parts.scheme or 'no scheme'}://): "
                              "write it as postgresql://user:password@host:5432/db")
    if not parts.path.strip("/"):
        raise StoreSetupError(f"{SETTING} names no database ({redact(url)}): add it after the host, "
                              "as in postgresql://user:password@host:5432/tusk")
    return url


def redact(url: str) -> str:
    """The URL with its password replaced by ***, for logs and messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(SplitResult(parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    except ValueError:
        return "(an unreadable URL)"


def password(url: str) -> str | None:
    """The password in the URL (registered with the log filter, so it never reaches a log line)."""
    try:
        return urlsplit(url).password
    except ValueError:
        return None
