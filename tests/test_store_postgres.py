"""The PostgreSQL backend on a real server: the schema's migrations, bad settings, and a chat's keeping."""

import asyncio

import psycopg
import pytest

from memory.keys import ChatKey
from memory.session import Message
from store.base import Entry
from store.errors import SchemaTooNew, StorageUnavailable, StoreSetupError
from store.postgres import migrations
from store.postgres.chats import PgChats
from store.postgres.pool import Database

KEY = ChatKey("telegram", "42")


@pytest.fixture
async def db(pg_url):
    database = Database(pg_url)
    await database.open()
    await migrations.require_current(database)
    yield database
    await database.close()


async def test_two_processes_starting_together_apply_each_migration_once(pg_url):
    """Migrations run under an advisory lock: two upgrades at once apply each migration exactly once."""
    a, b = Database(pg_url), Database(pg_url)
    await a.open()
    await b.open()
    try:
        done = await asyncio.gather(migrations.upgrade(a), migrations.upgrade(b))
        applied = [m.version for m in done[0] + done[1]]
        assert sorted(applied) == [m.version for m in migrations.known()]
        state = await migrations.status(a)
        assert state.current == state.latest and not state.pending
    finally:
        await a.close()
        await b.close()


async def test_a_database_of_a_newer_schema_is_refused_and_left_alone(db, pg_url):
    """A schema version this Tusk does not know stops it with a clear message; nothing is altered."""
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO tusk_schema (version, name) VALUES (9999, 'from_the_future')")
        await conn.execute("CREATE TABLE marker (x int)")
    with pytest.raises(SchemaTooNew, match="newer than this Tusk knows"):
        await migrations.require_current(db)
    async with db.connection() as conn:
        assert (await (await conn.execute("SELECT max(version) FROM tusk_schema")).fetchone())[0] == 9999
        await conn.execute("SELECT * FROM marker")


async def test_a_refused_password_is_one_line_naming_the_setting_without_the_password(pg_server):
    """A wrong password: StoreSetupError naming TUSK_DATABASE_URL; the password is never in the message."""
    url = pg_server.new_database()
    wrong = url.replace(pg_server.password, "not-the-password-123")
    with pytest.raises(StoreSetupError) as err:
        await Database(wrong).open()
    assert "TUSK_DATABASE_URL" in str(err.value) and "refused the login" in str(err.value)
    assert "not-the-password-123" not in str(err.value) and pg_server.password not in str(err.value)


async def test_a_missing_database_and_a_dead_server_are_told_apart(pg_server):
    """No such database: a setup error to fix; nothing listening: the database does not answer."""
    url = pg_server.url("no_such_db")
    with pytest.raises(StoreSetupError, match="does not exist"):
        await Database(url).open()
    with pytest.raises(StorageUnavailable, match="does not answer"):
        await Database("postgresql://tusk:pw@127.0.0.1:1/tusk").open()


def test_a_url_of_another_scheme_or_without_a_database_is_refused():
    """Only postgresql:// URLs naming a database are taken."""
    with pytest.raises(StoreSetupError, match="must start with postgresql://"):
        Database("mysql://u:p@h/db")
    with pytest.raises(StoreSetupError, match="names no database"):
        Database("postgresql://u:secret@h:5432/")


async def test_forget_deletes_every_row_of_the_chat_and_no_other(db):
    """Erasing a chat deletes its rows in every table (cascade), and leaves other chats alone."""
    chats = PgChats(db)
    other = ChatKey("telegram", "43")
    for key in (KEY, other):
        chat = await chats.open(key)
        await chats.append(chat, [Message("user", f"secret of {key.chat_id}")])
        handle = chats.handle(key)
        await handle.write_memory("- one\n")
        await handle.write_memory("- two\n")
        await handle.append_history(Entry(1.0, "entry"))
        await handle.put_doc("settings.json", "{}")

        async def data():
            yield b"x" * 300_000

        await handle.keep_media("a.pdf", data(), 1_000_000)
    assert await chats.erase(KEY)
    async with db.connection() as conn:
        for table in ("session_lines", "memory_versions", "history", "chat_docs", "media", "media_chunks"):
            rows = await (await conn.execute(f"SELECT count(*) FROM {table} t JOIN chats c ON c.id = t.chat"
                                             " WHERE c.chat_id = '42'")).fetchone()
            orphans = await (await conn.execute(f"SELECT count(*) FROM {table} t"
                                                " WHERE NOT EXISTS (SELECT 1 FROM chats c WHERE c.id = t.chat)")).fetchone()
            kept = await (await conn.execute(f"SELECT count(*) FROM {table}")).fetchone()
            assert rows[0] == 0 and orphans[0] == 0 and kept[0] > 0, table
    assert not await chats.handle(KEY).exists()


async def test_the_database_restarting_is_storage_unavailable_then_works_again(db, pg_server):
    """While the server is down a read is StorageUnavailable; once it is back the same pool works."""
    chats = PgChats(db)
    await chats.append(await chats.open(KEY), [Message("user", "before")])
    pg_server.stop()
    try:
        with pytest.raises(StorageUnavailable):
            await PgChats(db).open(KEY)
    finally:
        pg_server.start()
    for _ in range(50):  # the pool reconnects on its own; each failed try is one more StorageUnavailable
        try:
            chat = await PgChats(db).open(KEY)
            break
        except StorageUnavailable:
            await asyncio.sleep(0.1)
    assert [m.content for m in chat.session.unconsolidated] == ["before"]


async def test_the_role_tusk_connects_as_is_no_superuser(db):
    """The tests run Tusk as an unprivileged role: migrations need no superuser."""
    async with db.connection() as conn:
        row = await (await conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).fetchone()
    assert row == (False,)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        async with db.connection() as conn:
            await conn.execute("CREATE ROLE intruder")
