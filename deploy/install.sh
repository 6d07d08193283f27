#!/usr/bin/env bash
# Install or upgrade Tusk on Debian/Ubuntu, from this checkout:
#   a system user `tusk`, a venv under /opt/tusk, settings in /etc/tusk/tusk.env (mode 600, never
#   overwritten), data in /var/lib/tusk (never touched), the systemd unit, enabled.
# Run it again after `git pull` to upgrade in place.
#
#   sudo deploy/install.sh                 # the real thing
#   deploy/install.sh --prefix /tmp/t --no-systemd   # everything under /tmp/t, no user, no systemctl
set -euo pipefail

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

prefix="" systemd=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --no-systemd) systemd=0; shift ;;
    -h|--help) usage 0 ;;
    *) echo "install.sh: unknown option $1" >&2; usage 2 >&2 ;;
  esac
done

src="$(cd "$(dirname "$0")/.." && pwd)"
opt="$prefix/opt/tusk" etc="$prefix/etc/tusk" data="$prefix/var/lib/tusk"
unit_dir="$prefix/etc/systemd/system" bin_dir="$prefix/usr/local/bin"
real=0; [ -z "$prefix" ] && real=1

if [ "$real" = 1 ] && [ "$(id -u)" != 0 ]; then
  echo "install.sh: run it as root (sudo), or use --prefix DIR --no-systemd to try it out" >&2; exit 1
fi
command -v python3 >/dev/null || { echo "install.sh: python3 (3.11 or newer) is needed: apt install python3 python3-venv" >&2; exit 1; }
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "install.sh: Python 3.11 or newer is needed" >&2; exit 1; }

step() { printf '==> %s\n' "$*"; }

if [ "$real" = 1 ] && ! id tusk >/dev/null 2>&1; then
  step "creating system user tusk"
  useradd --system --home-dir /var/lib/tusk --no-create-home --shell /usr/sbin/nologin tusk
fi

step "installing Tusk into $opt/venv"
mkdir -p "$opt"
[ -x "$opt/venv/bin/python" ] || python3 -m venv "$opt/venv"
"$opt/venv/bin/pip" install --quiet --upgrade pip
"$opt/venv/bin/pip" install --quiet --upgrade "$src[all]"

if [ -f "$etc/tusk.env" ]; then
  step "keeping your settings in $etc/tusk.env"
else
  step "writing $etc/tusk.env from .env.example (edit it: TUSK_MODEL, keys, platform tokens)"
  mkdir -p "$etc"
  (umask 077; sed "s|^TUSK_HOME=.*|TUSK_HOME=/var/lib/tusk|" "$src/.env.example" > "$etc/tusk.env")
fi
chmod 600 "$etc/tusk.env"

mkdir -p "$data"
chmod 700 "$data"
[ "$real" = 1 ] && chown tusk:tusk "$data"

step "installing the admin command $bin_dir/tusk"
mkdir -p "$bin_dir"
cat > "$bin_dir/tusk" <<WRAPPER
#!/bin/sh
# Tusk's CLI with the service's settings (tusk doctor, tusk chats, tusk forget, ...).
exec env TUSK_ENV_FILE="$etc/tusk.env" TUSK_HOME="$data" LITELLM_LOCAL_MODEL_COST_MAP=True "$opt/venv/bin/tusk" "\$@"
WRAPPER
chmod 755 "$bin_dir/tusk"

step "installing the systemd unit $unit_dir/tusk.service"
mkdir -p "$unit_dir"
sed -e "s|/opt/tusk|$opt|g" -e "s|/etc/tusk|$etc|g" -e "s|/var/lib/tusk|$data|g" \
  "$src/deploy/tusk.service" > "$unit_dir/tusk.service"

if [ "$systemd" = 1 ]; then
  systemctl daemon-reload
  systemctl enable tusk >/dev/null
  systemctl try-restart tusk
  step "done. Next: edit $etc/tusk.env, then: systemctl start tusk && tusk doctor && journalctl -u tusk -f"
else
  step "done (no systemd). Try: TUSK_ENV_FILE=$etc/tusk.env $opt/venv/bin/tusk doctor"
fi
