"""Where each fact of MEMORY.md came from: the chat's `provenance.json` document (store/base.py; never in
the prompt). Pure: the caller reads and writes the document through the store (`parse`, `dump`).

    {"schema": 1, "facts": {"<key>": {"fact": "- Bob drinks green tea", "section": "Bob", "seen": 1733...,
                                      "sources": [{"kind": "message", "pos": 12, "ts": 1733..., "sender_id": "8",
                                                   "sender_name": "Bob", "text": "I only drink green tea"}]}}}

A fact is one line of MEMORY.md that is not a heading (a bullet, a `key: value` line, a sentence under a
heading); its key is its lower-cased words (without the `[asked by ...]` note), so re-wording its
punctuation or bullet keeps it. A source is a chat message (`message`: its position in the session, time,
sender and a trimmed quote), a HISTORY.md entry (`history`: its dated heading and a quote), an owner's
console edit (`owner`) or the remember tool (`remember`: the message it was called from).

Attribution is done by Tusk, never by the model, after each consolidation round (`relink`): a fact kept
from the previous version keeps its sources; a new or changed one is matched by its words to the chunk's
messages that say it (`best_matches`: the share of the fact's words, weighted by their rarity in the chunk);
a fact the model rewrote (similar to one it removed) keeps that fact's sources plus the new matches; a
fact no message says is linked to the HISTORY.md entries that say it, else to the round's own entry.
Facts no longer in MEMORY.md keep their links a while (`KEEP_GONE`), so `/memory undo` finds them again.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from memory.files import entry_stamp

SCHEMA = 1
QUOTE_CHARS = 240
KEEP_GONE = 200  # links of facts no longer in MEMORY.md kept (newest first) for an undo
MATCH_THRESHOLD = 0.5  # share of a fact's (weighted) words a message must say to be its source
REWRITE_THRESHOLD = 0.5  # word overlap (Jaccard) for a new fact to count as a rewrite of a removed one
MAX_SOURCES = 3
_ASKED_BY = re.compile(r"\s*\[asked by [^\]]*\]\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_WORD = re.compile(r"\w+")
STOP = frozenset("""a an and are as at be been but by for from had has have he her his i in is it its me my
of on or our she so that the their them they this to was we were what when which who will with you your
likes like about also now does do did not no yes there here just very""".split())


@dataclass(frozen=True, slots=True)
class Source:
    kind: str  # "message", "history", "owner", "remember"
    ts: float | None = None
    pos: int | None = None  # a message's position in session.jsonl (0 = first message)
    sender_id: str | None = None
    sender_name: str | None = None
    text: str = ""  # the message or entry, trimmed; for "history" the dated heading comes first

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Source:
        return cls(str(raw.get("kind", "")), raw.get("ts"), raw.get("pos"), raw.get("sender_id"),
                   raw.get("sender_name"), str(raw.get("text", "")))


@dataclass(frozen=True, slots=True)
class Fact:
    line: str  # as MEMORY.md has it
    section: str  # the `## ` heading above it ('' at the top)
    number: int  # 1-based among the facts of MEMORY.md

    @property
    def key(self) -> str:
        return fact_key(self.line)

    @property
    def text(self) -> str:
        """The fact without its bullet and its `[asked by ...]` note."""
        return _ASKED_BY.sub("", _BULLET.sub("", self.line)).strip()


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP and len(w) > 1]


def fact_key(line: str) -> str:
    return " ".join(_WORD.findall(_ASKED_BY.sub("", _BULLET.sub("", line)).lower()))


def facts(memory: str) -> list[Fact]:
    """The fact lines of a MEMORY.md text, in order."""
    out: list[Fact] = []
    section = ""
    for line in memory.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            section = stripped.lstrip("#").strip() if stripped.startswith("## ") else section
            continue
        if stripped and fact_key(stripped):
            out.append(Fact(stripped, section, len(out) + 1))
    return out


def trim(text: str, limit: int = QUOTE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# -- the document ----------------------------------------------------------------------------------------

def parse(text: str | None) -> dict[str, dict[str, Any]]:
    """The chat's links by fact key, from provenance.json's text ({} when there are none or it is unreadable)."""
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data.get("facts", {}) if isinstance(data, dict) and isinstance(data.get("facts"), dict) else {}


def dump(links: dict[str, dict[str, Any]]) -> str:
    return json.dumps({"schema": SCHEMA, "facts": links}, ensure_ascii=False, indent=1) + "\n"


def sources_of(entry: dict[str, Any] | None) -> list[Source]:
    return [Source.from_dict(s) for s in (entry or {}).get("sources", []) if isinstance(s, dict)]


# -- attribution ----------------------------------------------------------------------------------------

def best_matches(fact: str, candidates: Sequence[tuple[Source, str]], threshold: float = MATCH_THRESHOLD,
                 limit: int = MAX_SOURCES) -> list[Source]:
    """The candidates whose text says `fact`: each scored by the share of the fact's words it holds, a word
    weighted by its rarity among the candidates (a BM25-like idf; a word no candidate holds, the model's
    own wording, counts half; the value of a `key: value` fact double); the best few above `threshold`."""
    wanted = set(words(fact))
    if not wanted or not candidates:
        return []
    value = set(words(fact.split(": ", 1)[1])) if ": " in fact else set()  # a `key: value` fact's value
    bags = [set(words(text)) for _, text in candidates]
    n = len(bags)
    df = {w: sum(w in b for b in bags) for w in wanted}
    idf = {w: math.log(1 + (n + 1) / (1 + d)) * (1 if d else 0.5) * (2 if w in value else 1) for w, d in df.items()}
    total = sum(idf.values())
    scored = [(sum(idf[w] for w in wanted & bag) / total, i) for i, bag in enumerate(bags)]
    scored = [(s, i) for s, i in scored if s >= threshold]
    if not scored:
        return []
    top = max(s for s, _ in scored)
    keep = sorted((i for s, i in scored if s >= top * 0.8), key=lambda i: -i)[:limit]  # latest first
    return [candidates[i][0] for i in sorted(keep)]


def message_candidates(chunk: Iterable[tuple[int, Any]]) -> list[tuple[Source, str]]:
    """(source, text) for the user messages of a chunk given as (position, Message) pairs."""
    return [(Source("message", m.ts, pos, m.sender_id, m.sender_name, trim(m.content)),
             f"{m.sender_name or ''} {m.content}")  # "Alice is vegetarian" is said by Alice as "I am vegetarian"
            for pos, m in chunk if m.role == "user" and isinstance(m.content, str) and m.content.strip()]


def history_candidates(entries: Sequence[str]) -> list[tuple[Source, str]]:
    out = []
    for entry in entries:
        heading, _, body = entry.partition("\n")
        when = heading.removeprefix("## ").strip()
        out.append((Source("history", None, text=trim(f"{when}: {body.strip()}")), body))
    return out


def round_entry(when: float, entry: str, until: float | None = None) -> Source:
    """The HISTORY.md entry a round appends (its heading's time or span, as memory/files.py writes it)."""
    return Source("history", until or when, text=trim(f"{entry_stamp(when, until)}: {entry}"))


def _jaccard(a: str, b: str) -> float:
    x, y = set(words(a)), set(words(b))
    return len(x & y) / len(x | y) if x | y else 0.0


def relink(links: dict[str, dict[str, Any]], old_memory: str, new_memory: str,
           new_sources: Callable[[Fact], list[Source]], rewrites: bool = True,
           fallback: Source | None = None) -> dict[str, dict[str, Any]]:
    """The links after MEMORY.md went from `old_memory` to `new_memory`: kept facts keep their sources, a
    rewritten one inherits those of the fact it replaced, and `new_sources(fact)` names the rest's."""
    now = time.time()
    old_keys = {f.key for f in facts(old_memory)}
    current = facts(new_memory)
    new_keys = {f.key for f in current}
    removed = [f for f in facts(old_memory) if f.key not in new_keys]
    out: dict[str, dict[str, Any]] = {}
    for fact in current:
        entry = links.get(fact.key)
        if fact.key in old_keys and entry and entry.get("sources"):
            sources = sources_of(entry)
        else:
            inherited: list[Source] = []
            if rewrites:
                near = max(removed, key=lambda r: _jaccard(r.text, fact.text), default=None)
                if near is not None and _jaccard(near.text, fact.text) >= REWRITE_THRESHOLD:
                    inherited = sources_of(links.get(near.key))
            sources = inherited + [s for s in new_sources(fact) if s not in inherited]
            if not sources and entry:
                sources = sources_of(entry)  # a fact back from an undo keeps what it had
            if not sources and fallback is not None:
                sources = [fallback]
        out[fact.key] = {"fact": fact.line, "section": fact.section, "seen": now,
                         "sources": [asdict(s) for s in sources]}
    gone = sorted(((k, v) for k, v in links.items() if k not in out), key=lambda kv: -kv[1].get("seen", 0))
    out.update(gone[:KEEP_GONE])
    return out


def after_round(links: dict[str, dict[str, Any]], old_memory: str, new_memory: str,
                chunk: Sequence[tuple[int, Any]], history: Sequence[str], entry: Source) -> dict[str, dict[str, Any]]:
    """The links once a consolidation round wrote `new_memory`: each fact to the chunk's messages that say it,
    else to the earlier HISTORY.md entries that do, else to the round's own entry (`entry`)."""
    messages, older = message_candidates(chunk), history_candidates(history)

    def match(fact: Fact) -> list[Source]:
        said = f"{fact.section} {fact.text}"  # a group's `## Alice` names whose fact it is
        return best_matches(said, messages) or best_matches(said, older, limit=1)

    return relink(links, old_memory, new_memory, match, fallback=entry)


def after_edit(links: dict[str, dict[str, Any]], old_memory: str, new_memory: str, source: Source,
               exact: Callable[[Fact], bool] = lambda fact: True) -> dict[str, dict[str, Any]]:
    """The links once an edit that did not come from consolidation (the owner's console edit, the remember
    tool, an undo) made `new_memory`: its new or changed facts linked to `source` (those `exact` accepts;
    the rest keep what they had)."""
    return relink(links, old_memory, new_memory,
                  lambda fact: [source] if exact(fact) else [], rewrites=source.kind != "remember")


def forget_member(links: dict[str, dict[str, Any]], member_id: str,
                  names: Sequence[str] = ()) -> tuple[dict[str, dict[str, Any]], int]:
    """/forget me: the links without a member's (their messages, summaries naming them) and without the facts
    of their section, kept or gone; and how many links went."""
    links, dropped = {k: dict(v) for k, v in links.items()}, 0
    folded = [n.casefold() for n in names if n]
    theirs = lambda s: s.get("sender_id") == member_id or any(n in str(s.get("text", "")).casefold()  # noqa: E731
                                                              for n in folded)
    for key in list(links):
        entry = links[key]
        before = entry.get("sources", [])
        kept = [s for s in before if not theirs(s)]
        dropped += len(before) - len(kept)
        about = f"{entry.get('section', '')}\n{entry.get('fact', '')}".casefold()
        if any(n in about for n in folded) or (before and not kept):
            del links[key]
        else:
            entry["sources"] = kept
    return links, dropped


