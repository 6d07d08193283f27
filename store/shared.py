"""What is shared by every chat, kept as small documents read and written whole: `pairing.json`,
`api-keys.json`, `models.json`, `budgets.json`, `backup-status.json`. Each component keeps its own format
(bot/access/pairing.py, ...); the store keeps the text.

    doc = store.doc("pairing.json")
    doc.read()                  # its text now (None: there is none); cheap enough to call per message
    with doc.updating() as box: # read-modify-write, exclusive across processes: box.text in, set box.text
        box.text = change(box.text)
    doc.where                   # what to name in a message: a path, or the database

Files: a file under $TUSK_HOME (0600, replaced atomically, its writers holding `<name>.lock`); the database:
a row of `shared_docs`, its writers holding the row's lock. Callers are synchronous and each call is short.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

NAMES = ("pairing.json", "api-keys.json", "models.json", "budgets.json", "backup-status.json")


@dataclass
class Box:
    """A document being updated: `text` as it was (None: none); set it to the new text (None: delete)."""

    text: str | None


class SharedDoc(Protocol):
    name: str
    where: str

    def read(self) -> str | None: ...

    def updating(self) -> contextlib.AbstractContextManager[Box]: ...


def write(doc: SharedDoc, text: str | None) -> None:
    """Replace the document whole (None: delete it)."""
    with doc.updating() as box:
        box.text = text


__all__ = ["NAMES", "Box", "Iterator", "SharedDoc", "write"]
