"""A schedule and its runs, and their records in `$TUSK_HOME/reminders.json` (schema 2, one schedule a line).

    kind         when                     what a run does
    reminder     once, at `due`           a model turn brings the reminder up ("Reminder: ..." as is if the model fails)
    text         by `rule`, repeating     its text is sent as written: no model call
    instruction  by `rule`, repeating     a model turn with its instruction; the reply is delivered whatever it says
    checkin      once, at `due`           a model turn without tools asks how an open item of MEMORY.md went

    {"schema": 2, "reminders": [
    {"id": "s3fa9c1", "channel": "telegram", "chat_id": "42", "kind": "instruction", "text": "tell me what's due",
     "rule": "every weekday at 08:00", "start": "2026-03-27T10:15:00+01:00", "timezone": "Europe/Berlin",
     "due": "2026-03-30T08:00:00+02:00", "paused": false, "created": "2026-03-27T10:15:00+01:00",
     "set_by": {"id": "7", "name": "Ann"},
     "runs": [{"due": "2026-03-27T08:00:00+01:00", "at": "2026-03-27T07:00:01+00:00", "status": "delivered"}]}
    ]}

`due` is the next run (null once a check-in has run: its record stays, so the item is never asked about
again). A run is `fired` (started; its outcome not known yet), `delivered`, `failed` (with `why`),
`missed` (`count` runs while Tusk was not running, none of them within TUSK_REMINDER_GRACE) or `skipped`
(with `why`). The last `RUNS_KEPT` runs of each schedule are kept. Older files are migrated by the named
functions in `MIGRATIONS` when read; the file is written back at the new schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Literal, NamedTuple
from zoneinfo import ZoneInfo

from bot.events import ChatKey
from bot.schedules import rules
from bot.schedules.rules import Rule
from memory import chat_settings

SCHEMA = 2
RUNS_KEPT = 20
Kind = Literal["reminder", "text", "instruction", "checkin"]
Status = Literal["fired", "delivered", "failed", "missed", "skipped"]
KINDS: tuple[Kind, ...] = ("reminder", "text", "instruction", "checkin")
STATUSES = frozenset(("fired", "delivered", "failed", "missed", "skipped"))


def instant(moment: datetime) -> datetime:
    """`moment` in UTC: what times are compared as. Two datetimes of one zone compare by their wall time, fold
    ignored, and one in the repeated hour is never equal to a time of another zone (PEP 495): both wrong for
    the 02:30 that happens twice."""
    return moment.astimezone(timezone.utc)


class Run(NamedTuple):
    """One run of a schedule: the time it was for, when Tusk started it, and how it ended. A named tuple, not
    a dataclass: a home may keep 200,000 of them, and tuples of plain values are left alone by the garbage
    collector (a dataclass each made loading 10,000 schedules three times slower: bench/schedules.py)."""

    due: datetime
    at: datetime
    status: Status
    why: str = ""
    late: bool = False  # a catch-up after a downtime, or started over a minute after its time
    # `missed`: how many runs
    count: int = 1  # type: ignore[assignment]  # shadows tuple.count, as NamedTuple allows: the records' name

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"due": self.due.isoformat(), "at": self.at.isoformat(), "status": self.status}
        if self.why:
            rec["why"] = self.why
        if self.late:
            rec["late"] = True
        if self.count != 1:
            rec["count"] = self.count
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Run:
        status = rec["status"]
        if status not in STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        return cls(datetime.fromisoformat(rec["due"]), datetime.fromisoformat(rec["at"]), status,
                   str(rec.get("why") or ""), bool(rec.get("late")), int(rec.get("count", 1)))


@dataclass(frozen=True, slots=True)
class Schedule:
    id: str
    key: ChatKey
    kind: Kind
    text: str
    zone: ZoneInfo  # the chat's when it was set: its rule's times are wall-clock times there
    due: datetime | None  # the next run (aware); None: nothing left to run (a check-in that ran)
    created: datetime
    rule: Rule | None = None  # None: runs once
    paused: bool = False
    set_by_id: str = ""  # who asked for it (older records have no "set_by")
    set_by_name: str = ""
    runs: tuple[Run, ...] = ()
    item: str = ""  # a check-in: the open item it asks about, "2026-05-08: Ann's job interview"

    @property
    def repeating(self) -> bool:
        return self.rule is not None

    @property
    def by(self) -> str:
        """` (set by Ann, id 7)`, or '' when no one is recorded."""
        if not self.set_by_id:
            return ""
        who = f"{self.set_by_name}, id {self.set_by_id}" if self.set_by_name else f"id {self.set_by_id}"
        return f" (set by {who})"

    @property
    def last_run(self) -> Run | None:
        return self.runs[-1] if self.runs else None

    def with_run(self, run: Run) -> Schedule:
        """This schedule with `run` recorded: it replaces the run for the same time, else it is added."""
        runs = list(self.runs)
        at = self._index(run.due)
        if at is None:
            runs.append(run)
        else:
            runs[at] = run
        return replace(self, runs=tuple(runs[-RUNS_KEPT:]))

    def _index(self, due: datetime) -> int | None:
        """Where the run for `due` is, looking from the newest back (runs are kept in time order)."""
        key = instant(due)
        for i in range(len(self.runs) - 1, -1, -1):
            here = instant(self.runs[i].due)
            if here == key and self.runs[i].status != "missed":
                return i
            if here < key:
                return None
        return None

    def run_for(self, due: datetime) -> Run | None:
        at = self._index(due)
        return None if at is None else self.runs[at]

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"id": self.id, "channel": self.key.channel, "chat_id": self.key.chat_id,
                               "kind": self.kind, "text": self.text}
        if self.rule is not None:
            rec.update(rule=self.rule.text, start=self.rule.start.isoformat())
        if self.item:
            rec["item"] = self.item
        rec.update(timezone=self.zone.key, due=self.due.isoformat() if self.due else None, paused=self.paused,
                   created=self.created.isoformat())
        if self.set_by_id:
            rec["set_by"] = {"id": self.set_by_id, "name": self.set_by_name}
        rec["runs"] = [r.to_record() for r in self.runs]
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Schedule:
        zone = chat_settings.zone(rec.get("timezone") or "UTC")
        kind = rec.get("kind", "reminder")
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        rule = None
        if rec.get("rule"):  # checked when it was set
            rule = rules.parse(rec["rule"], zone, datetime.fromisoformat(rec["start"]), check=False)
        if kind in ("text", "instruction") and rule is None:
            raise ValueError(f"a {kind} schedule without a rule")
        set_by = rec.get("set_by")
        by = set_by if isinstance(set_by, dict) else {}
        due = datetime.fromisoformat(rec["due"]).astimezone(zone) if rec.get("due") else None
        if due is None and kind != "checkin":
            raise ValueError("no due time")
        return cls(str(rec["id"]), ChatKey(rec["channel"], rec["chat_id"]), kind, str(rec["text"]), zone, due,
                   datetime.fromisoformat(rec["created"]), rule, bool(rec.get("paused", False)),
                   str(by.get("id") or ""), str(by.get("name") or ""),
                   tuple(Run.from_record(r) for r in rec.get("runs") or ()), str(rec.get("item") or ""))


def _v1_to_v2(rec: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 held one-time reminders only: each becomes a schedule of kind `reminder`, with no runs."""
    return {**rec, "kind": "reminder", "paused": False, "runs": []}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


class NewerSchema(ValueError):
    """reminders.json written by a newer Tusk."""


def migrate(data: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The file's records at the current schema, and whether they were migrated; NewerSchema if it is newer."""
    schema = data.get("schema", 1)
    if not isinstance(schema, int) or schema < 1:
        raise ValueError(f"schema {schema!r}")
    if schema > SCHEMA:
        raise NewerSchema(f"schema {schema} is newer than this Tusk's ({SCHEMA})")
    records = list(data["reminders"])
    for version in range(schema, SCHEMA):
        records = [MIGRATIONS[version](rec) for rec in records]
    return records, schema != SCHEMA
