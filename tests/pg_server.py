"""A real PostgreSQL server for tests and benchmarks: Debian's `postgresql` binaries, a cluster made with
`initdb` in a temporary directory, started on a free loopback port, stopped (and its directory removed)
when the owner is done.

PostgreSQL refuses to run as root, and the machines here run everything as root: as root the cluster
belongs to the unprivileged `postgres` user (Debian's package makes it) and every server command runs
as that user; as anyone else, as oneself.

    with PgServer() as pg:                       # a cluster of its own, superuser `postgres`
        url = pg.new_database()                  # a fresh database owned by the unprivileged role `tusk`
        ...                                      # postgresql://tusk:<password>@127.0.0.1:<port>/<db>
        pg.restart()                             # the server stopped (fast) and started again, same port

The role Tusk connects as is not a superuser (Tusk needs none): it owns its databases and nothing else.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ROLE = "tusk"


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/<version>/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def available() -> bool:
    return pg_bin() is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self) -> None:
        bin_dir = pg_bin()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="tusk-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.superpass = secrets.token_hex(12)
        self.password = secrets.token_hex(12)  # the `tusk` role's
        self._user = "postgres" if os.geteuid() == 0 else None
        self._proc: subprocess.Popen | None = None
        self._databases = 0

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> PgServer:
        self.start_cluster()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _as_owner(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        return subprocess.run(argv, user=self._user, check=True, capture_output=True, text=True, **kw)

    def start_cluster(self) -> None:
        if self._user is not None:
            pw = pwd.getpwnam(self._user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        pwfile = self.root / "pw"
        pwfile.write_text(self.superpass + "\n")
        if self._user is not None:
            os.chown(pwfile, pwd.getpwnam(self._user).pw_uid, -1)
        os.chmod(pwfile, 0o600)
        self._as_owner([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", f"--pwfile={pwfile}",
                        "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
                        "--no-instructions"], cwd=self.root)
        pwfile.unlink()
        self.start()
        self.sql(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{self.password}' NOSUPERUSER NOCREATEDB NOCREATEROLE")

    def start(self) -> None:
        """Start the server (again) on its port; returns once it takes connections (at once if it runs)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        argv = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), "-h", "127.0.0.1",
                "-k", str(self.root), "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200",
                "-c", "shared_buffers=32MB", "-c", "log_min_messages=warning"]
        with open(self.root / "server.log", "ab") as log:
            self._proc = subprocess.Popen(argv, user=self._user, cwd=self.root, stdout=subprocess.DEVNULL,
                                          stderr=log, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.root / 'server.log').read_text()[-2000:]}")
            ready = subprocess.run([str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"])
            if ready.returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("postgres did not take connections within 60 s")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` (clients cut, a clean shutdown) or `immediate` (as if killed)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        sig = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT, "smart": signal.SIGTERM}[mode]
        self._proc.send_signal(sig)
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    # -- use ------------------------------------------------------------------------------------
    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run one statement as the superuser (over the cluster's own socket); its output."""
        out = self._as_owner([str(self.bin / "psql"), "-h", str(self.root), "-p", str(self.port), "-U", "postgres",
                              "-d", database, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", statement])
        return out.stdout.strip()

    def new_database(self, name: str | None = None) -> str:
        """A fresh, empty database owned by the `tusk` role; its URL."""
        self._databases += 1
        name = name or f"t{os.getpid()}_{self._databases}"
        self.sql(f"CREATE DATABASE {name} OWNER {ROLE}")
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def url(self, database: str, password: str | None = None) -> str:
        return f"postgresql://{ROLE}:{password or self.password}@127.0.0.1:{self.port}/{database}"
