"""`tusk backup`: the whole data dir in one owner-only .tar.gz, taken while Tusk runs or not.

Archive layout (format 1):

    home/<path>          every file of $TUSK_HOME, by its path inside it
    MANIFEST.json        last: {"format": 1, "tusk": VERSION, "created": ISO,
                                "files": {"<path>": {"size": N, "sha256": HEX}, ...}}

How each file is read so the copy is consistent without stopping Tusk:
- SQLite files (usage.sqlite, each chat's search.sqlite) through SQLite's backup API into a
  temporary copy (their -wal/-shm/-journal side files are left out: the copy holds it all);
- append-only files (session.jsonl, HISTORY.md, inbox.jsonl, input-history) up to their last complete
  line: a turn is appended line by line, so the copy ends at a record boundary;
- everything else (MEMORY.md, settings.json, reminders.json, ...) is replaced atomically by Tusk: one
  open descriptor reads one whole version.
The daily backup (TUSK_BACKUP_DIR) is made by a child process, as `tusk backup` is: never in a thread of
Tusk's own process, whose turns it would slow (`create_apart`).
Left out: symlinks and other non-regular files, `*.tmp`, the running lock, and unless `--with-secrets`
the secrets (`SECRETS`, any `*.env` settings file).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import sqlite3
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from memory.paths import open_private, private_dir
from store import transfer

logger = logging.getLogger(__name__)

FORMAT = 1
MANIFEST = "MANIFEST.json"
PREFIX = "home/"
SECRETS = frozenset({"console-token", "api-keys.json", ".env", "tusk.env"})
SKIPPED = frozenset({"tusk.lock", "backup-status.json"})
APPEND_ONLY = frozenset({"session.jsonl", "HISTORY.md", "inbox.jsonl", "input-history"})
SQLITE_SIDE = ("-wal", "-shm", "-journal")
CHUNK = 1 << 20
STATUS = "backup-status.json"  # the last scheduled backup's outcome, for `tusk doctor`


class BackupError(ValueError):
    """An archive that is not a Tusk backup, or one that does not match its manifest."""


@dataclass(frozen=True, slots=True)
class Entry:
    path: str  # relative to $TUSK_HOME, POSIX
    size: int
    sha256: str


def is_secret(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return rel in SECRETS or name.endswith(".env") or name == ".env"


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def walk(home: Path, with_secrets: bool) -> Iterator[tuple[str, Path]]:
    """(relative path, path) of every regular file to back up, sorted; symlinks are never followed."""
    for folder, dirs, names in os.walk(home):  # os.walk does not descend into symlinked folders
        dirs.sort()
        for name in sorted(names):
            path = Path(folder) / name
            rel = path.relative_to(home).as_posix()
            if (not stat.S_ISREG(os.lstat(path).st_mode) or name.endswith(".tmp") or rel in SKIPPED
                    or name.endswith(SQLITE_SIDE) or (is_secret(rel) and not with_secrets)):
                continue
            yield rel, path


def _complete_lines(fd: int) -> int:
    """How many bytes from the start end with the file's last newline (0 if none)."""
    size = os.fstat(fd).st_size
    pos = size
    while pos > 0:
        step = min(CHUNK, pos)
        block = os.pread(fd, step, pos - step)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return pos - step + cut + 1
        pos -= step
    return 0


class _Hashing(io.RawIOBase):
    """Reads `size` bytes of `fd` from offset 0, hashing them on the way into the archive."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.left, self.pos, self.sha = fd, size, 0, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = os.pread(self.fd, n, self.pos) if n else b""
        if len(data) < n:
            raise BackupError("a file shrank while it was copied")
        self.pos += len(data)
        self.left -= len(data)
        self.sha.update(data)
        return data


def _add(tar: tarfile.TarFile, rel: str, fd: int, size: int, mtime: float) -> Entry:
    info = tarfile.TarInfo(PREFIX + rel)
    info.size, info.mode, info.mtime = size, 0o600, int(mtime)
    reader = _Hashing(fd, size)
    tar.addfile(info, reader)
    return Entry(rel, size, reader.sha.hexdigest())


def _sqlite_copy(path: Path, scratch: Path) -> Path:
    """A consistent copy of a live SQLite database (its WAL folded in), through the backup API."""
    copy = scratch / f"{os.getpid()}-{time.monotonic_ns()}.sqlite"
    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    dst = sqlite3.connect(copy)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
    finally:
        dst.close()
        src.close()
    return copy


def _sources(home: Path, with_secrets: bool, stored_from: Path | None) -> list[tuple[str, Path]]:
    """What goes in: the home's files; on PostgreSQL, what the store keeps comes from its dump instead
    (`stored_from`, store/transfer.py), so the archive is the same whichever store made it."""
    if stored_from is None:
        return list(walk(home, with_secrets))
    from bot.ops import carried

    def dumped(rel: str) -> bool:
        return transfer.stored(rel) or rel in carried.NAMES

    own = [(rel, path) for rel, path in walk(home, with_secrets) if not dumped(rel)]
    kept = [(rel, path) for rel, path in walk(stored_from, with_secrets) if dumped(rel)]
    return sorted(own + kept)


def create(home: Path, target: Path, version: str, with_secrets: bool = False,
           stored_from: Path | None = None) -> list[Entry]:
    """Write the backup of `home` at `target` (0600; a temporary name until complete); its entries.
    `stored_from`: the database's dump (store/transfer.py), taken in place of the home's stored files."""
    home = Path(home)
    if not home.is_dir() and stored_from is None:
        raise BackupError(f"{home} is not a folder: nothing to back up (is TUSK_HOME right?)")
    entries: list[Entry] = []
    private_dir(target.parent, follow=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with tempfile.TemporaryDirectory(prefix="tusk-backup-") as scratch, \
                os.fdopen(open_private(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as out, \
                tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            for rel, path in _sources(home, with_secrets, stored_from):
                if path.parent.resolve() == target.parent.resolve() and (path.name.startswith("tusk-backup-")
                                                                    or path.name in (partial.name, target.name)):
                    continue  # the backup folder inside the home: earlier backups are not backed up again
                try:
                    source = _sqlite_copy(path, Path(scratch)) if _is_sqlite(path) else path
                    fd = open_private(source, os.O_RDONLY)
                except FileNotFoundError:
                    continue  # removed meanwhile (a chat forgotten): not part of the backup
                try:
                    info = os.fstat(fd)
                    size = _complete_lines(fd) if path.name in APPEND_ONLY else info.st_size
                    entries.append(_add(tar, rel, fd, size, os.lstat(path).st_mtime))
                finally:
                    os.close(fd)
                    if source is not path:
                        source.unlink()
            manifest = json.dumps({"format": FORMAT, "tusk": version,
                                   "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                   "files": {e.path: {"size": e.size, "sha256": e.sha256} for e in entries}},
                                  indent=1).encode()
            head = tarfile.TarInfo(MANIFEST)
            head.size, head.mode, head.mtime = len(manifest), 0o600, int(time.time())
            tar.addfile(head, io.BytesIO(manifest))
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return entries


def create_from(home: Path, database_url: str | None, target: Path, version: str,
                with_secrets: bool = False) -> list[Entry]:
    """`create` from the configured store: the home alone on files; on PostgreSQL the home's own files and
    the database's content, dumped as the files a home would hold."""
    if not database_url:
        return create(home, target, version, with_secrets)
    from store import opened

    async def dumped() -> list[Entry]:
        async with opened(home, database_url) as store:
            with tempfile.TemporaryDirectory(prefix="tusk-dump-") as scratch:
                await transfer.dump(store, Path(scratch))
                from bot.ops import carried

                await asyncio.to_thread(carried.dump, store.sync_db, Path(scratch))
                return await asyncio.to_thread(create, home, target, version, with_secrets, Path(scratch))

    return asyncio.run(dumped())


def safe_member(member: tarfile.TarInfo) -> str:
    """The member's path inside the home, or BackupError for anything that could land outside it or
    is not a plain file or folder (absolute paths, `..`, links, devices, fifos)."""
    name = member.name
    if not (member.isfile() or member.isdir()):
        raise BackupError(f"archive member {name!r} is a link or special file: refused")
    if name == MANIFEST:
        return name
    if not name.startswith(PREFIX):
        raise BackupError(f"archive member {name!r} is outside home/: refused")
    rel = name[len(PREFIX):].rstrip("/")
    parts = rel.split("/")
    if not rel or name.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in rel or "\0" in rel:
        raise BackupError(f"archive member {name!r} has an unsafe path: refused")
    return rel


def verify(archive: Path) -> dict:
    """Read the whole archive: every member safe, every file's size and SHA-256 as the manifest says, none
    missing or extra. Returns the manifest; BackupError names the first problem."""
    seen: dict[str, tuple[int, str]] = {}
    manifest = None
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for member in tar:
                rel = safe_member(member)
                if member.isdir():
                    continue
                fh = tar.extractfile(member)
                assert fh is not None  # a plain file (safe_member refused the rest, folders went on)
                if rel == MANIFEST:
                    if member.size > 64 << 20:
                        raise BackupError("the manifest is implausibly large: refused")
                    manifest = json.loads(fh.read())
                    continue
                sha = hashlib.sha256()
                while block := fh.read(CHUNK):
                    sha.update(block)
                if rel in seen:
                    raise BackupError(f"{rel} appears twice in the archive")
                seen[rel] = (member.size, sha.hexdigest())
    except (tarfile.TarError, EOFError, OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BackupError(f"{archive} is damaged or not a Tusk backup: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise BackupError(f"{archive} has no manifest: not a Tusk backup (or cut short)")
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{archive} is backup format {manifest.get('format')!r}; this Tusk reads {FORMAT}")
    listed = manifest["files"]
    for rel, (size, digest) in seen.items():
        want = listed.get(rel)
        if want is None:
            raise BackupError(f"{rel} is in the archive but not in its manifest")
        if want.get("size") != size or want.get("sha256") != digest:
            raise BackupError(f"{rel} does not match the manifest (size or SHA-256 differs): the archive is damaged")
    if missing := sorted(set(listed) - set(seen)):
        raise BackupError(f"{missing[0]} is in the manifest but missing from the archive ({len(missing)} missing)")
    return manifest


def default_name(now: datetime | None = None) -> str:
    return f"tusk-backup-{(now or datetime.now(timezone.utc)).strftime('%Y%m%dT%H%M%SZ')}.tar.gz"


def prune(folder: Path, keep: int) -> list[Path]:
    """Remove all but the newest `keep` scheduled backups in `folder`; returns those removed."""
    kept = sorted(folder.glob("tusk-backup-*.tar.gz"))
    old = kept[:-keep] if keep > 0 else []
    for path in old:
        path.unlink(missing_ok=True)
    return old


def create_apart(home: Path, target: Path, version: str, database_url: str | None = None) -> int:
    """`create` in a child process (`python -m bot.ops.backup`, niced), as `tusk backup` runs next to a
    running Tusk; the number of files. In a thread of Tusk's own process the walk, tarfile and gzip code
    would share the interpreter lock with every turn: with 20 chats talking on 2 cores, turns took 1.5x as
    long at the median and 2x at p95, far more on a busy machine (bench/backup_live.py). BackupError
    carries the child's error."""
    argv = [sys.executable, "-m", "bot.ops.backup", str(Path(home).absolute()), str(Path(target).absolute()), version]
    root = Path(__file__).resolve().parents[2]  # where `bot` is importable from, whatever Tusk's working dir
    env = {k: v for k, v in os.environ.items() if k != "TUSK_DATABASE_URL"}
    if database_url:  # the store to dump (from the settings, which may come from a file the child does not read)
        env["TUSK_DATABASE_URL"] = database_url
    done = subprocess.run(argv, cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        if len(said) > 1:
            logger.error("the backup process failed:\n%s", done.stderr)  # a traceback: kept whole in the log
        raise BackupError(said[-1] if said else f"the backup process ended with code {done.returncode}")
    return int(done.stdout)


def scheduled(home: Path, folder: Path, keep: int, version: str, database_url: str | None = None) -> Path | None:
    """The daily job: a backup into `folder` (made by a child process: `create_apart`), then prune; its
    outcome is kept in STATUS for the doctor. A failure is logged, never raised (the scheduler goes on)."""
    from memory.files import write_atomic

    target = folder / default_name()
    made: Path | None = target
    started = time.time()
    try:
        files = create_apart(home, target, version, database_url)
        prune(folder, keep)
        status = {"ok": True, "at": started, "file": str(target), "files": files}
        logger.info("scheduled backup written: %s (%d files)", target, files)
    except Exception as exc:  # scheduler boundary: a failed backup is recorded and shown by `tusk doctor`
        logger.exception("scheduled backup into %s failed", folder)
        status, made = {"ok": False, "at": started, "error": f"{type(exc).__name__}: {exc}"}, None
    write_atomic(Path(home) / STATUS, json.dumps(status), follow_dir=True)
    return made



def doctor_check(home: Path, folder: Path | None) -> tuple[str, str, str] | None:
    """(verdict, detail, fix) of the scheduled backups, or None when none are set up or made."""
    status = last_status(home)
    if status is None:
        return None if folder is None else ("ok", f"daily into {folder}; none made yet", "")
    when = datetime.fromtimestamp(status.get("at", 0), timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if status.get("ok"):
        return "ok", f"last backup {when}: {status.get('file')}", ""
    return "fail", f"the backup at {when} failed: {status.get('error')}", \
        "check TUSK_BACKUP_DIR exists and has room (the log has the traceback); `tusk backup` runs one now"


def last_status(home: Path) -> dict | None:
    try:
        return json.loads((Path(home) / STATUS).read_text())
    except (OSError, ValueError):
        return None


def _child(argv: list[str]) -> int:
    """`python -m bot.ops.backup HOME TARGET VERSION`: the daily backup's own process (`create_apart`)."""
    os.nice(10)  # background work: the turns of the Tusk that started it come first
    home, target, version = argv
    try:
        print(len(create_from(Path(home), os.environ.get("TUSK_DATABASE_URL"), Path(target), version)))
    except (BackupError, OSError) as exc:  # the parent records the last line; anything else is a traceback
        print(f"{exc}" if isinstance(exc, BackupError) else f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
