"""`tusk backup`, `backup --verify` and `tusk restore`: a whole data dir out and back, and what is refused."""

import asyncio
import gzip
import io
import os
import stat
import tarfile

from bot.ops import backup
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli
from tests import kept


def files_of(home):
    return {p.relative_to(home).as_posix(): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm", ".sqlite")) and p.name != "tusk.lock"}


async def test_backup_while_chats_talk_restores_byte_equal(tusk, fake_llm, tmp_path):
    """A backup taken during turns restores into a fresh home whose chat files equal the archive's, owner-only."""
    for n in range(3):
        await tusk.say(f"chat{n}", "hello")
    kept.files(tusk, "http", "chat0").memory.write_text("- likes tea\n")
    env = env_for(fake_llm, tmp_path)
    archive = tmp_path / "b.tar.gz"
    talk = asyncio.gather(*(tusk.say(f"chat{n}", f"more {i}") for n in range(3) for i in range(3)))
    code, out, err = await tusk_cli("backup", str(archive), env=env)
    await talk
    assert code == 0, err
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600 and "secrets left out" in out
    fresh = tmp_path / "fresh"
    code, out, err = await tusk_cli("restore", str(archive), env={**env, "TUSK_HOME": str(fresh)})
    assert code == 0, err
    manifest = backup.verify(archive)
    for rel, want in manifest["files"].items():
        data = (fresh / rel).read_bytes()
        assert len(data) == want["size"]
        if rel.endswith("session.jsonl"):
            assert data.endswith(b"\n")  # a turn boundary: no half line
    assert (fresh / "chats/http/chat0/MEMORY.md").read_text() == "- likes tea\n"
    assert "console-token" not in manifest["files"]
    for path in fresh.rglob("*"):
        assert stat.S_IMODE(path.lstat().st_mode) & 0o077 == 0, path


async def test_restore_of_a_stopped_home_is_byte_equal_and_sqlite_readable(fake_llm, tmp_path):
    """With Tusk stopped, every file comes back byte for byte; SQLite files are copied through the backup API."""
    import sqlite3

    home = tmp_path / "data"
    (home / "chats/telegram/42").mkdir(parents=True)
    (home / "chats/telegram/42/session.jsonl").write_bytes(b'{"record":"meta"}\n{"role":"user"}\n{"torn')
    (home / "chats/telegram/42/HISTORY.md").write_text("## 2026-01-01 10:00 UTC\n\nhi\n\n")
    (home / "reminders.json").write_text("{}")
    db = sqlite3.connect(home / "usage.sqlite")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (7)")
    db.commit()  # still in the WAL: the copy must hold it
    env = env_for(fake_llm, tmp_path)
    archive = tmp_path / "b.tar.gz"
    assert (await tusk_cli("backup", str(archive), env=env))[0] == 0
    db.close()
    fresh = tmp_path / "fresh"
    assert (await tusk_cli("restore", str(archive), env={**env, "TUSK_HOME": str(fresh)}))[0] == 0
    assert (fresh / "chats/telegram/42/session.jsonl").read_bytes() == b'{"record":"meta"}\n{"role":"user"}\n'
    assert (fresh / "reminders.json").read_text() == "{}"
    assert sqlite3.connect(fresh / "usage.sqlite").execute("SELECT x FROM t").fetchall() == [(7,)]


async def test_restore_says_which_secrets_the_archive_did_not_hold(fake_llm, tmp_path):
    """A backup made without --with-secrets restores and says the console token, API keys and settings file were
    not in it, with what to do about each; one made with them restores them and says nothing of the kind."""
    home = tmp_path / "data"
    home.mkdir()
    (home / "reminders.json").write_text("{}")
    (home / "console-token").write_text("t" * 43)
    (home / "api-keys.json").write_text('{"version": 1, "keys": []}')
    env = env_for(fake_llm, tmp_path)
    for flags, name in (((), "plain"), (("--with-secrets",), "secret")):
        archive = tmp_path / f"{name}.tar.gz"
        assert (await tusk_cli("backup", str(archive), *flags, env=env))[0] == 0
        code, out, err = await tusk_cli("restore", str(archive), env={**env, "TUSK_HOME": str(tmp_path / name)})
        assert code == 0, err
        if name == "plain":
            assert not (tmp_path / name / "console-token").exists()
            assert "Not in this archive (a backup leaves secrets out unless made with --with-secrets):" in out
            assert "- the console token: Tusk makes a new one at its next start" in out
            assert "- the API keys of the OpenAI-compatible endpoint (api-keys.json): make them again" in out
            assert "- a settings file kept in the data dir (.env)" in out
        else:
            assert (tmp_path / name / "console-token").read_text() == "t" * 43
            assert "Not in this archive" not in out and out.startswith("Restored 3 files into"), out


async def test_verify_catches_a_flipped_byte(fake_llm, tmp_path):
    """`--verify` passes a good archive and names the file whose byte was flipped; restore then writes nothing."""
    home = tmp_path / "data"
    (home / "chats/http/a").mkdir(parents=True)
    (home / "chats/http/a/MEMORY.md").write_text("x" * 1000)
    env = env_for(fake_llm, tmp_path)
    archive = tmp_path / "b.tar.gz"
    assert (await tusk_cli("backup", str(archive), env=env))[0] == 0
    code, out, _ = await tusk_cli("backup", "--verify", str(archive), env=env)
    assert code == 0 and "OK: 1 files" in out
    raw = bytearray(gzip.decompress(archive.read_bytes()))
    raw[raw.index(b"xxxx")] ^= 1
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(gzip.compress(bytes(raw)))
    code, _, err = await tusk_cli("backup", "--verify", str(bad), env=env)
    assert code == 1 and "chats/http/a/MEMORY.md does not match" in err
    fresh = tmp_path / "fresh"
    code, _, err = await tusk_cli("restore", str(bad), env={**env, "TUSK_HOME": str(fresh)})
    assert code == 1 and not fresh.exists()


def hostile(tmp_path, member: tarfile.TarInfo, data=b"x"):
    path = tmp_path / "hostile.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


async def test_restore_refuses_traversal_links_and_devices(fake_llm, tmp_path):
    """Members with `..`, absolute paths, symlinks, hard links or devices: refused, nothing written."""
    env = env_for(fake_llm, tmp_path)
    fresh = tmp_path / "fresh"
    cases = []
    for name in ("home/../escape", "/etc/escape", "home/chats/../../x"):
        member = tarfile.TarInfo(name)
        member.size = 1
        cases.append(member)
    for kind in (tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE):
        member = tarfile.TarInfo("home/link")
        member.type, member.linkname = kind, "/etc/passwd"
        cases.append(member)
    for member in cases:
        code, _, err = await tusk_cli("restore", str(hostile(tmp_path, member)), env={**env, "TUSK_HOME": str(fresh)})
        assert code == 1 and "refused" in err, (member.name, err)
        assert not fresh.exists() and not (tmp_path / "escape").exists()


async def test_restore_refuses_a_running_tusk_and_a_full_home_without_force(tusk, fake_llm, tmp_path):
    """A Tusk running on the home is refused; a home with files needs --force, which saves them first."""
    await tusk.say("a", "hi")
    env = env_for(fake_llm, tmp_path)
    archive = tmp_path / "b.tar.gz"
    assert (await tusk_cli("backup", str(archive), env=env))[0] == 0
    code, _, err = await tusk_cli("restore", str(archive), env=env)
    assert code == 1 and "running" in err
    other = tmp_path / "other"
    other.mkdir()
    (other / "reminders.json").write_text("{}")
    env2 = {**env, "TUSK_HOME": str(other)}
    code, _, err = await tusk_cli("restore", str(archive), env=env2)
    assert code == 1 and "--force" in err
    code, out, err = await tusk_cli("restore", str(archive), "--force", env=env2)
    assert code == 0 and "saved in" in out, err
    assert (other / "chats/http/a/session.jsonl").exists() and not (other / "reminders.json").exists()


def test_prune_keeps_the_newest(tmp_path):
    """Scheduled backups beyond TUSK_BACKUP_KEEP are removed, oldest first; the outcome is recorded."""
    home = tmp_path / "home"
    (home / "chats").mkdir(parents=True)
    folder = tmp_path / "backups"
    folder.mkdir()
    for day in range(1, 6):
        (folder / f"tusk-backup-2026120{day}T000000Z.tar.gz").write_bytes(b"")
    assert backup.scheduled(home, folder, 3, "test") is not None
    assert len(list(folder.glob("tusk-backup-*"))) == 3 and backup.last_status(home)["ok"]
    assert backup.scheduled(home / "missing", folder, 3, "test") is None
    assert not backup.last_status(home / "missing")["ok"]
    assert not os.path.exists(folder / "tusk-backup-20261201T000000Z.tar.gz")


def test_daily_backup_reads_the_home_in_its_own_process(tmp_path):
    """The daily backup is made by a child process: Tusk's own process (its turns' interpreter) opens no chat file."""
    import sys

    home = tmp_path / "home"
    (home / "chats/http/a").mkdir(parents=True)
    (home / "chats/http/a/session.jsonl").write_text('{"record":"meta"}\n')
    opened = []
    watching = [True]

    def audit(event, args):
        if watching and event == "open" and str(args[0]).startswith(str(home / "chats")):
            opened.append(args[0])

    sys.addaudithook(audit)  # stays for the process; `watching` ends its reach with this test
    try:
        target = backup.scheduled(home, tmp_path / "backups", 3, "test")
    finally:
        watching.clear()
    assert target is not None and backup.last_status(home)["files"] == 1
    with tarfile.open(target) as tar:
        assert "home/chats/http/a/session.jsonl" in tar.getnames()
    assert opened == []


async def test_doctor_shows_a_failed_scheduled_backup(make_settings, fake_llm, tmp_path):
    """A failed scheduled backup is a doctor failure naming the error and TUSK_BACKUP_DIR."""
    from bot.ops import doctor

    settings = make_settings(TUSK_BACKUP_DIR=str(tmp_path / "backups"))
    settings.home.mkdir(parents=True, exist_ok=True)
    (tmp_path / "backups").write_text("a file, not a folder")
    assert backup.scheduled(settings.home, tmp_path / "backups", 3, "test") is None
    checks = {c.name: c for c in await doctor.run_checks(settings, model=False)}
    assert checks["backup"].verdict == "fail" and "TUSK_BACKUP_DIR" in checks["backup"].fix
