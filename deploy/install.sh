#!/usr/bin/env bash
# Install or upgrade Tusk on Debian/Ubuntu, from this checkout:
#   a system user `tusk`, a venv under /opt/tusk, settings in /etc/tusk/tusk.env (mode 600, never
#   overwritten), data in /var/lib/tusk (never touched), the systemd unit, enabled.
# Run it again after `git pull` to upgrade in place.
#
#   sudo deploy/install.sh                 # the real thing
#   deploy/install.sh --prefix /tmp/t      # everything under /tmp/t: no user, never systemctl (the unit is
#                                          # written there, not installed); --no-systemd: no systemctl at all
set -euo pipefail

# --help: the comment block above, without its `# ` (and nothing else of this file)
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit "${1:-0}"; }

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

step "installing the systemd units $unit_dir/tusk.service and tusk@.service (tusk@ROLE: docs, Scaling out)"
mkdir -p "$unit_dir"
for unit in tusk.service tusk@.service; do
  sed -e "s|/opt/tusk|$opt|g" -e "s|/etc/tusk|$etc|g" -e "s|/var/lib/tusk|$data|g" \
    "$src/deploy/$unit" > "$unit_dir/$unit"
done

# systemctl only for the real thing: a --prefix install never touches this machine's systemd (system or user)
if [ "$systemd" = 1 ] && [ "$real" = 1 ]; then
  systemctl daemon-reload
  systemctl enable tusk >/dev/null
  systemctl try-restart tusk
  step "done: the tusk service is enabled (it starts at boot). Next:"
  echo "    sudo tusk init      # asks for the model, its key and the platforms; writes $etc/tusk.env"
  echo "    sudo systemctl start tusk && sudo tusk doctor && journalctl -u tusk -f"
elif [ "$real" = 1 ]; then
  step "done: the unit is $unit_dir/tusk.service, systemctl not run (--no-systemd). Next:"
  echo "    sudo tusk init      # asks for the model, its key and the platforms; writes $etc/tusk.env"
  echo "    sudo systemctl daemon-reload && sudo systemctl enable --now tusk && sudo tusk doctor"
else
  step "done: installed under $prefix; systemctl not run (the unit is $unit_dir/tusk.service, not enabled). Next:"
  echo "    $bin_dir/tusk init      # asks for the model, its key and the platforms; writes $etc/tusk.env"
  echo "    $bin_dir/tusk doctor && $bin_dir/tusk run"
fi
