"""`tusk backup` and `tusk restore` across the stores: a files home moves onto PostgreSQL and back by a backup
and a restore (byte-identical chat files), and a database that holds anything is not restored over without
--force (which keeps what was there first)."""

import tarfile

from bot.schedules.store import FILE, FileStore
from store.files.chats import FileChats
from tests.test_backup import files_of
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli
from tests.test_schedule_store import daily, reminder
from tests.test_store_transfer import KEY, a_lived_in_chat, tree


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
