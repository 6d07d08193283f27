"""The inbox journal: a message a platform counts as delivered stays on disk until its turn is done.

Telegram, Discord and Slack consider a message delivered once Tusk has fetched it, and a due
reminder or schedule's run is claimed in reminders.json when it starts; a crash before the turn is saved
would lose them.
The bus appends each such message to `$TUSK_HOME/inbox.jsonl` (fsynced) before queueing it, and a
`done` line once its turn has ended (answered or failed). At start, `take_pending()` (only for the
one Tusk holding the home, bot/running.py) returns the messages without a `done`, in their order, and
keeps only those in the file; the app publishes them again as soon as its channels are up. The file is
emptied whenever no journaled turn is open and it has grown past 1 MiB. A turn cut short by a crash is
therefore run again; one that finished is never repeated. The HTTP API and the terminal are not
journaled: their user sees the error and can send again. (On PostgreSQL the job queue keeps them
instead: bot/cluster/.)

    {"id": "1f2a.18c0...:7", "key": ["telegram", "42"], "text": "hi", "sender_id": "7", ..., "injected": null}
    {"done": "1f2a.18c0...:7"}
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from bot.commands.base import Owned, counted
from bot.running import Claim
from bot.events import Attachment, ChatKey, InboundMessage, Injected
from memory.files import write_atomic
from memory.paths import open_private

logger = logging.getLogger(__name__)


def record_of(msg: InboundMessage) -> dict[str, Any]:
    """The message as a journal line. Its `ref` is not kept: a replay answers by the chat key alone, as
    before refs existed (a Discord command's interaction would have expired by then)."""
    fields = {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg)
              if f.name not in ("key", "injected", "attachments", "ref")}
    injected = dataclasses.asdict(msg.injected) if msg.injected is not None else None
    files = [dataclasses.asdict(a) for a in msg.attachments]
    return {**fields, "key": [msg.key.channel, msg.key.chat_id], "injected": injected, "attachments": files}


def message_of(rec: dict[str, Any]) -> InboundMessage:
    """The message a record stands for (a new process-unique id: replies tie to this run's ids)."""
    fields = {k: v for k, v in rec.items() if k not in ("id", "key", "injected", "attachments")}
    injected = Injected(**rec["injected"]) if rec.get("injected") else None
    files = tuple(Attachment(**a) for a in rec.get("attachments") or ())
    return InboundMessage(ChatKey(*rec["key"]), injected=injected, attachments=files, **fields)


class Inbox:
    def __init__(self, path: Path, compact_at: int = 1 << 20) -> None:
        self.path = Path(path)
        self.compact_at = compact_at  # bytes: the file is emptied when no turn is open and it is larger
        self._run = f"{os.getpid():x}.{time.time_ns():x}"  # message ids restart with each run; this does not
        self._open: set[int] = set()  # ids of this run's messages recorded and not done
        self._written: set[int] = set()  # replayed messages take_pending already put in the file
        self._later: set[str] = set()  # journal ids left for a Tusk that serves their channel (take_pending)

    def _jid(self, msg: InboundMessage) -> str:
        return f"{self._run}:{msg.id}"

    def _line(self, msg: InboundMessage) -> str:
        return json.dumps({**record_of(msg), "id": self._jid(msg)}, ensure_ascii=False, separators=(",", ":")) + "\n"

    def _append(self, line: str) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        with os.fdopen(open_private(self.path, flags), "a", encoding="utf-8") as fh:  # 0600, no symlink
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def record(self, msg: InboundMessage) -> None:
        self._open.add(msg.id)
        if msg.id in self._written:
            self._written.discard(msg.id)
            return
        self._append(self._line(msg))

    def done(self, msg: InboundMessage) -> None:
        if msg.id not in self._open:
            return
        self._open.discard(msg.id)
        self._append(json.dumps({"done": self._jid(msg)}) + "\n")
        if not self._open and not self._later and self.path.stat().st_size > self.compact_at:
            os.truncate(self.path, 0)  # every turn has ended: nothing in the file is needed

    def _pending_records(self) -> dict[str, dict[str, Any]]:
        pending: dict[str, dict[str, Any]] = {}
        try:
            with open(self.path, encoding="utf-8") as fh:
                for number, line in enumerate(fh, 1):
                    try:
                        rec = json.loads(line)
                        if "done" in rec:
                            pending.pop(rec["done"], None)
                        else:
                            pending[rec["id"]] = rec
                    except (ValueError, TypeError, KeyError):
                        logger.warning("%s: skipping unreadable line %d (a torn write?)", self.path, number)
        except FileNotFoundError:
            pass
        return pending

    def _lines(self) -> list[tuple[str, dict[str, Any] | None]]:
        """Every line of the file with its record (None: unreadable, e.g. a torn write)."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                raw = fh.readlines()
        except FileNotFoundError:
            return []
        out: list[tuple[str, dict[str, Any] | None]] = []
        for line in raw:
            try:
                rec = json.loads(line)
                out.append((line, rec if isinstance(rec, dict) else None))
            except ValueError:
                out.append((line, None))
        return out

    def owned(self, key: ChatKey) -> list[Owned]:
        """For /forget (and `tusk forget`): every line of this chat in the journal, answered or not, so a
        forgotten chat's text does not linger in inbox.jsonl until the file is emptied."""
        def records() -> dict[str, dict[str, Any]]:
            return {rec["id"]: rec for _, rec in self._lines()
                    if rec is not None and rec.get("key") == [key.channel, key.chat_id] and "id" in rec}

        def ids() -> set[str]:
            return set(records())

        found = records()
        mine = set(found)
        if not mine:
            return []
        running = {jid for jid in mine if jid.startswith(f"{self._run}:") and int(jid.split(":")[1]) in self._open}
        # only commands (never saved anywhere else) and turns still running, such as this /forget itself
        quiet = all(jid in running or str(found[jid].get("text", "")).startswith("/") for jid in mine)
        waiting = set(self._pending_records()) & mine
        waiting -= {jid for jid in waiting if jid.startswith(f"{self._run}:")}  # this run's: being answered now
        if waiting == mine:
            label = f"{counted(len(mine), 'message')} waiting to be answered after a crash (inbox.jsonl)"
        else:
            label = f"{counted(len(mine), 'message')} in the inbox journal (inbox.jsonl)" + (
                f", {len(waiting)} of them waiting to be answered after a crash" if waiting else "")

        def delete() -> None:
            gone = ids()
            kept = [line for line, rec in self._lines()
                    if rec is not None and rec.get("id") not in gone and rec.get("done") not in gone]
            write_atomic(self.path, "".join(kept), follow_dir=True)
            prefix = f"{self._run}:"  # this run's turns of the chat end without a `done` line naming them
            self._open -= {int(jid[len(prefix):]) for jid in gone if jid.startswith(prefix)}
            self._later -= gone

        return [Owned(label, delete, quiet=quiet)]

    def take_pending(self, held: Claim, channels: Collection[str] | None = None) -> list[InboundMessage]:
        """The messages whose turn never ended, oldest first, with new ids; the file is replaced (atomically)
        by just those, so `record` (called again when they are published) does not write them twice.
        Only the process that holds the home exclusively (`held`, bot/running.py) may take them: a turn
        another live Tusk has open is that Tusk's, never a crash's leftover. With `channels`, only the
        messages of those channels are taken; the others stay in the file, as they were, for a Tusk that
        serves them (a `tusk chat` alone after a crash leaves the Telegram messages to `tusk run`)."""
        if not held.covers(self.path.parent):
            raise PermissionError(f"{self.path}: open turns are taken only by the Tusk holding its home's lock")
        if not self.path.exists():
            return []
        pending = self._pending_records()
        ours = [rec for jid, rec in pending.items() if jid.startswith(f"{self._run}:")]  # already queued in this run
        old = [rec for jid, rec in pending.items() if not jid.startswith(f"{self._run}:")]
        later = [rec for rec in old if channels is not None and _channel(rec) not in channels]
        messages = []
        for rec in (rec for rec in old if channels is None or _channel(rec) in channels):
            try:
                messages.append(message_of(rec))
            except (ValueError, TypeError, KeyError) as exc:
                logger.error("%s: cannot replay a message (%s)", self.path, exc)
        kept = "".join(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n" for rec in ours + later)
        write_atomic(self.path, kept + "".join(map(self._line, messages)), follow_dir=True)
        self._written = {m.id for m in messages}
        self._later = {rec["id"] for rec in later}
        if later:
            logger.warning("%d message(s) cut short by a crash wait for a Tusk that serves %s (`tusk run`)",
                           len(later), ", ".join(sorted({str(_channel(rec)) for rec in later})))
        return messages


def _channel(rec: dict[str, Any]) -> object:
    key = rec.get("key")
    return key[0] if isinstance(key, list) and key else None
