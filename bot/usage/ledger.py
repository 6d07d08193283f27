"""The usage ledger: one row per LLM call in `$TUSK_HOME/usage.sqlite`.

    meta    key/value: `salt` (32 random bytes: the limit keys' HMAC key)
    calls   ts, channel, chat, person, purpose, model, input/output/cached tokens, estimated,
            cost_usd (NULL = unknown price, never 0), cost_source, latency_ms, erased,
            chat_key / person_key (limit keys, set only by erasure), characters (text read out by a
            speech engine, purpose `speech`; 0 for every other call)

The file is owner-only (0600, and its -wal/-shm too) and never opened through a symlink. It runs
in WAL mode with `synchronous=NORMAL`: a `record()` is committed without an fsync, so a `kill -9`
loses at most the call in flight (a power cut may lose the last few commits too). The schema
version is `PRAGMA user_version`: `MIGRATIONS` are named functions applied in order, each in its
own transaction. One writer and one reader connection, each behind a lock, serve every thread
of the process (a long report never holds up `record()`).

`input_tokens` includes `cached_tokens` (the OpenAI convention). Erasure (/forget) sets chat
and person to NULL and `erased` to 1, keeping an HMAC-SHA256 of each under the salt so the
day's and month's spend still count toward that chat's and person's limits (`spent`), until
`prune_limit_keys` drops keys older than `KEEP_KEYS_DAYS`. The hash is a pseudonym, not
anonymity: whoever holds the file (salt included) can test a guessed id against it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Literal

from memory.paths import open_private, private_dir

FILE = "usage.sqlite"
KEEP_KEYS_DAYS = 40
# What a call was for (an open set: these are the ones Tusk writes). Every step of a reply's tool loop is "reply".
PURPOSES = ("reply", "consolidation", "task", "reminder", "schedule", "checkin", "transcription", "vision", "probe", "import",
            "speech")
COST_SOURCES = ("provider", "litellm", "configured", "local")
BUCKET_S = 900  # report(by="day") sums quarter hours in SQL, then folds them into days of any zone
COLUMNS = ("ts, channel, chat, person, purpose, model, input_tokens, output_tokens, cached_tokens, estimated, "
           "cost_usd, cost_source, latency_ms, characters")
SUMS = ("count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cached_tokens), 0), sum(cost_usd), count(*) - count(cost_usd), coalesce(sum(characters), 0)")
# (what a report row is keyed by, what SQL groups by: never a constant, so an index's order serves it)
GROUPS = {"chat": ("channel, chat", "channel, chat"), "person": ("channel, person", "channel, person"),
          "model": ("NULL, model", "model"), "purpose": ("NULL, purpose", "purpose"),
          "day": (f"NULL, CAST(ts / {BUCKET_S} AS INTEGER)", "2")}
# The covering indexes' summed columns: as m001 made them, and since m002 (characters added).
SUMMED_V1 = "input_tokens, output_tokens, cached_tokens, cost_usd"
SUMMED = f"{SUMMED_V1}, characters"
INDEXED = (("ts", "ts"), ("chat", "channel, chat, ts"), ("person", "channel, person, ts"), ("model", "model, ts"),
           ("purpose", "purpose, ts"))
# Tokens of calls whose price is unknown: what the token limits count.
UNPRICED_TOKENS = "coalesce(sum(CASE WHEN cost_usd IS NULL THEN input_tokens + output_tokens END), 0)"


class LedgerTooNew(RuntimeError):
    """usage.sqlite was written by a newer Tusk (a schema version this one does not know)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One LLM call. `chat`/`person` are None for housekeeping tied to no chat or sender."""

    ts: float
    channel: str | None
    chat: str | None
    person: str | None
    purpose: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    estimated: bool = False  # Tusk counted the tokens itself: the provider reported none
    cost_usd: float | None = None  # None: the price is unknown (never 0 for that)
    cost_source: str | None = None  # "provider" | "litellm" | "configured" | "local" | None
    latency_ms: float = 0.0
    characters: int = 0  # text read out (purpose speech): what a speech engine charges by

    def __post_init__(self) -> None:
        if (self.cost_usd is None) != (self.cost_source is None):
            raise ValueError(f"a call's cost and its source go together: {self.cost_usd!r}, {self.cost_source!r}")
        if min(self.input_tokens, self.output_tokens, self.cached_tokens, self.characters) < 0:
            raise ValueError("token and character counts cannot be negative")


@dataclass(frozen=True, slots=True)
class Totals:
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float | None  # the sum of the known costs; None when there are calls and every price is unknown
    unknown_calls: int  # calls whose price is unknown (not in cost_usd)
    characters: int = 0  # read out by speech engines


@dataclass(frozen=True, slots=True)
class Row:
    """One group of a report. `key`: the chat or person id (None once erased or for housekeeping), the
    model, the purpose or the ISO date; `channel` only for chat and person groups."""

    channel: str | None
    key: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float | None  # unrounded; None when every call of the group has an unknown price
    unknown_calls: int
    characters: int = 0  # read out by speech engines


@dataclass(frozen=True, slots=True)
class Spent:
    """What counts toward a limit since a time: known cost, tokens of unpriced calls, and the highest call
    id the sums include (calls recorded later are added by the caller as they come)."""

    usd: float
    unpriced_tokens: int
    upto_id: int


def m001_calls(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID")
    db.execute("INSERT INTO meta VALUES ('salt', randomblob(32))")
    db.execute("""CREATE TABLE calls (id INTEGER PRIMARY KEY, ts REAL NOT NULL, channel TEXT, chat TEXT,
        person TEXT, purpose TEXT NOT NULL, model TEXT NOT NULL, input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL, estimated INTEGER NOT NULL,
        cost_usd REAL, cost_source TEXT, latency_ms REAL NOT NULL, erased INTEGER NOT NULL DEFAULT 0,
        chat_key BLOB, person_key BLOB)""")
    # Covering indexes (the summed columns included): reports and limit sums read an index, never the table.
    for name, lead in INDEXED:
        db.execute(f"CREATE INDEX calls_{name} ON calls({lead}, {SUMMED_V1})")
    db.execute("CREATE INDEX calls_chat_key ON calls(chat_key, ts) WHERE chat_key IS NOT NULL")
    db.execute("CREATE INDEX calls_person_key ON calls(person_key, ts) WHERE person_key IS NOT NULL")


def m002_characters(db: sqlite3.Connection) -> None:
    """Speech calls (issue 45) are charged by the character: a column for them, in the covering indexes too."""
    db.execute("ALTER TABLE calls ADD COLUMN characters INTEGER NOT NULL DEFAULT 0")
    for name, lead in INDEXED:
        db.execute(f"DROP INDEX calls_{name}")
        db.execute(f"CREATE INDEX calls_{name} ON calls({lead}, {SUMMED})")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (m001_calls, m002_characters)


def _where(since: float | None, until: float | None, channel: str | None, chat: str | None,
           person: str | None) -> tuple[str, str, list]:
    """(the index to read, the WHERE clause, its arguments). A chat or person filter reads its own index:
    without statistics SQLite would rather scan another one in its GROUP BY order, all of it."""
    if (chat is not None or person is not None) and channel is None:
        raise ValueError("a chat or person id means something only with its channel")
    terms, args = ["1"], []
    for term, value in (("ts >= ?", since), ("ts < ?", until), ("channel = ?", channel), ("chat = ?", chat),
                        ("person = ?", person)):
        if value is not None:
            terms.append(term)
            args.append(value)
    index = "INDEXED BY calls_chat" if chat is not None else "INDEXED BY calls_person" if person is not None else ""
    return index, " AND ".join(terms), args


def _add(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b


class Ledger:
    """The usage ledger of one $TUSK_HOME, opened on first use. Safe from any thread of one process;
    a `report` over many rows takes a while: from async code, call it in a thread."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.path = self.home / FILE
        self._open_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._salt = b""
        self._listeners: list[Callable[[int, Call], None]] = []

    def close(self) -> None:
        with self._write_lock, self._read_lock:
            for db in (self._reader, self._writer):
                if db is not None:
                    db.close()
            self._writer = self._reader = None

    def subscribe(self, listener: Callable[[int, Call], None]) -> None:
        """Call `listener(id, call)` after each call this process records (the spend limits' cache)."""
        self._listeners.append(listener)

    # -- opening -------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA busy_timeout = 5000")
        db.execute("PRAGMA synchronous = NORMAL")
        return db

    def _open(self) -> None:
        with self._open_lock:
            if self._writer is not None:
                return
            private_dir(self.home, follow=True)
            for name in (FILE, f"{FILE}-wal", f"{FILE}-shm"):  # 0600 before SQLite sees them; no symlink
                fd = open_private(self.home / name, os.O_RDWR | os.O_CREAT)
                os.fchmod(fd, 0o600)
                os.close(fd)
            writer = self._connect()
            writer.execute("PRAGMA journal_mode = WAL")
            self._migrate(writer)
            self._salt = writer.execute("SELECT value FROM meta WHERE key = 'salt'").fetchone()[0]
            writer.create_function("limit_key", 3, self._limit_key, deterministic=True)
            self._reader, self._writer = self._connect(), writer

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")  # one process migrates; another waits and then finds it done
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise LedgerTooNew(f"{self.path} has schema version {version}; this Tusk knows up to "
                                   f"{len(MIGRATIONS)}: upgrade Tusk (or move the file away to start a new ledger)")
            for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
                migration(db)
                db.execute(f"PRAGMA user_version = {number}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _limit_key(self, kind: str, channel: str | None, ident: str | None) -> bytes | None:
        if ident is None:
            return None
        return hmac.new(self._salt, f"{kind}\0{channel}\0{ident}".encode(), hashlib.sha256).digest()

    def _write(self, sql: str, args: tuple | list) -> sqlite3.Cursor:
        self._open()
        with self._write_lock:
            return self._writer.execute(sql, args)

    def _read(self, sql: str, args: tuple | list) -> list[tuple]:
        self._open()
        with self._read_lock:
            return self._reader.execute(sql, args).fetchall()

    # -- writing -------------------------------------------------------------------------------

    def record(self, call: Call) -> int:
        """Insert one call and commit it (no fsync: WAL with synchronous=NORMAL); returns its id."""
        row = (call.ts, call.channel, call.chat, call.person, call.purpose, call.model, call.input_tokens,
               call.output_tokens, call.cached_tokens, int(call.estimated), call.cost_usd, call.cost_source,
               call.latency_ms, call.characters)
        rowid = self._write(f"INSERT INTO calls ({COLUMNS}) VALUES ({', '.join('?' * len(row))})", row).lastrowid
        for listener in self._listeners:
            listener(rowid, call)
        return rowid

    def erase_chat(self, channel: str, chat: str) -> int:
        """/forget: the chat's calls lose the chat and person ids (limit keys kept); returns how many."""
        return self._write("""UPDATE calls SET chat_key = limit_key('chat', channel, chat),
            person_key = coalesce(limit_key('person', channel, person), person_key),
            chat = NULL, person = NULL, erased = 1 WHERE channel = ? AND chat = ?""", (channel, chat)).rowcount

    def erase_person(self, channel: str, chat: str, person: str) -> int:
        """/forget me: the person's calls in this chat lose the person id (its limit key kept)."""
        return self._write("""UPDATE calls SET person_key = limit_key('person', channel, person), person = NULL,
            erased = 1 WHERE channel = ? AND chat = ? AND person = ?""", (channel, chat, person)).rowcount

    def erase_person_everywhere(self, channel: str, person: str) -> int:
        """The person's calls in every chat of the channel lose the person id (its limit key kept)."""
        return self._write("""UPDATE calls SET person_key = limit_key('person', channel, person), person = NULL,
            erased = 1 WHERE channel = ? AND person = ?""", (channel, person)).rowcount

    def prune_limit_keys(self, now: float | None = None, days: int = KEEP_KEYS_DAYS) -> int:
        """Drop the limit keys of erased calls older than `days` (no limit looks back that far)."""
        cutoff = (time.time() if now is None else now) - days * 86400
        return self._write("""UPDATE calls SET chat_key = NULL, person_key = NULL WHERE ts < ? AND erased = 1
            AND (chat_key IS NOT NULL OR person_key IS NOT NULL)""", (cutoff,)).rowcount

    # -- reading -------------------------------------------------------------------------------

    def totals(self, since: float | None = None, until: float | None = None, channel: str | None = None,
               chat: str | None = None, person: str | None = None) -> Totals:
        """Sums over the calls in [since, until) of the chat/person given (erased calls match no id)."""
        index, where, args = _where(since, until, channel, chat, person)
        calls, *sums = self._read(f"SELECT {SUMS} FROM calls {index} WHERE {where}", args)[0]
        if calls == 0:
            sums[3] = 0.0  # nothing spent, rather than an unknown price
        return Totals(calls, *sums)

    def model_calls(self, model: str, since: float) -> tuple[int, int]:
        """(calls with a known cost, calls without) of one model since `since` (its own index: quick)."""
        priced, unpriced = self._read("SELECT count(cost_usd), count(*) - count(cost_usd) FROM calls INDEXED BY "
                                      "calls_model WHERE model = ? AND ts >= ?", [model, since])[0]
        return priced, unpriced

    def report(self, by: Literal["day", "chat", "person", "model", "purpose"], since: float | None = None,
               until: float | None = None, channel: str | None = None, chat: str | None = None,
               person: str | None = None, zone: tzinfo = timezone.utc) -> list[Row]:
        """One row per day (in `zone`, oldest first), chat, person, model or purpose (costliest first)."""
        if by not in GROUPS:
            raise ValueError(f"report by {by!r}: choose one of {', '.join(GROUPS)}")
        index, where, args = _where(since, until, channel, chat, person)
        keys, group = GROUPS[by]
        rows = self._read(f"SELECT {keys}, {SUMS} FROM calls {index} WHERE {where} GROUP BY {group}", args)
        if by != "day":
            result = [Row(*r) for r in rows]
            return sorted(result, key=lambda r: (r.cost_usd is None, -(r.cost_usd or 0), -r.calls))
        days: dict[str, list] = {}
        for _, bucket, *sums in rows:
            day = datetime.fromtimestamp(bucket * BUCKET_S, zone).date().isoformat()
            acc = days.setdefault(day, [0, 0, 0, 0, None, 0, 0])
            for i, value in enumerate(sums):
                acc[i] = _add(acc[i], value)
        return [Row(None, day, *acc) for day, acc in sorted(days.items())]

    def spent(self, since: float, channel: str | None = None, chat: str | None = None,
              person: str | None = None) -> Spent:
        """What counts toward a limit since `since`: everyone's calls (no ids), a chat's or a person's
        (channel with chat or person), erased ones included through their limit keys."""
        self._open()
        sums = f"coalesce(sum(cost_usd), 0), {UNPRICED_TOKENS}"
        if chat is None and person is None:
            sql, args = f"SELECT {sums} FROM calls WHERE ts >= ?", [since]
        else:
            kind, ident = ("chat", chat) if chat is not None else ("person", person)
            key = self._limit_key(kind, channel, ident)
            sql = (f"SELECT {sums} FROM (SELECT cost_usd, input_tokens, output_tokens FROM calls WHERE channel = ? "
                   f"AND {kind} = ? AND ts >= ? UNION ALL SELECT cost_usd, input_tokens, output_tokens FROM calls "
                   f"WHERE {kind}_key = ? AND ts >= ?)")
            args = [channel, ident, since, key, since]
        with self._read_lock:  # one snapshot: the sums and the id they reach
            self._reader.execute("BEGIN")
            try:
                usd, tokens = self._reader.execute(sql, args).fetchone()
                upto = self._reader.execute("SELECT coalesce(max(id), 0) FROM calls").fetchone()[0]
            finally:
                self._reader.execute("COMMIT")
        return Spent(usd, tokens, upto)
