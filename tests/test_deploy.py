"""deploy/: the installer in a temporary prefix, the systemd unit, the Dockerfile and compose file.

No Docker engine exists on the test machines: the image is checked as text (stages, user,
volume, health check, entrypoint), not built.
"""

import configparser
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml

from tests import procs

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read(path)
    return parser


def pip_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment that keeps only how pip reaches its registry (PIP_* variables, pip.conf, its cache)."""
    env = procs.clean_env(home=tmp_path / "home", **{k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    config = Path.home() / ".config/pip/pip.conf"
    if "PIP_CONFIG_FILE" not in env and config.exists():
        env["PIP_CONFIG_FILE"] = str(config)
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache/pip"))
    env["PIP_NO_COMPILE"] = "1"  # no .pyc for litellm's thousands of files: most of an install's CPU time
    return env


def install(prefix: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return procs.run(["bash", str(DEPLOY / "install.sh"), "--prefix", str(prefix), *flags],
                     env=env or pip_env(prefix), capture_output=True, text=True, timeout=600)


def recording_systemctl(folder: Path) -> Path:
    """A `systemctl` (and `loginctl`) first on PATH that only records its calls: the machine's systemd is
    never reachable from a test, so this shows whether the installer tried to use it. Returns the record."""
    folder.mkdir()
    record = folder / "calls"
    for name in ("systemctl", "loginctl"):
        (folder / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {record}\n')
        (folder / name).chmod(0o755)
    return record


def seed_venv(prefix: Path) -> None:
    """The venv the installer will find at PREFIX/opt/tusk/venv, its dependencies already there: a line in
    its site-packages points at this test run's (a .pth entry, whose own .pth files, the editable install's
    among them, are not run). The installer still builds and installs Tusk itself into it, from the
    checkout; only the download and unpacking of ~100 dependencies (the bulk of a minute) is skipped,
    which .ci/run's own install and .ci/wheel-check exercise anyway."""
    venv = prefix / "opt/tusk/venv"
    assert procs.run([sys.executable, "-m", "venv", str(venv)], env=procs.clean_env(), timeout=120).returncode == 0
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    theirs = procs.run([str(venv / "bin/python"), "-c", purelib], env=procs.clean_env(), capture_output=True,
                       text=True, timeout=60).stdout.strip()
    (Path(theirs) / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")


def test_installer_installs_then_upgrades_keeping_settings_and_data(tmp_path):
    """Run twice: a working `tusk` and a 600 env file the first time (--prefix alone: no systemctl call, hints
    naming what it installed); the second keeps the env file and data."""
    seed_venv(tmp_path)
    record = recording_systemctl(tmp_path / "fake-bin")
    env = pip_env(tmp_path)
    env["PATH"] = f"{tmp_path / 'fake-bin'}:{env['PATH']}"
    first = install(tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert not record.exists(), record.read_text()  # --prefix never touches the machine's systemd
    wrapper = tmp_path / "usr/local/bin/tusk"
    assert f"{wrapper} init" in first.stdout and f"{wrapper} doctor" in first.stdout
    assert f"{tmp_path}/etc/systemd/system/tusk.service, not enabled" in first.stdout
    env = tmp_path / "etc/tusk/tusk.env"
    assert env.stat().st_mode & 0o777 == 0o600
    assert "TUSK_HOME=/var/lib/tusk" in env.read_text() and "TUSK_MODEL=" in env.read_text()
    env.write_text(env.read_text() + "\nTUSK_MODEL=openai/my-own-choice\n")
    (tmp_path / "var/lib/tusk/chats/http/me").mkdir(parents=True)
    (tmp_path / "var/lib/tusk/chats/http/me/MEMORY.md").write_text("- keep me")

    second = install(tmp_path, "--no-systemd")
    assert second.returncode == 0, second.stderr
    assert "keeping your settings" in second.stdout and "openai/my-own-choice" in env.read_text()
    assert (tmp_path / "var/lib/tusk/chats/http/me/MEMORY.md").read_text() == "- keep me"
    assert f'TUSK_ENV_FILE="{env}" TUSK_HOME="{tmp_path}/var/lib/tusk"' in wrapper.read_text()
    listed = procs.run([str(wrapper), "chats"], env=procs.clean_env(), capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "http:me" in listed.stdout, listed.stderr
    shown = procs.run([str(wrapper), "memory", "show", "http:me"], env=procs.clean_env(), capture_output=True, text=True,
                      timeout=60)
    assert shown.stdout.strip() == "- keep me"
    service = unit(tmp_path / "etc/systemd/system/tusk.service")["Service"]
    assert service["ExecStart"] == f"{tmp_path}/opt/tusk/venv/bin/tusk run"
    assert service["EnvironmentFile"] == f"{tmp_path}/etc/tusk/tusk.env"
    template = unit(tmp_path / "etc/systemd/system/tusk@.service")["Service"]
    assert template["ExecStart"] == f"/usr/bin/env TUSK_HOME={tmp_path}/var/lib/tusk/%i {tmp_path}/opt/tusk/venv/bin/tusk run --role %i"


def test_installer_help_prints_only_help(tmp_path):
    """`install.sh --help` prints the usage text (no line of the script itself), installs nothing, exits 0."""
    done = procs.run(["bash", str(DEPLOY / "install.sh"), "--help"], env=procs.clean_env(), capture_output=True,
                     text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("Install or upgrade Tusk") and "--prefix" in done.stdout
    assert "set -euo" not in done.stdout and not done.stdout.startswith("#")
    assert all(not line.startswith(("usage()", "prefix=", "set ")) for line in done.stdout.splitlines())


def test_unit_is_hardened_and_verifies():
    """The unit runs as its own user, restarts on failure, is hardened, and passes systemd-analyze verify."""
    service = unit(DEPLOY / "tusk.service")["Service"]
    assert service["User"] == "tusk" and service["Restart"] == "on-failure"
    assert service["EnvironmentFile"] == "/etc/tusk/tusk.env" and service["StateDirectory"] == "tusk"
    assert "TUSK_HOME=/var/lib/tusk" in service["Environment"].split()  # never the user data dir default
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                       "PrivateTmp": "yes", "ReadWritePaths": "/var/lib/tusk"}.items():
        assert service[key] == value, key
    assert int(service["TimeoutStopSec"]) > 30  # longer than the default TUSK_SHUTDOWN_GRACE
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here")
    done = procs.run(["systemd-analyze", "verify", str(DEPLOY / "tusk.service")], env=procs.clean_env(),
                     capture_output=True, text=True, timeout=60)
    problems = [line for line in done.stderr.splitlines()
                if "tusk.service" in line and "/opt/tusk/venv/bin/tusk" not in line]  # not installed here
    assert not problems, done.stderr


def test_unit_scores_safe_in_systemd_analyze_security():
    """The unit filters system calls, hides other processes, has room for files and scores at most 2.0."""
    service = unit(DEPLOY / "tusk.service")["Service"]
    for key, value in {"ProtectProc": "invisible", "ProcSubset": "pid", "PrivateUsers": "yes", "RemoveIPC": "yes",
                       "CapabilityBoundingSet": "", "UMask": "0077"}.items():
        assert service[key] == value, key
    assert int(service["LimitNOFILE"]) >= 16384
    text = (DEPLOY / "tusk.service").read_text()
    assert "SystemCallFilter=@system-service" in text and "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX" in text
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here")
    done = procs.run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(DEPLOY / "tusk.service")],
                     env=procs.clean_env(), capture_output=True, text=True, timeout=60)
    score = re.search(r"Overall exposure level for tusk\.service: ([0-9.]+)", done.stdout)
    assert score and float(score[1]) <= 2.0, done.stdout[-500:]


def stages(dockerfile: str) -> list[list[str]]:
    """The Dockerfile's instructions (continuations joined), grouped by FROM."""
    text = re.sub(r"\\\n\s*", " ", dockerfile)
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    out: list[list[str]] = []
    for line in lines:
        if line.upper().startswith("FROM "):
            out.append([])
        out[-1].append(line)
    return out


def test_dockerfile_is_slim_non_root_with_healthcheck():
    """Final stage: slim base, the venv only, a non-root user, /data volume, /healthz check, `tusk run`."""
    build, final = stages((DEPLOY / "Dockerfile").read_text())
    assert final[0].startswith("FROM python:3.11-slim") and "slim" in build[0]
    assert any(i.startswith("COPY --from=build /opt/tusk /opt/tusk") for i in final)
    assert not any("apt-get" in i or "build-essential" in i or "gcc" in i for i in final)
    assert any(i.startswith("USER tusk") for i in final) and 'VOLUME ["/data"]' in final
    assert any(i.startswith("ENV ") and "TUSK_HOME=/data" in i for i in final)  # not the user data dir default
    health = next(i for i in final if i.startswith("HEALTHCHECK"))
    assert "/healthz" in health
    assert 'ENTRYPOINT ["tusk"]' in final and 'CMD ["run"]' in final
    for instruction in build:
        if instruction.startswith("COPY ") and "--from" not in instruction:
            for source in instruction.split()[1:-1]:
                assert (ROOT / source).exists(), source
    assert '".[all]"' in " ".join(build) and "test" not in " ".join(build)  # no dev dependencies
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    copied = {i.split()[1] for i in build if i.startswith("COPY ") and "--from" not in i}
    assert {name.rstrip("*") for name in packages["include"]} <= copied  # every package reaches the image


def test_compose_file_uses_env_file_volume_and_restart():
    """docker-compose.yml builds the image, reads ../.env, keeps /data on a volume and restarts."""
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    tusk = compose["services"]["tusk"]
    assert tusk["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert tusk["env_file"] == "../.env" and tusk["restart"] == "unless-stopped"
    assert "tusk-data:/data" in tusk["volumes"] and "tusk-data" in compose["volumes"]


def template_unit(role: str, folder: Path) -> Path:
    """deploy/tusk@.service as systemd loads it for `tusk@ROLE.service` (a copy under that name)."""
    path = folder / f"tusk@{role}.service"
    path.write_text((DEPLOY / "tusk@.service").read_text())
    return path


def test_template_unit_runs_its_instance_as_the_role_on_a_home_of_its_own(tmp_path):
    """tusk@ROLE.service runs `tusk run --role ROLE` with its own home and optional ROLE.env, hardened as
    tusk.service is, and passes systemd-analyze verify and security (at most 2.0) as tusk@worker."""
    single, template = unit(DEPLOY / "tusk.service")["Service"], unit(DEPLOY / "tusk@.service")["Service"]
    assert template["ExecStart"] == "/usr/bin/env TUSK_HOME=/var/lib/tusk/%i /opt/tusk/venv/bin/tusk run --role %i"
    text = (DEPLOY / "tusk@.service").read_text()
    assert "EnvironmentFile=/etc/tusk/tusk.env\nEnvironmentFile=-/etc/tusk/%i.env\n" in text  # the role's after
    assert template["StateDirectory"] == "tusk/%i" and template["ReadWritePaths"] == "/var/lib/tusk/%i"
    assert "TUSK_HOME" not in template["Environment"]  # the settings file's TUSK_HOME would override it
    for key in ("User", "Restart", "KillSignal", "TimeoutStopSec", "UMask", "LimitNOFILE", "NoNewPrivileges",
                "ProtectSystem", "ProtectHome", "PrivateTmp", "ProtectProc", "ProcSubset", "PrivateUsers",
                "RemoveIPC", "CapabilityBoundingSet", "RestrictAddressFamilies", "SystemCallArchitectures"):
        assert template[key] == single[key], key
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here")
    worker = template_unit("worker", tmp_path)
    done = procs.run(["systemd-analyze", "verify", str(worker)], env=procs.clean_env(), capture_output=True,
                     text=True, timeout=60)
    assert done.returncode == 0 and "tusk@worker" not in done.stderr, done.stderr
    done = procs.run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(worker)],
                     env=procs.clean_env(), capture_output=True, text=True, timeout=60)
    score = re.search(r"Overall exposure level for tusk@worker\.service: ([0-9.]+)", done.stdout)
    assert score and float(score[1]) <= 2.0, done.stdout[-500:]


REQUIRED = re.compile(r"\$\{(\w+):\?([^}]+)\}")  # compose's ${NAME:?message}: start refused, with the message


def cluster(**values: str) -> dict:
    """The cluster file as compose reads it with `--env-file` holding `values`: each ${NAME:?...} replaced."""
    text = (DEPLOY / "docker-compose.cluster.yml").read_text()
    assert "${" not in REQUIRED.sub("", text)  # every variable is a required one, with its message
    return yaml.safe_load(REQUIRED.sub(lambda m: values[m[1]], text))


def test_cluster_compose_has_postgres_two_ingress_three_workers_and_a_balancer():
    """The cluster file: PostgreSQL, 2 ingress and 3 workers of the image (`tusk run --role ...`), each on the
    database by its service name once it is healthy, its own home, ready when /readyz answers; HAProxy in
    front of the ingress on the host's loopback."""
    from urllib.parse import urlsplit

    text = (DEPLOY / "docker-compose.cluster.yml").read_text()
    assert {name for name, _ in REQUIRED.findall(text)} == {"POSTGRES_PASSWORD", "TUSK_HTTP_TOKEN"}
    assert all("../.env" in message for _, message in REQUIRED.findall(text))
    compose = cluster(POSTGRES_PASSWORD="pw123", TUSK_HTTP_TOKEN="t" * 40)
    services = compose["services"]
    assert set(services) == {"postgres", "ingress", "worker", "lb"}
    postgres = services["postgres"]
    assert postgres["image"].startswith("postgres:") and "pg_isready" in postgres["healthcheck"]["test"]
    assert "pg-data:/var/lib/postgresql/data" in postgres["volumes"] and "pg-data" in compose["volumes"]
    for role, replicas in (("ingress", 2), ("worker", 3)):
        tusk = services[role]
        assert tusk["command"] == ["run", "--role", role] and tusk["deploy"]["replicas"] == replicas
        assert tusk["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"} and tusk["image"] == "tusk:latest"
        assert tusk["env_file"] == "../.env" and tusk["restart"] == "unless-stopped"
        env = tusk["environment"]
        database = urlsplit(env["TUSK_DATABASE_URL"])
        assert (database.scheme, database.hostname, database.port, database.path) == (
            "postgresql", "postgres", 5432, "/" + postgres["environment"]["POSTGRES_DB"])
        assert database.username == postgres["environment"]["POSTGRES_USER"]
        assert database.password == postgres["environment"]["POSTGRES_PASSWORD"] == "pw123"
        assert env["TUSK_HOME"] == "/data" and "volumes" not in tusk  # a home of its own: no shared /data
        assert env["TUSK_HTTP_HOST"] == "0.0.0.0" and env["TUSK_HTTP_TOKEN"] == "t" * 40
        assert tusk["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        check = " ".join(tusk["healthcheck"]["test"])
        assert "/readyz" in check and "/healthz" not in check and tusk["healthcheck"]["retries"] >= 1
        assert tusk["stop_grace_period"] == "45s"  # longer than TUSK_SHUTDOWN_GRACE's 30 s: SIGTERM drains
    lb = services["lb"]
    assert lb["image"].startswith("haproxy:") and lb["depends_on"] == ["ingress"]
    assert lb["ports"] == ["127.0.0.1:8765:8765"]
    [mount] = lb["volumes"]
    source, target, mode = mount.split(":")
    assert (DEPLOY / source).is_file() and target == "/usr/local/etc/haproxy/haproxy.cfg" and mode == "ro"


def test_the_balancer_sends_requests_only_to_ready_ingress():
    """haproxy.cfg: its one backend is the ingress service's replicas, health-checked on /readyz (200), and
    HAProxy itself finds the file valid (when installed here)."""
    cfg = (DEPLOY / "haproxy.cfg").read_text()
    lines = [line.split("#")[0].strip() for line in cfg.splitlines()]
    backend = lines[lines.index("backend ingress") + 1:]
    assert "http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host ingress" in backend
    assert "http-check expect status 200" in backend and "option httpchk" in backend
    assert "server-template ingress- 4 ingress:8765" in backend and "bind :8765" in lines
    assert any(line.startswith("default-server check ") for line in backend)
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed here")
    done = procs.run(["haproxy", "-c", "-f", str(DEPLOY / "haproxy.cfg")], env=procs.clean_env(),
                     capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
