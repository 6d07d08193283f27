"""`tusk backup` and `tusk restore` across the stores: a files home moves onto PostgreSQL and back by a backup
and a restore (byte-identical chat files; the usage ledger, the seen platform ids and the messages waiting in
the inbox with them), and a database that holds anything is not restored over without --force (which keeps
what was there first)."""

import dataclasses
import sqlite3
import tarfile

from bot import dedupe, running
from bot.events import ChatKey, InboundMessage, Injected
from bot.inbox import Inbox
from bot.inbox_pg import PgInbox
from bot.schedules.store import FILE, FileStore
from bot.usage.ledger import Ledger
from bot.usage.ledger_pg import PgLedger
from store.files.chats import FileChats
from tests.test_backup import files_of
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli
from tests.test_schedule_store import daily, reminder
from tests.test_store_transfer import KEY, a_lived_in_chat, tree
from tests.test_usage_ledger import NOW, call, calls_of_a_month, figures


def members(archive) -> set[str]:
    with tarfile.open(archive) as tar:
        return {m.name for m in tar if m.isfile()}


async def test_a_files_home_moves_onto_postgresql_and_back_byte_for_byte(fake_llm, pg_url, tmp_path):
    """files -> backup -> restore into the database -> backup -> restore into files: the chat folder and the
    shared documents come back identical, the schedules still set, and the database's home keeps none of them."""
    home = tmp_path / "data"
    folder = await a_lived_in_chat(home)
    (home / "pairing.json").write_text('{"codes": {}, "approved": {"telegram": ["7"]}}')
    kept_schedules = FileStore(home / FILE)
    with kept_schedules.batch():
        kept_schedules.add(daily("s1"))
        kept_schedules.add(reminder("s2", chat="43"))
    env = env_for(fake_llm, tmp_path)
    first, second = tmp_path / "first.tar.gz", tmp_path / "second.tar.gz"
    assert (await tusk_cli("backup", str(first), env=env))[0] == 0

    on_db = {**env, "TUSK_HOME": str(tmp_path / "db-home"), "TUSK_DATABASE_URL": pg_url}
    code, out, err = await tusk_cli("restore", str(first), env=on_db)
    assert code == 0, err
    assert "and the database" in out
    assert not any((tmp_path / "db-home" / name).exists() for name in ("chats", "pairing.json", FILE))
    code, out, _ = await tusk_cli("chats", env=on_db)
    assert code == 0 and KEY.chat_id in out
    assert (await tusk_cli("backup", str(second), env=on_db))[0] == 0
    assert {m for m in members(second) if m.startswith("home/chats/")} == {m for m in members(first)
                                                                     if m.startswith("home/chats/")
                                                                     and not m.endswith(("search.sqlite",
                                                                                         "imports.sqlite"))}

    back, direct = tmp_path / "back", tmp_path / "direct"  # the archive straight into files, and through the database
    assert (await tusk_cli("restore", str(second), env={**env, "TUSK_HOME": str(back)}))[0] == 0
    assert (await tusk_cli("restore", str(first), env={**env, "TUSK_HOME": str(direct)}))[0] == 0
    assert tree(back / folder.relative_to(home)) == tree(direct / folder.relative_to(home))
    assert (back / "pairing.json").read_text() == (home / "pairing.json").read_text()
    assert [(s.id, s.key, s.text) for s in FileStore(back / FILE).load()] == [
        ("s1", daily("s1").key, "brief s1"), ("s2", reminder("s2", chat="43").key, "call Bob")]  # still set
    chat = await FileChats(back).open(KEY)
    assert chat.memory.text == "- Ana, likes green tea\n" and chat.session.last_consolidated == 2


async def test_a_database_with_chats_is_restored_over_only_with_force(fake_llm, pg_url, tmp_path):
    """Without --force nothing changes and the refusal names the database; with it, what the database held is
    first saved in an archive, and afterwards the database holds the archive's chats only."""
    home = tmp_path / "data"
    await a_lived_in_chat(home)
    env = env_for(fake_llm, tmp_path)
    archive = tmp_path / "b.tar.gz"
    assert (await tusk_cli("backup", str(archive), env=env))[0] == 0
    on_db = {**env, "TUSK_HOME": str(tmp_path / "db-home"), "TUSK_DATABASE_URL": pg_url}
    assert (await tusk_cli("restore", str(archive), env=on_db))[0] == 0

    other = tmp_path / "other"
    chats = FileChats(other)
    from memory.keys import ChatKey
    from memory.session import Message

    lone = ChatKey("slack", "C999")
    await chats.append(await chats.open(lone), [Message("user", "only here", ts=5.0)])
    small = tmp_path / "small.tar.gz"
    assert (await tusk_cli("backup", str(small), env={**env, "TUSK_HOME": str(other)}))[0] == 0

    code, _, err = await tusk_cli("restore", str(small), env=on_db)
    assert code == 1 and "(the database)" in err and "--force" in err
    code, out, _ = await tusk_cli("chats", env=on_db)
    assert KEY.chat_id in out and "C999" not in out

    code, out, err = await tusk_cli("restore", "--force", str(small), env=on_db)
    assert code == 0, err
    saved = next(tmp_path.glob("tusk-before-restore-*.tar.gz"))
    assert any(m.startswith("home/chats/telegram/") and m.endswith("session.jsonl") for m in members(saved)), members(saved)
    code, out, _ = await tusk_cli("chats", env=on_db)
    assert "C999" in out and KEY.chat_id not in out
    assert files_of(other)  # the source home itself is left as it was


def spent_aside(book) -> dict:
    """`figures` with each `Spent`'s upto_id left out: that is the id of the last call this process recorded
    (a ledger's own bookkeeping), not a figure of the calls."""
    return {k: (v.usd, v.unpriced_tokens) if type(v).__name__ == "Spent" else v for k, v in figures(book).items()}


def seen_rows(path) -> list[tuple[str, str, float]]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT platform, id, at FROM seen ORDER BY at").fetchall()
    finally:
        db.close()


def same_seen(a, b) -> bool:
    """The same ids in the same order, each taken at the same time (to the millisecond: a timestamptz keeps
    microseconds)."""
    return [(p, i) for p, i, _ in a] == [(p, i) for p, i, _ in b] and all(abs(x[2] - y[2]) < 1e-3
                                                                           for x, y in zip(a, b))


def salt_of(path) -> bytes:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT value FROM meta WHERE key = 'salt'").fetchone()[0]
    finally:
        db.close()


WAITING = (InboundMessage(ChatKey("telegram", "42"), "still waiting ü", "7", "Ann", is_group=True, ts=NOW),
           InboundMessage(ChatKey("discord", "9"), "[reminder r1] call Bob", "tusk",
                          injected=Injected("reminder", "A reminder is due: call Bob", "Reminder: call Bob")))


def as_sent(msg) -> tuple:
    """What a replayed message must still say (its id is new in each process)."""
    return tuple(v for k, v in dataclasses.asdict(msg).items() if k != "id")


async def test_a_move_carries_the_ledger_the_seen_ids_and_the_waiting_messages_both_ways(fake_llm, pg_url,
                                                                                         tmp_path):
    """files -> database -> files: every usage figure (erased chats' spend through their limit keys, so the salt
    too) is the same on each side, the platform ids taken are still taken with their times, and the messages
    waiting in the inbox (not the answered one) are there to be answered, as they were."""
    home = tmp_path / "data"
    book = Ledger(home)
    for c in calls_of_a_month(7):
        book.record(c)
    book.erase_chat("telegram", "c1")
    book.erase_person_everywhere("slack", "p2")
    before = spent_aside(book)
    book.close()
    seen = dedupe.SeenStore(home)
    for message_id in ("42:1001", "42:1002", "C1:17.5"):
        assert not seen.seen("telegram" if message_id.startswith("42") else "slack", message_id)
    seen.close()
    inbox = Inbox(home / "inbox.jsonl")
    answered = InboundMessage(ChatKey("telegram", "42"), "answered already", "7")
    for msg in (WAITING[0], answered, WAITING[1]):
        inbox.record(msg)
    inbox.done(answered)
    env = env_for(fake_llm, tmp_path)
    first, second = tmp_path / "first.tar.gz", tmp_path / "second.tar.gz"
    assert (await tusk_cli("backup", str(first), env=env))[0] == 0

    db_home = tmp_path / "db-home"
    on_db = {**env, "TUSK_HOME": str(db_home), "TUSK_DATABASE_URL": pg_url}
    code, _, err = await tusk_cli("restore", str(first), env=on_db)
    assert code == 0, err
    assert not any((db_home / name).exists() for name in ("usage.sqlite", "seen.sqlite", "inbox.jsonl"))
    from store.postgres.pool import SyncDatabase

    db = SyncDatabase(pg_url)
    try:
        assert spent_aside(PgLedger(db)) == before
        assert PgLedger(db).salt() == salt_of(home / "usage.sqlite")
        with db.connection() as conn:
            carried = conn.execute("SELECT platform, id, extract(epoch FROM at)::float8 FROM seen ORDER BY n")
            assert same_seen(carried.fetchall(), seen_rows(home / "seen.sqlite"))

        assert (await tusk_cli("backup", str(second), env=on_db))[0] == 0
        back = tmp_path / "back"
        assert (await tusk_cli("restore", str(second), env={**env, "TUSK_HOME": str(back)}))[0] == 0
        assert spent_aside(Ledger(back)) == before
        assert salt_of(back / "usage.sqlite") == salt_of(home / "usage.sqlite")
        assert same_seen(seen_rows(back / "seen.sqlite"), seen_rows(home / "seen.sqlite"))
        claim = running.claim(back, "test")
        try:
            assert [as_sent(m) for m in Inbox(back / "inbox.jsonl").take_pending(claim)] == list(map(as_sent, WAITING))
        finally:
            claim.release()

        claim = running.claim(db_home, "test")  # the database's own: what a Tusk started on it replays
        journal = PgInbox(db)
        try:
            assert [as_sent(m) for m in journal.take_pending(claim)] == list(map(as_sent, WAITING))
        finally:
            journal.close()
            claim.release()
    finally:
        db.close()


async def test_a_database_whose_ledger_has_calls_is_restored_over_only_with_force(fake_llm, shared_db, pg_url,
                                                                                  tmp_path):
    """A call recorded in the database (a `tusk doctor` probe, say) makes it not empty: the restore is refused
    and the call kept; with --force the ledger is the archive's alone, not the two added up."""
    home = tmp_path / "data"
    files = Ledger(home)
    files.record(call(cost=0.5))
    files.close()
    env = env_for(fake_llm, tmp_path)
    archive = tmp_path / "b.tar.gz"
    assert (await tusk_cli("backup", str(archive), env=env))[0] == 0
    PgLedger(shared_db).record(call(cost=0.25, purpose="probe"))

    on_db = {**env, "TUSK_HOME": str(tmp_path / "db-home"), "TUSK_DATABASE_URL": pg_url}
    code, _, err = await tusk_cli("restore", str(archive), env=on_db)
    assert code == 1 and "(the database)" in err
    assert PgLedger(shared_db).totals().cost_usd == 0.25
    code, _, err = await tusk_cli("restore", "--force", str(archive), env=on_db)
    assert code == 0, err
    assert (PgLedger(shared_db).totals().calls, PgLedger(shared_db).totals().cost_usd) == (1, 0.5)
