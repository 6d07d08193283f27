"""The schedule store on both backends (reminders.json: bot/schedules/store.py; the database's `schedules`:
bot/schedules/store_pg.py): what is kept comes back, a run is claimed once, outcomes wait for a flush, /forget
without a running Tusk removes a chat's schedules."""

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from bot.events import ChatKey
from bot.schedules import rules
from bot.schedules.model import Run, Schedule
from bot.schedules.store import FILE, FileStore, SavedSchedules
from bot.schedules.store_pg import PgSavedSchedules, PgScheduleStore
from memory import chat_settings

ZONE = chat_settings.zone("Europe/Berlin")
START = datetime(2026, 3, 23, 7, 0, tzinfo=ZONE)


def daily(sid: str, chat: str = "42", due: datetime | None = None) -> Schedule:
    rule = rules.parse("every day at 08:00", ZONE, START)
    return Schedule(sid, ChatKey("telegram", chat), "instruction", f"brief {sid}", ZONE,
                    due or datetime(2026, 3, 23, 8, 0, tzinfo=ZONE), START, rule, set_by_id="7", set_by_name="Ann")


def reminder(sid: str, chat: str = "42") -> Schedule:
    return Schedule(sid, ChatKey("telegram", chat), "reminder", "call Bob", ZONE,
                    datetime(2026, 3, 23, 9, 30, tzinfo=ZONE), START)


@pytest.fixture(params=["files", "postgres"])
def backend(request, tmp_path):
    """`make()`: a new process's schedule store on one storage; `saved()`: the holder `tusk forget` uses."""
    db = request.getfixturevalue("shared_db") if request.param == "postgres" else None

    class Backend:
        kind = request.param

        @staticmethod
        def make():
            return FileStore(tmp_path / FILE) if db is None else PgScheduleStore(db)

        @staticmethod
        def saved():
            return SavedSchedules(tmp_path) if db is None else PgSavedSchedules(db)

    return Backend


def test_what_is_kept_comes_back_in_the_order_it_was_added(backend):
    """Added, updated and removed schedules read back by a new store as they were left, in the order added."""
    store = backend.make()
    a, b, c = daily("s1"), reminder("r2"), daily("s3", chat="43")
    for s in (a, b, c):
        store.add(s)
    paused = replace(a, paused=True)
    store.update(paused)
    store.remove("r2")
    assert backend.make().load() == [paused, c]


def test_a_run_is_claimed_by_one_process_only(backend):
    """Two stores (two processes) claim the same run: the first wins, the second is told no and writes nothing."""
    if backend.kind == "files":
        pytest.skip("one Tusk per home on files (its lock): the file's claim is checked in that one process")
    backend.make().add(daily("s1"))
    first, second = backend.make(), backend.make()
    first.load(), second.load()
    due = datetime(2026, 3, 23, 8, 0, tzinfo=ZONE)
    now = due.astimezone(timezone.utc)
    mine = daily("s1", due=due + timedelta(days=1)).with_run(Run(due, now, "fired"))
    theirs = daily("s1", due=due + timedelta(days=1)).with_run(Run(due, now, "fired", why="second"))
    assert first.claim(mine, due) is True
    assert second.claim(theirs, due) is False
    assert backend.make().load() == [mine]


def test_the_same_instant_in_another_zone_claims_it(backend):
    """The due read is compared as an instant: the same time written in UTC claims the run."""
    store = backend.make()
    store.add(daily("s1"))
    store.load()
    due = datetime(2026, 3, 23, 8, 0, tzinfo=ZONE)
    assert store.claim(daily("s1", due=due + timedelta(days=1)), due.astimezone(timezone.utc)) is True


def test_outcomes_left_for_later_are_written_at_the_flush(backend):
    """record_run(soon=True) is kept until flush, then written (with a run recorded at once meanwhile)."""
    store = backend.make()
    store.add(daily("s1"))
    due = datetime(2026, 3, 23, 8, 0, tzinfo=ZONE)
    store.record_run("s1", Run(due, due, "delivered"), soon=True)
    if backend.kind == "postgres":  # the file's writes of this process show only at its next write too
        assert backend.make().load()[0].runs == ()
    store.flush()
    assert [r.status for r in backend.make().load()[0].runs] == ["delivered"]


def test_a_batch_is_kept_whole(backend):
    """Claims and changes made in one batch are all kept once it ends."""
    store = backend.make()
    store.add(daily("s1"))
    store.add(daily("s2"))
    store.load()
    due = datetime(2026, 3, 23, 8, 0, tzinfo=ZONE)
    with store.batch():
        assert store.claim(daily("s1", due=due + timedelta(days=1)), due)
        assert store.claim(daily("s2", due=due + timedelta(days=1)), due)
    assert [s.due for s in backend.make().load()] == [due + timedelta(days=1)] * 2


def test_forget_without_a_running_tusk_removes_only_that_chats_schedules(backend):
    """`tusk forget`'s holder lists the chat's schedules and deletes them; another chat's stay."""
    store = backend.make()
    for s in (daily("s1"), reminder("r2"), daily("s3", chat="43")):
        store.add(s)
    [owned] = backend.saved().owned(ChatKey("telegram", "42"))
    assert owned.label.startswith("2 reminders and schedules (removed from ")
    owned.delete()
    assert [s.id for s in backend.make().load()] == ["s3"]
    assert backend.saved().owned(ChatKey("telegram", "42")) == []
