"""API keys the owner hands out for the OpenAI-compatible endpoint, each limited to chats named with a prefix.

    tusk apikey create --prefix NAME    prints the key once: `tusk-...`; only its SHA-256 is kept
    tusk apikey list                    id, prefix, when made
    tusk apikey revoke ID               gone at once (a running Tusk rereads the file when it changes)

$TUSK_HOME/api-keys.json (0600), version 1:
    {"version": 1, "keys": [{"id": "k3f9a1c2", "prefix": "family-", "sha256": "<hex>", "created": 1733200000.0}]}

A key reaches only `POST /v1/chat/completions` and `GET /v1/models`, and only the chats `http:<prefix>...`:
`X-Tusk-Chat` must start with the prefix; without it the key's own chat is `<prefix>openai-<hash>`. The
owner's token (console token, TUSK_HTTP_TOKEN) reaches everything.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from memory.files import write_atomic

logger = logging.getLogger(__name__)

VERSION = 1
PREFIX = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,40}")


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    prefix: str
    sha256: str
    created: float


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeys:
    def __init__(self, home: Path) -> None:
        self.path = Path(home) / "api-keys.json"
        self._keys: list[ApiKey] = []
        self._stamp: tuple[int, int] | None = None

    def keys(self) -> list[ApiKey]:
        """The keys on disk (read again whenever the file changed: the CLI edits it while Tusk runs)."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._keys, self._stamp = [], None
            return []
        stamp = (st.st_ino, st.st_mtime_ns)
        if stamp != self._stamp:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") != VERSION:
                raise ValueError(f"{self.path}: version {data.get('version')!r}, this Tusk reads {VERSION}")
            self._keys, self._stamp = [ApiKey(**k) for k in data.get("keys", [])], stamp
        return list(self._keys)

    def _write(self, keys: list[ApiKey]) -> None:
        write_atomic(self.path, json.dumps({"version": VERSION, "keys": [asdict(k) for k in keys]}, indent=1) + "\n")

    def create(self, prefix: str) -> tuple[ApiKey, str]:
        """A new key for the chats named `prefix...`: (its record, the secret, shown once)."""
        if not PREFIX.fullmatch(prefix):
            raise ValueError(f"bad prefix {prefix!r}: letters, digits, _ . - (up to 41), e.g. family-")
        secret = "tusk-" + secrets.token_urlsafe(32)
        key = ApiKey("k" + secrets.token_hex(4), prefix, digest(secret), time.time())
        self._write([*self.keys(), key])
        return key, secret

    def revoke(self, key_id: str) -> ApiKey:
        keys = self.keys()
        gone = next((k for k in keys if k.id == key_id), None)
        if gone is None:
            raise LookupError(f"no API key {key_id!r}: `tusk apikey list` shows them")
        self._write([k for k in keys if k.id != key_id])
        return gone

    def find(self, secret: str) -> ApiKey | None:
        """The key whose secret this is, if any (compared in constant time); none while the file is unreadable."""
        wanted = digest(secret)
        try:
            keys = self.keys()
        except (OSError, ValueError, TypeError) as exc:
            logger.warning("API keys refused: cannot read %s (%s)", self.path, exc)
            return None
        return next((k for k in keys if hmac.compare_digest(k.sha256, wanted)), None)


def listing(keys: list[ApiKey]) -> str:
    if not keys:
        return "No API keys. `tusk apikey create --prefix NAME` makes one."
    rows = [f"{k.id}  {k.prefix:<20} {time.strftime('%Y-%m-%d %H:%M', time.localtime(k.created))}" for k in keys]
    return "\n".join(["id         prefix               created", *rows])
