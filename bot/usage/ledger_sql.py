"""What the two usage ledgers share: the values that cross them (`Call`, `Totals`, `Row`, `Spent`), the
limit keys, and `SqlLedger`, the ledger's queries in the SQL that SQLite and PostgreSQL both speak, with
what differs left to each backend:

    ledger.py      `Ledger`: $TUSK_HOME/usage.sqlite (SQLite: index hints, PRAGMAs, `limit_key` as an
                   SQL function, CAST's truncation for the quarter-hour buckets)
    ledger_pg.py   `PgLedger`: the `usage_calls` table of TUSK_DATABASE_URL (no hints, the planner has
                   statistics; the limit key's HMAC made from PostgreSQL's own sha256; floor for buckets)

Both give the same figures for the same calls: the same rows are summed, days are folded from quarter-hour
buckets in Python, and rows are ordered in Python. Queries are written with `?` placeholders (the
PostgreSQL backend turns them into psycopg's `%s`; no query holds a literal `?` or `%`).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from typing import Literal

KEEP_KEYS_DAYS = 40
# What a call was for (an open set: these are the ones Tusk writes). Every step of a reply's tool loop is "reply".
PURPOSES = ("reply", "consolidation", "task", "reminder", "schedule", "checkin", "transcription", "vision", "probe",
            "import", "speech")
COST_SOURCES = ("provider", "litellm", "configured", "local")
BUCKET_S = 900  # report(by="day") sums quarter hours in SQL, then folds them into days of any zone
COLUMNS = ("ts, channel, chat, person, purpose, model, input_tokens, output_tokens, cached_tokens, estimated, "
           "cost_usd, cost_source, latency_ms, characters")
SUMS = ("count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cached_tokens), 0), sum(cost_usd), count(*) - count(cost_usd), coalesce(sum(characters), 0)")
# Tokens of calls whose price is unknown: what the token limits count.
UNPRICED_TOKENS = "coalesce(sum(CASE WHEN cost_usd IS NULL THEN input_tokens + output_tokens END), 0)"
Group = Literal["day", "chat", "person", "model", "purpose"]
GROUPS = ("chat", "person", "model", "purpose", "day")


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

    def row(self) -> tuple:
        """The values of `COLUMNS`, in order."""
        return (self.ts, self.channel, self.chat, self.person, self.purpose, self.model, self.input_tokens,
                self.output_tokens, self.cached_tokens, int(self.estimated), self.cost_usd, self.cost_source,
                self.latency_ms, self.characters)


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
    """What counts toward a limit since a time: known cost, tokens of unpriced calls, and the highest id of
    this process's calls the sums include (the calls it records later are added by the caller as they come)."""

    usd: float
    unpriced_tokens: int
    upto_id: int


def limit_key(salt: bytes, kind: str, channel: str | None, ident: str | None) -> bytes | None:
    """What stands for an erased chat or person id: HMAC-SHA256 under the ledger's salt."""
    if ident is None:
        return None
    return hmac.new(salt, f"{kind}\0{channel}\0{ident}".encode(), hashlib.sha256).digest()


def _costliest(r: Row) -> tuple:
    """Costliest first, then most calls; ties in the order of the ids (None first, as SQL sorts NULL), so that
    both databases list them alike."""
    return (r.cost_usd is None, -(r.cost_usd or 0), -r.calls, r.channel is not None, r.channel or "",
            r.key is not None, r.key or "")


def _add(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b


class SqlLedger:
    """The ledger's logic. A backend sets `table`, `bucket` (the quarter hour of `ts` as an integer) and
    `hints` (an index to read per filter, for SQLite), and gives the connection work below."""

    table = "calls"
    bucket = f"CAST(ts / {BUCKET_S} AS INTEGER)"
    hints: dict[str, str] = {}
    _listeners: list[Callable[[int, Call], None]]

    # -- what a backend gives --------------------------------------------------------------------

    def _insert(self, row: tuple) -> int:
        """Insert one call's `COLUMNS` and commit; its id."""
        raise NotImplementedError

    def _update(self, sql: str, args: list) -> int:
        """Run one UPDATE and commit; how many rows it changed."""
        raise NotImplementedError

    def _rows(self, sql: str, args: list) -> list[tuple]:
        raise NotImplementedError

    def _spent(self, sql: str, args: list) -> Spent:
        """The sums of `sql` and, read in one snapshot with them, the id `Spent.upto_id` says."""
        raise NotImplementedError

    def _key_sql(self, kind: str) -> tuple[str, list]:
        """An SQL expression of the limit key of the row's `kind` column (`chat` or `person`), its arguments."""
        raise NotImplementedError

    def _key(self, kind: str, channel: str | None, ident: str | None) -> bytes | None:
        raise NotImplementedError

    def exists(self) -> bool:
        """Whether there is a ledger to read: a check that makes nothing."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # -- writing -------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[int, Call], None]) -> None:
        """Call `listener(id, call)` after each call this process records (the spend limits' cache)."""
        self._listeners.append(listener)

    def record(self, call: Call) -> int:
        """Insert one call and commit it; returns its id."""
        rowid = self._insert(call.row())
        for listener in self._listeners:
            listener(rowid, call)
        return rowid

    def insert_sql(self) -> str:
        return f"INSERT INTO {self.table} ({COLUMNS}) VALUES ({', '.join('?' * len(COLUMNS.split(',')))})"

    def erase_chat(self, channel: str, chat: str) -> int:
        """/forget: the chat's calls lose the chat and person ids (limit keys kept); returns how many."""
        chat_key, chat_args = self._key_sql("chat")
        person_key, person_args = self._key_sql("person")
        return self._update(f"""UPDATE {self.table} SET chat_key = {chat_key},
            person_key = coalesce({person_key}, person_key), chat = NULL, person = NULL, erased = 1
            WHERE channel = ? AND chat = ?""", [*chat_args, *person_args, channel, chat])

    def erase_person(self, channel: str, chat: str, person: str) -> int:
        """/forget me: the person's calls in this chat lose the person id (its limit key kept)."""
        key, args = self._key_sql("person")
        return self._update(f"""UPDATE {self.table} SET person_key = {key}, person = NULL, erased = 1
            WHERE channel = ? AND chat = ? AND person = ?""", [*args, channel, chat, person])

    def erase_person_everywhere(self, channel: str, person: str) -> int:
        """The person's calls in every chat of the channel lose the person id (its limit key kept)."""
        key, args = self._key_sql("person")
        return self._update(f"""UPDATE {self.table} SET person_key = {key}, person = NULL, erased = 1
            WHERE channel = ? AND person = ?""", [*args, channel, person])

    def prune_limit_keys(self, now: float | None = None, days: int = KEEP_KEYS_DAYS) -> int:
        """Drop the limit keys of erased calls older than `days` (no limit looks back that far)."""
        cutoff = (time.time() if now is None else now) - days * 86400
        return self._update(f"""UPDATE {self.table} SET chat_key = NULL, person_key = NULL WHERE ts < ?
            AND erased = 1 AND (chat_key IS NOT NULL OR person_key IS NOT NULL)""", [cutoff])

    # -- reading -------------------------------------------------------------------------------

    def _where(self, since: float | None, until: float | None, channel: str | None, chat: str | None,
               person: str | None) -> tuple[str, str, list]:
        """(the index hint, the WHERE clause, its arguments)."""
        if (chat is not None or person is not None) and channel is None:
            raise ValueError("a chat or person id means something only with its channel")
        terms, args = ["1 = 1"], []
        for term, value in (("ts >= ?", since), ("ts < ?", until), ("channel = ?", channel), ("chat = ?", chat),
                            ("person = ?", person)):
            if value is not None:
                terms.append(term)
                args.append(value)
        hint = self.hints.get("chat" if chat is not None else "person" if person is not None else "", "")
        return hint, " AND ".join(terms), args

    def totals(self, since: float | None = None, until: float | None = None, channel: str | None = None,
               chat: str | None = None, person: str | None = None) -> Totals:
        """Sums over the calls in [since, until) of the chat/person given (erased calls match no id)."""
        hint, where, args = self._where(since, until, channel, chat, person)
        calls, *sums = self._rows(f"SELECT {SUMS} FROM {self.table} {hint} WHERE {where}", args)[0]
        if calls == 0:
            sums[3] = 0.0  # nothing spent, rather than an unknown price
        return Totals(calls, *sums)

    def model_calls(self, model: str, since: float) -> tuple[int, int]:
        """(calls with a known cost, calls without) of one model since `since` (its own index: quick)."""
        priced, unpriced = self._rows(f"SELECT count(cost_usd), count(*) - count(cost_usd) FROM {self.table} "
                                      f"{self.hints.get('model', '')} WHERE model = ? AND ts >= ?", [model, since])[0]
        return priced, unpriced

    def report(self, by: Group, since: float | None = None, until: float | None = None, channel: str | None = None,
               chat: str | None = None, person: str | None = None, zone: tzinfo = timezone.utc) -> list[Row]:
        """One row per day (in `zone`, oldest first), chat, person, model or purpose (costliest first)."""
        if by not in GROUPS:
            raise ValueError(f"report by {by!r}: choose one of {', '.join(GROUPS)}")
        hint, where, args = self._where(since, until, channel, chat, person)
        # (what a row is keyed by, what SQL groups by: never a constant, so an index's order serves it)
        keys, group = {"chat": ("channel, chat", "channel, chat"), "person": ("channel, person", "channel, person"),
                       "model": ("NULL, model", "model"), "purpose": ("NULL, purpose", "purpose"),
                       "day": (f"NULL, {self.bucket}", "2")}[by]
        rows = self._rows(f"SELECT {keys}, {SUMS} FROM {self.table} {hint} WHERE {where} GROUP BY {group}", args)
        if by != "day":
            result = [Row(*r) for r in rows]
            return sorted(result, key=_costliest)
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
        sums = f"coalesce(sum(cost_usd), 0), {UNPRICED_TOKENS}"
        if chat is None and person is None:
            return self._spent(f"SELECT {sums} FROM {self.table} WHERE ts >= ?", [since])
        kind, ident = ("chat", chat) if chat is not None else ("person", person)
        key = self._key(kind, channel, ident)
        picked = "SELECT cost_usd, input_tokens, output_tokens"
        return self._spent(f"SELECT {sums} FROM ({picked} FROM {self.table} WHERE channel = ? AND {kind} = ? "
                           f"AND ts >= ? UNION ALL {picked} FROM {self.table} WHERE {kind}_key = ? AND ts >= ?) AS c",
                           [channel, ident, since, key, since])
