"""Pairing: how a stranger becomes someone Tusk answers, with the owner's approval.

With TUSK_DM_POLICY=pairing (the default) a person who is not in the platform's `*_ALLOW_FROM`
and writes to the bot in a direct chat gets a short code and nothing else: the message never
reaches the model and is not saved. The owner runs `tusk pairing approve CODE`; from then on that
user id is answered. A group that addresses the bot gets a code for the group; approving it lets
everyone in that group talk to the bot there.

The `pairing.json` shared document (store/shared.py: `$TUSK_HOME/pairing.json`, 0600, replaced atomically, or
a row of the database; writers hold it exclusively, so the CLI and a running bot never lose each other's
changes):

    {"version": 1,
     "approved": [{"channel": "telegram", "kind": "user", "id": "7", "name": "Ann", "at": 1764750000.0}],
     "pending":  [{"code": "K7QXM2PA", "channel": "telegram", "kind": "group", "id": "-1001", "name": "Team",
                   "at": 1764750000.0, "expires": 1764753600.0}]}

A running bot reads it again whenever it changed: an approval made by the CLI counts from the next message
on. Codes expire (TUSK_PAIRING_TTL); a sender or group holds at most one code until it expires; at most
TUSK_PAIRING_MAX_PENDING requests wait (the oldest goes).
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import pydantic

from bot import metrics
from bot.errors import TuskError
from bot.events import ChatKey
from store.files.shared import FileDoc
from store.shared import Box, SharedDoc

logger = logging.getLogger(__name__)

FILE = "pairing.json"
VERSION = 1
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: codes are read aloud and retyped
CODE_LENGTH = 8

Kind = Literal["user", "group"]


class PairingError(TuskError):
    """pairing.json cannot be read or written (the message names the file and the fix)."""


@dataclass(frozen=True, slots=True)
class Approval:
    """Someone (a user, or every member of a group) the owner let in."""

    channel: str
    kind: Kind
    id: str
    name: str = ""
    at: float = 0.0

    def matches(self, channel: str, kind: str, id: str) -> bool:
        return (self.channel, self.kind, self.id) == (channel, kind, id)


@dataclass(frozen=True, slots=True)
class Request:
    """A code handed out and waiting for `tusk pairing approve`."""

    code: str
    channel: str
    kind: Kind
    id: str
    name: str = ""
    at: float = 0.0
    expires: float = 0.0

    def matches(self, channel: str, kind: str, id: str) -> bool:
        return (self.channel, self.kind, self.id) == (channel, kind, id)


@dataclass(frozen=True, slots=True)
class PairingState:
    version: int = VERSION
    approved: tuple[Approval, ...] = ()
    pending: tuple[Request, ...] = field(default=())

    def live(self, now: float) -> PairingState:
        return replace(self, pending=tuple(r for r in self.pending if r.expires > now))


_STATE = pydantic.TypeAdapter(PairingState)


def normal_code(code: str) -> str:
    """What the owner typed, as stored: upper case, without spaces or dashes."""
    return "".join(ch for ch in code.upper() if ch.isalnum())


def _new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


@dataclass
class Held:
    """pairing.json held for a change (PairingStore._locked)."""

    state: PairingState
    box: Box

    def write(self, state: PairingState) -> None:
        self.box.text = json.dumps(_STATE.dump_python(state, mode="json"), ensure_ascii=False, indent=1) + "\n"


class PairingStore:
    """pairing.json: the approvals and the pending codes, shared by the running bot and the CLI."""

    def __init__(self, doc: SharedDoc | Path, ttl: float = 3600.0, max_pending: int = 20,
                 clock: Callable[[], float] = time.time) -> None:
        self.doc = FileDoc(doc, FILE) if isinstance(doc, Path) else doc  # a home: its pairing.json
        self.ttl = ttl
        self.max_pending = max_pending
        self.clock = clock
        self._seen: tuple[str | None, PairingState] = (None, PairingState())

    # -- reading -----------------------------------------------------------------------------

    def _parse(self, raw: str | None) -> PairingState:
        if raw is None:
            return PairingState()
        try:
            return _STATE.validate_json(raw)
        except ValueError as exc:
            raise PairingError(f"{self.doc.where} is not valid pairing data ({exc.__class__.__name__}): "
                               "fix it by hand or move it away (every approval in it is then lost)") from exc

    def state(self) -> PairingState:
        """The pairings as they are now (parsed again only when the document changed)."""
        try:
            raw = self.doc.read()
        except OSError as exc:
            raise PairingError(f"cannot read {self.doc.where}: {exc.strerror}") from exc
        if raw != self._seen[0] or raw is None:
            self._seen = (raw, self._parse(raw))
        return self._seen[1]

    def approved(self, channel: str, kind: Kind, id: str) -> bool:
        """True if the owner approved this user or group. An unreadable file approves no one (and says so)."""
        try:
            return any(a.matches(channel, kind, id) for a in self.state().approved)
        except PairingError as exc:
            logger.error("%s; treating every unlisted sender as unknown", exc)
            return False

    # -- writing -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[Held]:
        """The document held for a read-modify-write: its state as stored, and `write` to replace it."""
        with self.doc.updating() as box:
            yield Held(self._parse(box.text), box)

    def request(self, channel: str, kind: Kind, id: str, name: str = "") -> tuple[Request, bool]:
        """The code for this user or group: the one it holds (False) or a new one (True). Holding one until
        it expires is the rate limit; past `max_pending` waiting codes the oldest is dropped."""
        now = self.clock()
        held = next((r for r in self.state().live(now).pending if r.matches(channel, kind, id)), None)
        if held is not None:
            return held, False
        with self._locked() as kept_doc:
            state = kept_doc.state.live(now)
            held = next((r for r in state.pending if r.matches(channel, kind, id)), None)
            if held is not None:
                return held, False
            taken = {r.code for r in state.pending}
            code = _new_code()
            while code in taken:
                code = _new_code()
            new = Request(code, channel, kind, id, name[:100], now, now + self.ttl)
            pending = sorted((*state.pending, new), key=lambda r: r.at)[-self.max_pending:]
            kept_doc.write(replace(state, pending=tuple(pending)))
        logger.info("pairing: code issued for %s %s %s (%d waiting)", channel, kind, id, len(pending))
        metrics.pairing_code(channel)
        return new, True

    def approve(self, code: str) -> Approval:
        """Let in whoever holds `code`; LookupError (with what to do) if it is unknown or expired."""
        wanted, now = normal_code(code), self.clock()
        with self._locked() as held:
            state = held.state
            request = next((r for r in state.pending if r.code == wanted), None)
            if request is None:
                raise LookupError(f"no pending request has the code {code!r} (see `tusk pairing list`)")
            rest = tuple(r for r in state.live(now).pending if r.code != wanted)
            expired = request.expires <= now
            approval = Approval(request.channel, request.kind, request.id, request.name, now)
            kept = tuple(a for a in state.approved if not a.matches(request.channel, request.kind, request.id))
            held.write(replace(state, pending=rest) if expired else replace(state, approved=(*kept, approval),
                                                                                 pending=rest))
        if expired:
            raise LookupError(f"the code {wanted} has expired: ask them to write to the bot again for a new one")
        return approval

    def move(self, old: ChatKey, new: ChatKey) -> int:
        """A group approved under `old` is approved under `new` (a Telegram group upgraded: bot/chat_move.py)."""
        with self._locked() as held:
            state = held.state
            moved = [replace(a, id=new.chat_id) for a in state.approved if a.matches(old.channel, "group", old.chat_id)]
            if moved:
                kept = [a for a in state.approved if not a.matches(old.channel, "group", old.chat_id)
                        and not a.matches(new.channel, "group", new.chat_id)]
                held.write(replace(state, approved=(*kept, *moved)))
        return len(moved)

    def revoke(self, target: str) -> list[Approval | Request]:
        """Remove the approvals of `CHANNEL:ID` (a user or a group), or the pending request with that code."""
        channel, sep, id = target.partition(":")
        with self._locked() as held:
            state = held.state
            if sep:
                gone: list[Approval | Request] = [a for a in state.approved if (a.channel, a.id) == (channel, id)]
                changed = replace(state, approved=tuple(a for a in state.approved if a not in gone))
            else:
                gone = [r for r in state.pending if r.code == normal_code(target)]
                changed = replace(state, pending=tuple(r for r in state.pending if r not in gone))
            if gone:
                held.write(changed)
        return gone
