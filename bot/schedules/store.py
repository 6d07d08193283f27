"""Where schedules are kept: the `ScheduleStore` seam, and its file backend, `$TUSK_HOME/reminders.json`.

    load()                   every schedule (the running Tusk holds them in memory from then on)
    add / update / remove    one schedule
    claim(schedule, due)     the schedule as it is once its run for `due` started (next `due`, run `fired`),
                             written only if its stored `due` is still that one: True for the one process
                             that runs it (a database backend makes this one conditional update)
    record_run(id, run)      a run's outcome (delivered, failed and why)
    batch()                  the changes made inside are written together (one file write; one transaction)
    flush()                  write what `record_run(..., soon=True)` left for later

The file backend rewrites the file whole and atomically (memory/files.py), one schedule a line, on each
change, or once for a batch: every due schedule of a tick is claimed in one write before any of them is
published. Outcomes may wait (`soon=True`) for the next `flush`, so thousands of runs ending together do not
rewrite a large file thousands of times; a crash before it leaves those runs `fired` (and said so at the
next start). A file that cannot be read is moved aside (`reminders.json.unreadable-<time>`) and Tusk starts
with none; one written by a newer Tusk likewise (`.newer-<time>`), so this one never overwrites it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from bot.commands.base import Owned, counted
from bot.events import ChatKey
from bot.schedules.model import SCHEMA, NewerSchema, Run, Schedule, instant, migrate
from memory.files import write_atomic

logger = logging.getLogger(__name__)

FILE = "reminders.json"


class ScheduleStore(Protocol):
    def load(self) -> list[Schedule]: ...

    def add(self, schedule: Schedule) -> None: ...

    def update(self, schedule: Schedule) -> None: ...

    def remove(self, schedule_id: str) -> None: ...

    def claim(self, schedule: Schedule, due: datetime) -> bool: ...

    def record_run(self, schedule_id: str, run: Run, soon: bool = False) -> None: ...

    def batch(self) -> contextlib.AbstractContextManager[None]: ...

    def flush(self) -> None: ...


HEAD = f'{{"schema": {SCHEMA}, "reminders": ['


def read_records(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """The file's records at the current schema and whether they were migrated ([] if there is no file);
    ValueError (NewerSchema among them) or OSError when it cannot be read."""
    entries, migrated = _read(path)
    return [rec for rec, _ in entries], migrated


def _read(path: Path) -> tuple[Iterator[tuple[dict[str, Any], str | None]], bool]:
    """The file's records, each with its line as written when the file is in Tusk's own one-a-line form (kept,
    so that the first write after loading a large file does not serialise every schedule again), read one at a
    time (a large file's records are never all held as dicts at once); whether they were migrated."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return iter(()), False
    lines = text.split("\n")
    if lines[0] == HEAD and lines[-2:] == ["]}", ""] and all(line.startswith("{") for line in lines[1:-2]):
        rows = [line.removesuffix(",") for line in lines[1:-2]]
        return ((json.loads(row), row) for row in rows), False  # a broken line raises ValueError as it is read
    raw = json.loads(text)
    if not isinstance(raw, dict) or not isinstance(raw.get("reminders"), list):
        raise ValueError('expected {"schema": 2, "reminders": [...]}')
    records, migrated = migrate(raw)
    return ((rec, None) for rec in records), migrated


def render(records: list[dict[str, Any]]) -> str:
    """reminders.json's text: readable, one schedule a line."""
    return _document([json.dumps(rec, ensure_ascii=False) for rec in records])


def _document(lines: list[str]) -> str:
    if not lines:
        return f'{{"schema": {SCHEMA}, "reminders": []}}\n'
    return f'{{"schema": {SCHEMA}, "reminders": [\n' + ",\n".join(lines) + "\n]}\n"


class FileStore:
    """The schedules of one home in reminders.json."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._records: dict[str, Schedule] = {}
        self._lines: dict[str, str] = {}  # id -> its line as last written: only changed schedules are serialised
        self._depth = 0  # open batches
        self._dirty = False

    def load(self) -> list[Schedule]:
        self._records, self._lines = {}, {}
        collecting = gc.isenabled()
        gc.disable()  # 200,000 runs are made here: the collector's passes over them cost more than the work
        try:
            entries, migrated = _read(self.path)
            for rec, row in entries:
                self._add_loaded(rec, row)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            self._records, self._lines = {}, {}
            self._aside(exc)
            return []
        finally:
            if collecting:
                gc.enable()
        if migrated:
            logger.info("%s: migrated to schema %d", self.path, SCHEMA)
            self._write()
        return list(self._records.values())

    def _add_loaded(self, rec: dict[str, Any], row: str | None) -> None:
        try:
            schedule = Schedule.from_record(rec)
        except (ValueError, KeyError, TypeError) as exc:
            logger.error("%s: skipping a schedule that cannot be read (%s): %r", self.path, exc, rec)
            return
        if schedule.id in self._records:
            logger.error("%s: skipping a second schedule with the id %s", self.path, schedule.id)
            return
        self._records[schedule.id] = schedule
        if row is not None:
            self._lines[schedule.id] = row

    def _aside(self, exc: Exception) -> None:
        tag = "newer" if isinstance(exc, NewerSchema) else "unreadable"
        aside = self.path.with_name(f"{self.path.name}.{tag}-{int(time.time())}")
        self.path.replace(aside)
        logger.error("%s cannot be used (%s): moved to %s, starting with no reminders or schedules",
                     self.path, exc, aside)

    def _write(self) -> None:
        lines = self._lines
        for sid, s in self._records.items():
            if sid not in lines:
                lines[sid] = json.dumps(s.to_record(), ensure_ascii=False)
        write_atomic(self.path, _document([lines[sid] for sid in self._records]), follow_dir=True)
        self._dirty = False

    def _set(self, s: Schedule) -> None:
        self._records[s.id] = s
        self._lines.pop(s.id, None)

    def _changed(self, soon: bool = False) -> None:
        self._dirty = True
        if not self._depth and not soon:
            self._write()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth and self._dirty:
                self._write()

    def flush(self) -> None:
        if self._dirty and not self._depth:
            self._write()

    def add(self, schedule: Schedule) -> None:
        self._set(schedule)
        try:
            self._changed()
        except OSError:
            del self._records[schedule.id]  # not on disk, so not set: the caller reports the error
            raise

    def update(self, schedule: Schedule) -> None:
        if schedule.id in self._records:
            self._set(schedule)
            self._changed()

    def remove(self, schedule_id: str) -> None:
        self._lines.pop(schedule_id, None)
        if self._records.pop(schedule_id, None) is not None:
            self._changed()

    def claim(self, schedule: Schedule, due: datetime) -> bool:
        stored = self._records.get(schedule.id)
        if stored is None or stored.due is None or instant(stored.due) != instant(due):
            return False
        self.update(schedule)
        return True

    def record_run(self, schedule_id: str, run: Run, soon: bool = False) -> None:
        stored = self._records.get(schedule_id)
        if stored is not None:
            self._set(stored.with_run(run))
            self._changed(soon)


class SavedSchedules:
    """reminders.json as /forget sees it without a running bot (`tusk forget`): a chat's entries are listed
    and removed from the file. A running bot that still holds one drops it when it is due (its chat's
    folder is gone)."""

    def __init__(self, home: Path) -> None:
        self.path = Path(home) / FILE

    def owned(self, key: ChatKey) -> list[Owned]:
        def ours(rec: dict[str, Any]) -> bool:
            return (rec.get("channel"), rec.get("chat_id")) == (key.channel, key.chat_id)

        count = sum(map(ours, read_records(self.path)[0]))
        if not count:
            return []

        def delete() -> None:
            kept = [rec for rec in read_records(self.path)[0] if not ours(rec)]
            write_atomic(self.path, render(kept), follow_dir=True)

        what = counted(count, "reminder or schedule", "reminders and schedules")
        return [Owned(f"{what} (removed from reminders.json)", delete)]
