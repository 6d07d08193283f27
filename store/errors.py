"""The store's exceptions; `bot/` translates them at its boundaries (a turn, an HTTP request, the CLI).

    StoreError
    ├── StorageUnavailable   the database cannot be reached now (down, restarting, network): try again later
    ├── StaleWrite           a compare-and-set lost: another writer moved the chat on first; nothing was written
    └── StoreSetupError      the store cannot be used as configured (bad URL, refused login, missing
        │                    database, no permission); the message names TUSK_DATABASE_URL, never its password
        └── SchemaTooNew     the database was upgraded by a newer Tusk: it is refused, never altered

`RETRIED` is set while whoever asked for the work runs it again when the storage is back (a cluster worker's
turn, bot/cluster/worker.py): the work then lets StorageUnavailable through instead of answering it.
"""

from __future__ import annotations

import contextvars

RETRIED: contextvars.ContextVar[bool] = contextvars.ContextVar("tusk_retried_when_storage_is_back", default=False)


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class StorageUnavailable(StoreError):
    """The storage cannot be reached right now; the operation did nothing and may be tried again."""


class StaleWrite(StoreError):
    """A compare-and-set write found newer state than the writer had read; nothing was written."""


class StoreSetupError(StoreError):
    """The store cannot be used as configured: the message says what to fix."""


class SchemaTooNew(StoreSetupError):
    """The database's schema is newer than this Tusk knows."""
