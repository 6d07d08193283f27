"""PostgreSQL going away under a running Tusk: a turn the database failed mid-way is run again once it is back
(its request gets the model's answer, not an error), and the synchronous pool stops holding its callers for
long once it knows the database is down (store/postgres/pool.py)."""

import asyncio
import logging

import psycopg
import pytest

from store.errors import StorageUnavailable
from store.postgres import pool
from tests.conftest import running
from tests.fakes.fake_llm import Reply
from tests.fakes.loopback import wait_until


async def test_a_turn_the_database_failed_is_run_again_once_it_is_back(make_settings, pg_url, pg_server, fake_llm,
                                                                       monkeypatch, caplog):
    """One Tusk on PostgreSQL (its turns go through the queue): the database stops while the model answers, so
    the turn cannot be saved; once the database is back the turn runs again and the request that waited gets
    that answer, stored once, not "my storage is unavailable"."""
    monkeypatch.setattr(pool, "WAIT", 1.0)  # the save gives up while the database is down (it waits 10 s)
    caplog.set_level(logging.INFO, logger="procrastinate")
    async with running(make_settings(TUSK_DATABASE_URL=pg_url)) as tusk:
        (first,) = await tusk.say("o", "hello")
        assert first.endswith("hello"), first
        fake_llm.script(Reply(text="the first try", delay=2), Reply(text="the second try"))
        asked = asyncio.create_task(tusk.say("o", "what now?"))
        await fake_llm.wait_for_requests(2, timeout=30)  # (the first turn's, then this one's)
        await asyncio.to_thread(pg_server.stop)  # the model's answer comes while it is down
        try:  # until the queue's worker has seen the turn fail, to be run again
            await wait_until(lambda: any(getattr(r, "action", "") == "job_error_retry" for r in caplog.records), 60)
        finally:
            await asyncio.to_thread(pg_server.start)
        assert await asyncio.wait_for(asked, 120) == ["the second try"]
    with psycopg.connect(pg_url) as conn:
        users = conn.execute("SELECT count(*) FROM session_lines WHERE line::jsonb->>'content' = 'what now?'"
                             ).fetchone()[0]
    assert users == 1


def test_the_shared_pool_knows_when_the_database_is_down_and_back(pg_url, pg_server, monkeypatch):
    """A synchronous caller holds the event loop: once a new connection failed, the pool says the database is
    down (callers then wait WAIT_WHILE_DOWN for a connection, not WAIT), and says it no more once one is made."""
    monkeypatch.setattr(pool, "WAIT", 2.0)  # (the first caller after the fall still waits WAIT)
    db = pool.SyncDatabase(pg_url)
    try:
        with db.connection() as conn:
            conn.execute("SELECT 1")
        assert not db.down
        pg_server.stop()
        try:
            for _ in range(2):
                with pytest.raises(StorageUnavailable), db.connection() as conn:
                    conn.execute("SELECT 1")
            assert db.down
        finally:
            pg_server.start()
        with db.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert not db.down
    finally:
        db.close()
