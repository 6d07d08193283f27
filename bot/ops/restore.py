"""`tusk restore FILE`: a backup (bot/ops/backup.py) back into $TUSK_HOME.

Order of work, so a bad archive writes nothing:
1. the whole archive is verified against its manifest (every member safe, sizes and SHA-256s right);
2. no Tusk may run on the home (its lock, bot/running.py, is taken exclusively and held to the end);
3. the home must be empty — or, with `force`, what is there is first backed up beside it and moved away;
4. the files are extracted by hand (never `tar.extractall`): each member's path checked again, folders
   0700 and files 0600, nothing opened through a symlink, each written under a temporary name first.

With TUSK_DATABASE_URL set the database must be empty too (or, with `force`, is backed up with the home
and emptied); what the store keeps is extracted into the home first, then loaded into the database and
removed from the home (store/transfer.py): an archive from either store restores into either.

An archive made without `--with-secrets` holds no console token, no API keys and no settings file:
`Restored.left_out` says so, and what to do about each.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tarfile
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from bot import running
from bot.errors import HomeBusy
from bot.ops import backup, carried
from memory.paths import open_private, private_dir
from store import transfer

IGNORED = frozenset({running.LOCK_NAME})


def _occupied(home: Path) -> list[str]:
    if not home.exists():
        return []
    return sorted(p.name for p in home.iterdir() if p.name not in IGNORED)


SECRETS_LEFT_OUT = ("Not in this archive (a backup leaves secrets out unless made with --with-secrets):\n"
                    "- the console token: Tusk makes a new one at its next start (`tusk console-url` prints the new "
                    "link; the old one no longer opens the console or the API)\n"
                    "- the API keys of the OpenAI-compatible endpoint (api-keys.json): make them again with "
                    "`tusk apikey create PREFIX` and give the clients the new keys\n"
                    "- a settings file kept in the data dir (.env): set the model's and the platforms' keys again "
                    "(`tusk init`), unless they live elsewhere")


class Restored(NamedTuple):
    files: int
    saved: Path | None  # what was in the home before (`force`), backed up beside it
    left_out: str | None  # what a backup without secrets did not bring back, and what to do (None: it had them)


def restore(archive: Path, home: Path, version: str, force: bool = False,
            database_url: str | None = None) -> Restored:
    """Restore `archive` into `home` (and the database at `database_url`): the files written, the safety
    backup made by `force` (or None), and what the archive did not hold (the secrets of a backup without)."""
    manifest = backup.verify(archive)
    with_secrets = any(backup.is_secret(rel) for rel in manifest["files"])
    home = Path(home)
    try:
        lock = running.claim(home, "tusk restore")
    except HomeBusy as exc:
        raise backup.BackupError(f"{exc} (`systemctl stop tusk`, Ctrl-C)") from None
    try:
        saved = None
        there = _occupied(home)
        database_holds = bool(database_url and _database_holds(home, database_url))
        if there or database_holds:
            if not force:
                said = ", ".join(there[:3] + (["(the database)"] if database_holds else []))
                raise backup.BackupError(f"{home} is not empty ({said}...): restore into an empty TUSK_HOME (and "
                                         "database), or add --force to back up what is there and replace it")
            saved = _set_aside(home, there, version, database_url)
        files = _extract(archive, home)
        if database_url:
            _into_database(home, database_url, lock)
        return Restored(files, saved, None if with_secrets else SECRETS_LEFT_OUT)
    finally:
        running.release(lock)


def _set_aside(home: Path, there: list[str], version: str, database_url: str | None) -> Path:
    """`force`: what is in the home (and the database) backed up beside the home, then removed."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    saved = home.parent / f"tusk-before-restore-{stamp}.tar.gz"
    private_dir(home, follow=True)
    backup.create_from(home, database_url, saved, version, with_secrets=True)
    aside = home.parent / f".{home.name}-before-restore-{stamp}"
    private_dir(aside)
    for name in there:
        os.replace(home / name, aside / name)
    shutil.rmtree(aside)
    if database_url:
        asyncio.run(_on_store(home, database_url, _emptied))
    return saved


async def _emptied(store) -> None:
    await transfer.empty(store)
    await asyncio.to_thread(carried.empty, store.sync_db)


def _database_holds(home: Path, database_url: str) -> bool:
    async def holds(store) -> bool:
        return await transfer.holds_anything(store) or await asyncio.to_thread(carried.holds, store.sync_db)

    return asyncio.run(_on_store(home, database_url, holds))


def _into_database(home: Path, database_url: str, held: running.Claim) -> None:
    """The stored files just extracted go into the database, and out of the home (they live there now)."""
    async def into(store) -> None:
        await transfer.load(store, home)
        await asyncio.to_thread(carried.load, store.sync_db, home, held)

    asyncio.run(_on_store(home, database_url, into))
    shutil.rmtree(home / "chats", ignore_errors=True)
    for name in transfer.SHARED:
        (home / name).unlink(missing_ok=True)


async def _on_store(home: Path, database_url: str, work):
    from store import opened

    async with opened(home, database_url) as store:
        return await work(store)


def _extract(archive: Path, home: Path) -> int:
    count = 0
    with tarfile.open(archive, mode="r:gz") as tar:
        for member in tar:
            rel = backup.safe_member(member)
            if rel == backup.MANIFEST:
                continue
            path = home.joinpath(*rel.split("/"))
            if member.isdir():
                private_dir(path)
                continue
            private_dir(path.parent)
            tmp = path.with_name(f".{path.name}.restore.tmp")
            src = tar.extractfile(member)
            assert src is not None  # a plain file: safe_member refused the rest, folders went on above
            with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as out:
                shutil.copyfileobj(src, out, backup.CHUNK)
                out.flush()
                os.fsync(out.fileno())
            os.utime(tmp, (member.mtime, member.mtime))
            os.replace(tmp, path)
            count += 1
    return count
