"""`tusk status` as a user runs it: the processes registered on a real PostgreSQL, or the home's Tusk on files."""

import asyncio
import json
import os
import signal

from bot.cluster.processes import Processes
from store.postgres import migrations
from store.postgres.pool import Database
from tests import procs
from tests.test_cli import env_for


def status_env(tmp_path, **extra):
    return procs.clean_env(TUSK_HOME=tmp_path / "data", **extra)


async def test_files_with_nothing_running_say_so(tmp_path):
    """On files with no Tusk on the home: one line naming the home, exit 0; --json says running false."""
    code, out, err = await procs.tusk("status", env=status_env(tmp_path))
    assert (code, err) == (0, "") and out.strip() == f"No Tusk is running on this home ({tmp_path / 'data'})."
    code, out, _ = await procs.tusk("status", "--json", env=status_env(tmp_path))
    assert code == 0 and json.loads(out) == {"store": "files", "home": str(tmp_path / "data"), "running": False,
                                             "pid": None, "command": None, "url": None}


async def test_files_name_the_running_tusk_its_pid_and_address(fake_llm, tmp_path):
    """With `tusk run` on the home, status names its pid and where its HTTP API answers; once it stopped,
    nothing runs again."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    proc = await procs.start_tusk("run", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout=90)).decode()
    assert "Tusk is running" in line, line
    code, out, err = await procs.tusk("status", "--json", env=env)
    seen = json.loads(out)
    assert code == 0 and seen["running"] is True and seen["pid"] == proc.pid and seen["command"] == "tusk run", err
    assert seen["url"].startswith("http://127.0.0.1:") and seen["url"].split(":")[-1] in line
    code, out, _ = await procs.tusk("status", env=env)
    assert code == 0 and out.strip() == (f"A Tusk is running on this home ({tmp_path / 'data'}): `tusk run`, "
                                         f"pid {proc.pid}, HTTP API on {seen['url']}.")
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), timeout=60) == 0
    code, out, _ = await procs.tusk("status", env=env)
    assert code == 0 and out.startswith("No Tusk is running on this home")


async def migrated_db(url):
    db = Database(url)
    await db.open()
    await migrations.require_current(db)
    return db


async def test_postgres_lists_each_process_and_marks_the_stale_one(pg_url, pg_server, tmp_path):
    """Each registered process is a line with its role, pid, version, heartbeat age, turns in flight and URL;
    only the one whose heartbeat is old is STALE; the password is never shown."""
    db = await migrated_db(pg_url)
    ingress = Processes(db, "ingress", in_flight=lambda: 0, url="http://10.0.0.7:8765", beat_every=60)
    worker = Processes(db, "worker", in_flight=lambda: 2, beat_every=60)
    gone = Processes(db, "worker", in_flight=lambda: 1, beat_every=5)
    try:
        for p in (ingress, worker, gone):
            await p.start()
        async with db.transaction() as conn:
            await conn.execute("UPDATE processes SET heartbeat = now() - interval '3 minutes', pid = 4242 "
                               "WHERE id = %s", (gone.id,))
        env = status_env(tmp_path, TUSK_DATABASE_URL=pg_url)
        code, out, err = await procs.tusk("status", env=env)
        assert (code, err) == (0, "") and pg_server.password not in out
        head, columns, *lines = out.splitlines()
        assert head.startswith("3 Tusk processes on PostgreSQL at postgresql://tusk:***@127.0.0.1:") and \
            "(1 stale" in head
        assert columns.split() == ["ROLE", "HOST", "PID", "VERSION", "HEARTBEAT", "IN", "FLIGHT", "URL"]
        me = str(os.getpid())
        [stale] = [line.split() for line in lines if line.split()[2] == "4242"]
        assert len(lines) == 3 and stale[0] == "worker" and stale[4:8] == ["3", "min", "ago", "1"] \
            and stale[-1] == "STALE"
        ours = sorted((line.split() for line in lines if line.split()[2] == me), key=lambda r: r[0])
        assert [r[0] for r in ours] == ["ingress", "worker"] and all(r[-1] != "STALE" for r in ours)
        assert ours[0][-1] == "http://10.0.0.7:8765" and ours[1][-1] == "-" and ours[1][-2] == "2"

        code, out, _ = await procs.tusk("status", "--json", env=env)
        seen = json.loads(out)
        assert code == 0 and seen["store"] == "postgres" and pg_server.password not in out
        by_id = {p["id"]: p for p in seen["processes"]}
        assert by_id[gone.id]["stale"] is True and by_id[gone.id]["heartbeat_age_seconds"] >= 180
        assert by_id[ingress.id]["url"] == "http://10.0.0.7:8765" and by_id[ingress.id]["stale"] is False
        assert by_id[worker.id]["in_flight"] == 2 and by_id[worker.id]["role"] == "worker"
    finally:
        for p in (ingress, worker, gone):
            await p.stop()
        await db.close()


async def test_postgres_with_nothing_registered_says_so(pg_url, pg_server, tmp_path):
    """A database no process is registered on: one line, exit 0, without the password."""
    db = await migrated_db(pg_url)
    await db.close()
    code, out, err = await procs.tusk("status", env=status_env(tmp_path, TUSK_DATABASE_URL=pg_url))
    assert (code, err) == (0, "") and out.startswith("No Tusk is running on PostgreSQL at postgresql://tusk:***@")
    assert pg_server.password not in out


async def test_postgres_status_never_migrates_an_old_schema(pg_url, pg_server, tmp_path):
    """On a database without the processes table, status says so and leaves the schema as it is."""
    code, out, err = await procs.tusk("status", env=status_env(tmp_path, TUSK_DATABASE_URL=pg_url))
    assert (code, err) == (0, "") and "predates the processes table" in out and "version 0" in out
    assert pg_server.sql("SELECT to_regclass('tusk_schema') IS NULL", pg_url.rsplit("/", 1)[1]) == "t"


async def test_postgres_down_or_refusing_is_one_line_and_exit_code(pg_server, tmp_path):
    """A refused password exits 2, a server that does not answer exits 1: one line each, no password."""
    wrong = pg_server.url("postgres", password="not-the-password")
    code, out, err = await procs.tusk("status", env=status_env(tmp_path, TUSK_DATABASE_URL=wrong))
    assert code == 2 and out == "" and "refused the login" in err and "not-the-password" not in err
    assert len(err.strip().splitlines()) == 1
    dead = f"postgresql://tusk:s3cret-pw@127.0.0.1:{_closed_port()}/tusk"
    code, out, err = await procs.tusk("status", env=status_env(tmp_path, TUSK_DATABASE_URL=dead))
    assert code == 1 and out == "" and "does not answer" in err and "s3cret-pw" not in err


def _closed_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: nothing listens there
