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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from store.files.shared import FileDoc
from store.shared import SharedDoc

logger = logging.getLogger(__name__)

FILE = "api-keys.json"
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
    def __init__(self, doc: SharedDoc | Path) -> None:
        self.doc = FileDoc(doc, FILE) if isinstance(doc, Path) else doc  # a home: its api-keys.json
        self._seen: tuple[str | None, list[ApiKey]] = (None, [])

    def _parse(self, raw: str | None) -> list[ApiKey]:
        if raw is None:
            return []
        data = json.loads(raw)
        if data.get("version") != VERSION:
            raise ValueError(f"{self.doc.where}: version {data.get('version')!r}, this Tusk reads {VERSION}")
        return [ApiKey(**k) for k in data.get("keys", [])]

    def keys(self) -> list[ApiKey]:
        """The keys as kept now (read again whenever they changed: the CLI edits them while Tusk runs)."""
        raw = self.doc.read()
        if raw != self._seen[0] or raw is None:
            self._seen = (raw, self._parse(raw))
        return list(self._seen[1])

    def _change(self, change: Callable[[list[ApiKey]], list[ApiKey]]) -> None:
        with self.doc.updating() as box:
            keys = change(self._parse(box.text))
            box.text = json.dumps({"version": VERSION, "keys": [asdict(k) for k in keys]}, indent=1) + "\n"

    def create(self, prefix: str) -> tuple[ApiKey, str]:
        """A new key for the chats named `prefix...`: (its record, the secret, shown once)."""
        if not PREFIX.fullmatch(prefix):
            raise ValueError(f"bad prefix {prefix!r}: letters, digits, _ . - (up to 41), e.g. family-")
        secret = "tusk-" + secrets.token_urlsafe(32)
        key = ApiKey("k" + secrets.token_hex(4), prefix, digest(secret), time.time())
        self._change(lambda keys: [*keys, key])
        return key, secret

    def revoke(self, key_id: str) -> ApiKey:
        gone = next((k for k in self.keys() if k.id == key_id), None)
        if gone is None:
            raise LookupError(f"no API key {key_id!r}: `tusk apikey list` shows them")
        self._change(lambda keys: [k for k in keys if k.id != key_id])
        return gone

    def find(self, secret: str) -> ApiKey | None:
        """The key whose secret this is, if any (compared in constant time); none while the file is unreadable."""
        wanted = digest(secret)
        try:
            keys = self.keys()
        except (OSError, ValueError, TypeError) as exc:
            logger.warning("API keys refused: cannot read %s (%s)", self.doc.where, exc)
            return None
        return next((k for k in keys if hmac.compare_digest(k.sha256, wanted)), None)


def listing(keys: list[ApiKey]) -> str:
    if not keys:
        return "No API keys. `tusk apikey create --prefix NAME` makes one."
    rows = [f"{k.id}  {k.prefix:<20} {time.strftime('%Y-%m-%d %H:%M', time.localtime(k.created))}" for k in keys]
    return "\n".join(["id         prefix               created", *rows])
