"""Facts forgotten on request, kept as tombstones so the old conversation cannot bring them back: the
chat's `forgotten.json` document (store/base.py; never in the prompt of a reply). Pure: the caller reads
and writes the document through the store (`parse`, `dump`).

    {"schema": 1, "forgotten": [{"fact": "Bob drinks green tea", "key": "bob drinks green tea",
                                 "section": "Bob", "at": 1733..., "by": "8"}]}

`/memory forget` removes facts from MEMORY.md as a new version (so `/memory undo` brings them back)
and records a tombstone for each (`forget`). Each consolidation request names the forgotten facts
(`request_note`), and after each round `enforce` removes any tombstoned fact the model wrote again,
unless a message of the chunk newer than the forgetting says it again: then the tombstone is lifted
and the fact stays. A tombstoned fact that was already back in MEMORY.md before the round (an undo,
an owner's edit) lifts its tombstone too.

Models copy what a prompt shows, so the note is no list of memory lines: each fact is quoted after
its date (`forgotten 2026-12-04 19:54 UTC: "dog: Rex"`), and whatever a round writes back of it is
recognised (`unnoticed`): the date, the word "forgotten", the quotes, and the older `- fact (forgotten
DATE)` form are taken off a line before it is matched, so a copied notice is the forgotten fact itself
and goes with it. A line the note's form still marks is written back without the marks, if it stays
(its fact said again since); the round's history entry keeps no copied notice either (`clean_entry`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from memory.provenance import Fact, best_matches, fact_key, facts, message_candidates, words

SCHEMA = 1
SAME_FACT = 0.6  # word overlap (Jaccard) at which a fact is the forgotten one reworded
NOTE_FACTS = 20  # forgotten facts named in a consolidation request, newest first
STAMP = "%Y-%m-%d %H:%M UTC"
# What the note puts around a fact, in any form a model may copy it: "(forgotten DATE)", "[forgotten ...]",
# "forgotten DATE:" (the date ISO, with or without its time and zone)
_DATE = r"\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?(?:\s*(?:UTC|Z))?"
NOTICE = re.compile(rf"\(\s*forgotten\b[^()]*\)|\[\s*forgotten\b[^\[\]]*\]"
                    rf"|\bforgotten(?:\s+(?:on|at))?\s+{_DATE}\s*[:\-\u2013\u2014]?", re.IGNORECASE)
QUOTES = "\"'`\u2018\u2019\u201c\u201d"


@dataclass(frozen=True, slots=True)
class Tombstone:
    fact: str
    key: str
    section: str
    at: float
    by: str = ""

    def covers(self, text: str) -> bool:
        """Whether a fact's text (without its bullet; a notice's marks taken off) is this forgotten fact."""
        if fact_key(text) == self.key:
            return True
        a, b = set(words(self.fact)), set(words(text))
        return bool(a | b) and len(a & b) / len(a | b) >= SAME_FACT


def unnoticed(text: str) -> str:
    """A fact's text without what a consolidation request's note about forgotten facts put around it."""
    if not NOTICE.search(text):
        return text
    bare = " ".join(NOTICE.sub(" ", text).split())
    return bare.strip(" -:\u2013\u2014").strip(QUOTES).strip()


def parse(text: str | None) -> list[Tombstone]:
    """The tombstones in forgotten.json's text (none when it is missing or unreadable)."""
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return []
    rows = data.get("forgotten", []) if isinstance(data, dict) else []
    out = []
    for row in rows:
        try:
            out.append(Tombstone(str(row["fact"]), str(row["key"]), str(row.get("section", "")),
                                 float(row["at"]), str(row.get("by", ""))))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def dump(stones: Sequence[Tombstone]) -> str:
    body: dict[str, Any] = {"schema": SCHEMA, "forgotten": [asdict(t) for t in stones]}
    return json.dumps(body, ensure_ascii=False, indent=1) + "\n"


def without(memory: str, gone: Sequence[Fact]) -> str:
    """MEMORY.md without the lines of `gone` (headings stay: the layout is the model's)."""
    drop = {f.line for f in gone}
    lines = [line for line in memory.splitlines() if line.strip() not in drop]
    text = "\n".join(lines).strip()
    return text + "\n" if text else ""


def forget(memory: str, stones: Sequence[Tombstone], chosen: Sequence[Fact], by: str = "",
           now: float | None = None) -> tuple[str, list[Tombstone]]:
    """MEMORY.md without `chosen`, and the tombstones with one for each (replacing any of the same fact)."""
    now = time.time() if now is None else now
    kept = [t for t in stones if t.key not in {f.key for f in chosen}]
    kept += [Tombstone(f.text, f.key, f.section, now, by) for f in chosen]
    return without(memory, chosen), kept


def request_note(stones: Sequence[Tombstone]) -> str:
    """What a consolidation request adds about forgotten facts ('' when there are none)."""
    stones = sorted(stones, key=lambda t: -t.at)[:NOTE_FACTS]
    if not stones:
        return ""
    when = lambda t: datetime.fromtimestamp(t.at, timezone.utc).strftime(STAMP)  # noqa: E731
    lines = "\n".join(f"forgotten {when(t)}: {json.dumps(t.fact, ensure_ascii=False)}" for t in stones)
    return ("\nThese facts were forgotten at the users' request. Do not re-add them from the excerpt's older "
            "messages; only a message dated after the forgetting that states one again may bring it back, in "
            "your own words. This notice is not memory: never copy it, or any line of it, into memory_update or "
            f"history_entry.\n{lines}")


def enforce(stones: Sequence[Tombstone], old_memory: str, new_memory: str,
            chunk: Sequence[tuple[int, Any]]) -> tuple[str, list[Tombstone]]:
    """`new_memory` without the tombstoned facts a round re-added from old messages, and the tombstones left:
    those of facts stated again after their forgetting (or already back before the round) are lifted."""
    if not stones:
        return new_memory, list(stones)
    before = {f.key for f in facts(old_memory)}
    lifted: set[int] = set()
    dropped: list[Fact] = []
    marked: dict[str, str] = {}  # a line the note's form marks -> the fact without the marks (if it stays)
    for fact in facts(new_memory):
        text = unnoticed(fact.text)
        if text != fact.text:
            marked[fact.line] = fact.line.replace(fact.text, text) if text else ""
        hit = next((i for i, t in enumerate(stones) if t.covers(text)), None)
        if hit is None:
            continue
        stone = stones[hit]
        newer = message_candidates((pos, m) for pos, m in chunk if m.ts > stone.at)
        if fact_key(text) in before or best_matches(stone.fact, newer) or best_matches(text, newer):
            lifted.add(hit)
        else:
            dropped.append(fact)
    left = [t for i, t in enumerate(stones) if i not in lifted]
    kept = without(new_memory, dropped) if dropped else new_memory
    return (_unmarked(kept, marked) if marked else kept), left


def _unmarked(memory: str, marked: dict[str, str]) -> str:
    """MEMORY.md with each marked line written without the note's marks (dropped where nothing is left)."""
    lines = [marked.get(line.strip(), line) for line in memory.splitlines()]
    text = "\n".join(line for line in lines if line.strip()).strip()
    return text + "\n" if text else ""


def clean_entry(stones: Sequence[Tombstone], entry: str) -> str:
    """A round's history entry without the lines that copy the note about a forgotten fact."""
    if not stones or not NOTICE.search(entry):
        return entry
    lines = [line for line in entry.splitlines()
             if not (NOTICE.search(line) and any(t.covers(unnoticed(line.lstrip(" -*"))) for t in stones))]
    return "\n".join(lines).strip() or "(this summary named only facts forgotten on request)"


def forget_member(stones: Sequence[Tombstone], member_id: str, names: Sequence[str] = ()) -> list[Tombstone]:
    """/forget me: the tombstones left once those of a member's section or made by them are dropped."""
    folded = {n.casefold() for n in names if n}
    return [t for t in stones if t.by != member_id and t.section.casefold() not in folded]
