"""Open items: dated things a chat said will happen or someone will do, kept in MEMORY.md for check-ins.

In a chat with check-ins on (/checkins on), consolidation is asked (`INSTRUCTIONS`) to keep a section

    ## Open items
    - 2026-05-08: Ann's job interview
    - 2026-05-12: Bob returns the drill

at the end of MEMORY.md. Each line is a fact like any other: shown by /memory, forgotten with
/memory forget (and kept out by its tombstone), edited in the console. `items(memory)` reads the section
back (any heading level, "Open items" in any case; a date then `:` or a dash, then the text); lines
that do not start with an ISO date are left alone. The model's text-format answer carries the section
inside its MEMORY part, so it is read the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from memory.provenance import words

HEADING = "Open items"
INSTRUCTIONS = f"""
This chat wants check-ins: keep a `## {HEADING}` section at the end of memory_update, one line per dated thing \
someone here said will happen or they will do (an appointment, an interview, a deadline, a promise), written \
`- YYYY-MM-DD: what (who)` with the absolute date it happens. Keep the items already listed unless the \
excerpt says they are settled or cancelled; drop items more than a week past. No item without a date."""

_SECTION = re.compile(r"^#{1,6}\s*open items\s*:?\s*$", re.IGNORECASE)
_ITEM = re.compile(r"^\s*[-*+]\s*(\d{4}-\d{2}-\d{2})\s*(?::|—|–|-)\s*(.+?)\s*$")
SAME_ITEM = 0.5  # word overlap (Jaccard) at which two items of the same date are the same one reworded


@dataclass(frozen=True, slots=True)
class OpenItem:
    date: date
    text: str

    @property
    def line(self) -> str:
        """"2026-05-08: Ann's job interview": how a check-in names it."""
        return f"{self.date.isoformat()}: {self.text}"


def items(memory: str) -> list[OpenItem]:
    """The dated items of MEMORY.md's open-items section, in order."""
    found: list[OpenItem] = []
    inside = False
    for line in memory.splitlines():
        if line.lstrip().startswith("#"):
            inside = bool(_SECTION.match(line.strip()))
            continue
        if inside and (match := _ITEM.match(line)):
            try:
                found.append(OpenItem(date.fromisoformat(match[1]), match[2]))
            except ValueError:
                continue  # 2026-02-30: not a date
    return found


def same(a: str, b: str) -> bool:
    """Two item lines ("date: text") for the same thing: the same date, and most of the words alike."""
    date_a, _, text_a = a.partition(":")
    date_b, _, text_b = b.partition(":")
    if date_a.strip() != date_b.strip():
        return False
    wa, wb = set(words(text_a)), set(words(text_b))
    if not wa or not wb:
        return text_a.strip().casefold() == text_b.strip().casefold()
    return len(wa & wb) / len(wa | wb) >= SAME_ITEM
