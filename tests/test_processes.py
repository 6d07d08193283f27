"""The `processes` rows of a cluster (bot/cluster/processes.py) on a real PostgreSQL: written at start, kept
alive by a heartbeat, deleted at stop; a dead process's row goes stale, then is pruned."""

import asyncio
import logging
import os
import signal
import socket
import sys
import time

import pytest

from bot.cluster.processes import Processes, listing
from bot.version import installed
from store.errors import StorageUnavailable
from store.postgres import migrations
from store.postgres.pool import Database
from tests import procs


@pytest.fixture
async def db(pg_url):
    database = Database(pg_url)
    await database.open()
    await migrations.require_current(database)
    yield database
    await database.close()


async def until(check, timeout=30.0):
    """Poll `check()` (async) until it returns something true; that value (fails after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        if found := await check():
            return found
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.05)


async def test_start_writes_the_row_and_stop_deletes_it(db):
    """start() registers role, host, pid, version, url and turns in flight; stop() removes the row."""
    async with Processes(db, "ingress", in_flight=lambda: 2, url="http://10.0.0.5:8765", beat_every=60) as me:
        [row] = await listing(db)
        assert (row.id, row.role, row.host, row.pid, row.version, row.url, row.in_flight) == (
            me.id, "ingress", socket.gethostname(), os.getpid(), installed(), "http://10.0.0.5:8765", 2)
        assert row.age < 60 and not row.stale and row.beat_every == 60
    assert await listing(db) == []


async def test_the_heartbeat_task_reports_turns_in_flight(db):
    """The beat task updates the row's turns in flight and heartbeat without being asked."""
    running = [0]
    async with Processes(db, "worker", in_flight=lambda: running[0], beat_every=0.05):
        [first] = await listing(db)
        running[0] = 3
        [later] = await until(lambda: _rows_where(db, lambda r: r.in_flight == 3))
        assert later.id == first.id and later.started == first.started and later.url is None


async def _rows_where(db, test):
    rows = await listing(db)
    return rows if rows and all(test(r) for r in rows) else None


CHILD = """
import asyncio, sys
from bot.cluster.processes import Processes
from store.postgres.pool import Database

async def main():
    db = Database(sys.argv[1])
    await db.open()
    me = Processes(db, "worker", in_flight=lambda: 1, url="http://127.0.0.1:1", beat_every=0.1)
    await me.start()
    print(me.id, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


async def test_a_killed_process_leaves_a_stale_row_which_a_live_one_prunes(db, pg_url):
    """kill -9: the row stays and goes stale (three beats without one); a live process's beat deletes it
    once its heartbeat is older than prune_after, and keeps its own and a fresh stale one."""
    child = await procs.start(sys.executable, "-c", CHILD, pg_url, env=procs.clean_env(),
                              stdout=asyncio.subprocess.PIPE)
    dead_id = int(await asyncio.wait_for(child.stdout.readline(), timeout=60))
    os.kill(child.pid, signal.SIGKILL)
    await child.wait()
    [dead] = await until(lambda: _rows_where(db, lambda r: r.stale))
    assert dead.id == dead_id and dead.pid == child.pid and dead.in_flight == 1

    me = Processes(db, "ingress", in_flight=lambda: 0, beat_every=60, prune_after=600)
    await me.start()
    try:
        await me.beat()  # the dead row is stale but not yet 600 s old: kept
        assert {r.id for r in await listing(db)} == {dead_id, me.id}
        async with db.transaction() as conn:
            await conn.execute("UPDATE processes SET heartbeat = heartbeat - interval '11 minutes' WHERE id = %s",
                               (dead_id,))
        await me.beat()
        [mine] = await listing(db)
        assert mine.id == me.id and not mine.stale
    finally:
        await me.stop()


async def test_a_process_whose_row_was_pruned_writes_it_again(db):
    """A process paused past pruning (its row deleted) is listed again at its next beat, same start time."""
    async with Processes(db, "all", in_flight=lambda: 0, beat_every=60) as me:
        [before] = await listing(db)
        async with db.transaction() as conn:
            await conn.execute("DELETE FROM processes")
        await me.beat()
        [after] = await listing(db)
        assert after.id == me.id != before.id and after.started == before.started and after.role == "all"


async def test_the_heartbeat_survives_a_database_restart(db, pg_server, caplog):
    """While the database is down beats fail (logged once) and the process goes on; once it is back, the
    next beat writes the row again."""
    running = [0]
    async with Processes(db, "worker", in_flight=lambda: running[0], beat_every=0.05):
        pg_server.stop()
        try:
            with pytest.raises(StorageUnavailable):
                await listing(db)
            await until(lambda: _logged(caplog, "heartbeat failed"))
        finally:
            pg_server.start()
        running[0] = 5
        [row] = await until(lambda: _rows_where(db, lambda r: r.in_flight == 5))
        assert row.role == "worker"
    assert len([r for r in caplog.records if "heartbeat failed" in r.getMessage()]) == 1


async def _logged(caplog, text):
    return any(text in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_beat_every_must_be_positive():
    """A zero or negative beat is refused at once with its value."""
    with pytest.raises(ValueError, match="beat_every must be positive, not 0"):
        Processes(None, "worker", in_flight=lambda: 0, beat_every=0)
