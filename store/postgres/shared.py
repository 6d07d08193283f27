"""The shared documents (store/shared.py) as rows of `shared_docs` (name, body, version): a read is one indexed
query; an update holds the row's lock (SELECT ... FOR UPDATE) from reading to writing, so two processes never
lose each other's change."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from store.postgres.pool import SyncDatabase
from store.shared import NAMES, Box


class PgDoc:
    def __init__(self, db: SyncDatabase, name: str) -> None:
        if name not in NAMES:
            raise ValueError(f"{name!r} is not a shared document")
        self.db, self.name = db, name
        self.where = f"the database ({name})"

    def read(self) -> str | None:
        with self.db.connection() as conn:
            row = conn.execute("SELECT body FROM shared_docs WHERE name = %s", (self.name,)).fetchone()
        return row[0] if row else None

    @contextlib.contextmanager
    def updating(self) -> Iterator[Box]:
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO shared_docs (name, body) VALUES (%s, NULL) ON CONFLICT (name) DO NOTHING",
                         (self.name,))
            row = conn.execute("SELECT body FROM shared_docs WHERE name = %s FOR UPDATE", (self.name,)).fetchone()
            box = Box(row[0] if row else None)
            yield box
            conn.execute("UPDATE shared_docs SET body = %s, version = version + 1 WHERE name = %s",
                         (box.text, self.name))
