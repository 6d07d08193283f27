"""Where the operator's commands record the model calls they make themselves (`tusk doctor`'s probe of the
model, the phrase its speech check speaks): the usage ledger of the store the settings name, the one a
running Tusk records its calls in.

    with own_calls.ledger(settings) as ledger:   # None: nowhere to record, and nothing is made to
        ...

Files: usage.sqlite, where the data dir exists (the doctor creates no data dir). PostgreSQL
(TUSK_DATABASE_URL): the database's ledger; when the database cannot be used the calls are not recorded
(the checks that read the database say why), and the command goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from bot.usage.ledger_sql import SqlLedger


@contextlib.contextmanager
def ledger(settings: Any) -> Iterator[SqlLedger | None]:
    """The settings' ledger for a command's own calls, closed after (None: none to record in)."""
    url = settings.store_url()
    if url is None:
        if not settings.home.is_dir():
            yield None
            return
        from bot.usage.ledger import Ledger

        book = Ledger(settings.home)
        try:
            yield book
        finally:
            book.close()
        return
    from bot import stores
    from store import prepared
    from store.errors import StoreError

    with contextlib.ExitStack() as stack:
        try:
            store = stack.enter_context(prepared(settings.home, url))
        except StoreError:
            store = None
        yield stores.ledger(store) if store is not None else None
