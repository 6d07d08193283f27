"""Which backend keeps bot/'s shared parts: the files under $TUSK_HOME, or the database of TUSK_DATABASE_URL.

    ledger(store)          the usage ledger: usage.sqlite (bot/usage/ledger.py) or `usage_calls` (ledger_pg.py)
    budgets(store)         budgets.json: a file, or a row of `shared_docs`
    inbox(store)           the inbox journal: inbox.jsonl (bot/inbox.py) or `inbox` (bot/inbox_pg.py)
    inbox_members(...)     /forget me: a member's messages in that journal
    seen(store)            the platform ids taken already: seen.sqlite (bot/dedupe.py) or `seen`
    schedules(store)       reminders and schedules: reminders.json (bot/schedules/store.py) or `schedules`
    saved_schedules(store) the same for /forget without a running Tusk (`tusk forget`)

bot/app.py builds one `Store` (store/) and asks here for each part, and so do the commands of the operator's
side (`tusk usage`, `tusk budget`, `tusk forget`, the doctor); without TUSK_DATABASE_URL every part is the
file it always was. The database's parts need its schema current (`Store.start` or `Store.prepare`) before
their first call; none of them touches the database when it is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from store import Store
from store.shared import SharedDoc

if TYPE_CHECKING:
    from bot.commands.erasure import InboxMembers
    from bot.dedupe import Seen
    from bot.inbox import Inbox
    from bot.inbox_pg import PgInbox, PgInboxMembers
    from bot.schedules.store import ScheduleStore
    from bot.usage.ledger_sql import SqlLedger


def ledger(store: Store) -> SqlLedger:
    if store.kind == "postgres":
        from bot.usage.ledger_pg import PgLedger

        return PgLedger(store.sync_db)
    from bot.usage.ledger import Ledger

    return Ledger(store.home)


def budgets(store: Store) -> SharedDoc:
    from bot.usage.limits import BUDGETS

    return store.doc(BUDGETS)


def inbox(store: Store) -> Inbox | PgInbox:
    if store.kind == "postgres":
        from bot.inbox_pg import PgInbox

        return PgInbox(store.sync_db)
    from bot.inbox import Inbox

    return Inbox(store.home / "inbox.jsonl")


def inbox_members(journal: Any) -> InboxMembers | PgInboxMembers:
    """/forget me and /forget @name: a member's messages in `journal` (what `inbox` made)."""
    if hasattr(journal, "members"):
        return journal.members()
    from bot.commands.erasure import InboxMembers

    return InboxMembers(journal.path)


def seen(store: Store) -> Seen:
    if store.kind == "postgres":
        from store.postgres.seen import PgSeen

        return PgSeen(store.sync_db)
    from bot.dedupe import SeenStore

    return SeenStore(store.home)


def schedules(store: Store) -> ScheduleStore:
    if store.kind == "postgres":
        from bot.schedules.store_pg import PgScheduleStore

        return PgScheduleStore(store.sync_db)
    from bot.schedules.store import FILE, FileStore

    return FileStore(store.home / FILE)


def saved_schedules(store: Store) -> Any:
    """A holder for /forget (`owned(key)`) of the schedules kept, without a running Tusk."""
    if store.kind == "postgres":
        from bot.schedules.store_pg import PgSavedSchedules

        return PgSavedSchedules(store.sync_db)
    from bot.schedules.store import SavedSchedules

    return SavedSchedules(store.home)
