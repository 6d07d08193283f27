"""A question, read for search: the words worth looking for, the chat members it names,
and the time it points at.

    q = read("What did Ana say about her trip in May 2023?", members=["Ana", "Bob"], now=now)
    q.terms == ("ana", "trip"); q.names == ("ana",); q.since/q.until == May 2023 in the chat's zone

- question words, pronouns, auxiliaries and filler ("would", "likely", "kind of") are dropped;
  a possessive `'s` goes with its word instead of becoming a lone `s`;
- a word that is a member's name (their full display name or one part of it) also goes to
  `names`, so that person's own messages rank higher;
- month names (with or without a year), years, and relative dates ("last year", "last month",
  "last week", "yesterday", "3 days ago") become a time range in the chat's time zone and are
  not searched as words. A month without a year is its latest occurrence not after `now`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be been before being below between both but by
can could did do does doing done down during each either else ever every few for from further get gets got had has
have having he her here hers herself him himself his how i if in into is it its itself just like likely may me might
mine more most much must my myself no nor not now of off on once only or other ought our ours ourselves out over own
perhaps probably quite rather really same shall she should so some such than that the their theirs them themselves
then there these they this those through to too under until up upon us very was we were what whatever when where
whether which while who whom whose why will with within would yet you your yours yourself yourselves
anything something someone somebody anyone thing things kind kinds sort type types way ways lot lots
say says said tell told mention mentioned remember recall think thought know knew talk talked discuss discussed
one ones many s t d ll re ve m
""".split())

MONTHS = {name: i for i, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec")), 1) for name in names}
AMBIGUOUS_MONTHS = frozenset({"may", "march", "mar", "jan", "jun", "dec", "oct", "aug", "sep"})  # also plain words
MONTH_CUES = frozenset({"in", "of", "since", "during", "early", "late", "mid", "last", "this", "next", "before",
                        "after", "until"})
UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30, "year": 365, "years": 365}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "few": 3, "couple": 2}
WORD = re.compile(r"\w+")
YEAR = re.compile(r"(19|20)\d\d")


@dataclass(frozen=True, slots=True)
class Question:
    terms: tuple[str, ...]  # lowercased words to search for, in order, without duplicates
    names: tuple[str, ...] = ()  # members named in the question (lowercased display names)
    since: float | None = None  # the time the question points at: [since, until) as timestamps
    until: float | None = None


def words(text: str) -> list[str]:
    """Lowercased words, a possessive 's (or ’s) kept with its word."""
    text = re.sub(r"(\w)['’]s\b", r"\1", text.lower())
    return WORD.findall(text)


def _month_range(year: int, month: int, zone) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=zone)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=zone)
    return start, end


def _relative(ws: list[str], i: int, now: datetime) -> tuple[tuple[datetime, datetime] | None, int]:
    """A relative date starting at word i: (range, words used) or (None, 0)."""
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    w, nxt = ws[i], ws[i + 1] if i + 1 < len(ws) else ""
    if w == "yesterday":
        return (day - timedelta(days=1), day), 1
    if w == "today":
        return (day, day + timedelta(days=1)), 1
    if w in ("last", "this") and nxt in ("week", "month", "year"):
        if nxt == "year":
            start = day.replace(month=1, day=1)
            return ((start.replace(year=start.year - 1), start) if w == "last"
                    else (start, start.replace(year=start.year + 1))), 2
        if nxt == "month":
            first = day.replace(day=1)
            prev = (first - timedelta(days=1)).replace(day=1)
            return ((prev, first) if w == "last" else _month_range(first.year, first.month, now.tzinfo)), 2
        monday = day - timedelta(days=day.weekday())
        return ((monday - timedelta(days=7), monday) if w == "last" else (monday, monday + timedelta(days=7))), 2
    count = int(w) if w.isdigit() and len(w) < 4 else NUMBERS.get(w)
    if count and nxt in UNITS and i + 2 < len(ws) and ws[i + 2] == "ago":
        days = count * UNITS[nxt]
        slack = max(1, days // 4)  # "3 weeks ago" is roughly, not exactly, 21 days ago
        return (day - timedelta(days=days + slack), day - timedelta(days=max(0, days - slack) - 1)), 3
    return None, 0


def _absolute(ws: list[str], i: int, now: datetime) -> tuple[tuple[datetime, datetime] | None, int]:
    """A month (optionally with a year) or a year at word i."""
    w, nxt = ws[i], ws[i + 1] if i + 1 < len(ws) else ""
    if w in MONTHS:
        has_year = bool(YEAR.fullmatch(nxt))
        cued = i > 0 and ws[i - 1] in MONTH_CUES
        if w in AMBIGUOUS_MONTHS and not (has_year or cued):
            return None, 0
        month = MONTHS[w]
        if has_year:
            return _month_range(int(nxt), month, now.tzinfo), 2
        year = now.year if month <= now.month else now.year - 1
        return _month_range(year, month, now.tzinfo), 1
    if YEAR.fullmatch(w):
        year = int(w)
        return (datetime(year, 1, 1, tzinfo=now.tzinfo), datetime(year + 1, 1, 1, tzinfo=now.tzinfo)), 1
    return None, 0


def _member_keys(members: Iterable[str]) -> dict[str, str]:
    """Each word of a member's name -> their lowercased full name (a first name finds "Ana Lopez")."""
    keys: dict[str, str] = {}
    for name in members:
        full = " ".join(words(name))
        for part in words(name):
            if len(part) > 1 and part not in STOP_WORDS:
                keys.setdefault(part, full)
    return keys


def read(text: str, members: Iterable[str] = (), now: datetime | None = None) -> Question:
    """The question's search terms, the members it names and its time range (see the module doc)."""
    ws = words(text)
    keys = _member_keys(members)
    terms: list[str] = []
    names: list[str] = []
    span: tuple[datetime, datetime] | None = None
    i = 0
    while i < len(ws):
        found, used = (None, 0) if now is None else _relative(ws, i, now)
        if not used and now is not None:
            found, used = _absolute(ws, i, now)
        if used and found is not None:
            span = found if span is None else (min(span[0], found[0]), max(span[1], found[1]))
            i += used
            continue
        w = ws[i]
        if w in keys:  # searched too: others name the person when they talk to them
            names.append(keys[w])
        if w not in STOP_WORDS:
            terms.append(w)
        i += 1
    if not terms and not names:  # nothing but stop words: search them rather than nothing
        terms = [w for w in ws if not YEAR.fullmatch(w)]
    return Question(tuple(dict.fromkeys(terms)), tuple(dict.fromkeys(names)),
                    span[0].timestamp() if span else None, span[1].timestamp() if span else None)
