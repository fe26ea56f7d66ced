#!/usr/bin/env bash
# Install the inspection appliance on a fresh Debian or Ubuntu box:
#   system packages, a service user, a virtual environment with the product, config under /etc,
#   the kiosk's systemd unit and the operator dashboard's desktop entry.
# Run from a checkout as root:   sudo installer/install.sh [options]
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX=/opt/inspector
DATA=/var/lib/inspector
CONF=/etc/inspector
USER_NAME=inspector
DEST=""           # stage into DEST (a package build or a test) instead of the live system
APT=1 SYSTEMD=1 MAKE_USER=1 DEMO_ZOO=0 SITE_PACKAGES=0 IMAGE_ONLY=0 DESKTOP=1 TLS_CERT= TLS_KEY= TLS_HOSTS=
EXTRAS=gui,postgres  # the dashboard and the PostgreSQL driver; the headless line needs neither
PYTHON=python3    # the interpreter the virtual environment is made from

usage() {
  cat <<USAGE
usage: install.sh [--prefix DIR] [--data DIR] [--conf DIR] [--user NAME] [--dest DIR]
                  [--no-apt] [--no-systemd] [--no-user] [--system-site-packages [--image-only]] [--demo-zoo]
                  [--python PY]
                  [--extras LIST] [--headless]
  --prefix DIR             program files and virtual environment (default $PREFIX)
  --data DIR               results database, spool, crops, models, inbox (default $DATA)
  --conf DIR               inspector.yaml, kiosk.env (secrets), the API token (default $CONF)
  --user NAME              service user (default $USER_NAME)
  --dest DIR               stage everything under DIR; implies --no-systemd --no-user
  --no-apt                 do not install Debian packages
  --no-systemd             do not reload, enable or start the unit
  --no-user                do not create the service user
  --system-site-packages   let the venv use the Python packages of the interpreter --python names (the box's
                           image: its torch build above all); what the image lacks is checked before anything is
                           touched and added to the venv, never replacing the image's torch and torchvision
  --image-only             with --system-site-packages: add nothing; stop, naming what the image lacks
  --demo-zoo               train the demo experts now (about 15 minutes on 2 cores) instead of on first start
  --tls-cert F --tls-key F  the plant's certificate and key for the APIs (default: a self-signed pair, made here)
  --tls-host NAME          a name or address clients reach the box by, for the self-signed pair (repeat)
  --python PY              the Python the virtual environment is made from (default python3); with
                           --system-site-packages it may be a venv's or a conda env's (its packages are used)
  --extras LIST            optional parts: gui, llm, postgres, genicam, openvino, all (default $EXTRAS; "" for none)
  --headless               a line box without a screen: no extras, no desktop entry
USAGE
}

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    --conf) CONF="$2"; shift 2 ;;
    --user) USER_NAME="$2"; shift 2 ;;
    --dest) DEST="$2"; SYSTEMD=0; MAKE_USER=0; shift 2 ;;
    --no-apt) APT=0; shift ;;
    --no-systemd) SYSTEMD=0; shift ;;
    --no-user) MAKE_USER=0; shift ;;
    --system-site-packages) SITE_PACKAGES=1; shift ;;
    --image-only) IMAGE_ONLY=1; shift ;;
    --demo-zoo) DEMO_ZOO=1; shift ;;
    --tls-cert) TLS_CERT="$2"; shift 2 ;;
    --tls-key) TLS_KEY="$2"; shift 2 ;;
    --tls-host) TLS_HOSTS="$TLS_HOSTS --host $2"; shift 2 ;;
    --python) PYTHON="$2"; shift 2 ;;
    --extras) EXTRAS="$2"; shift 2 ;;
    --headless) EXTRAS=""; DESKTOP=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

say() { echo "install: $*"; }
need_root() {
  if [ "$(id -u)" -ne 0 ]; then echo "install.sh: $1 needs root; run with sudo (or use --dest to stage)" >&2; exit 1; fi
}

if [ "$APT" = 1 ]; then
  need_root "installing Debian packages"
  say "Debian packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # python, OpenCV's and Qt's runtime libraries (the dashboard), fonts for the dashboard
  apt-get install -y -qq python3 python3-venv python3-pip libgl1 libglib2.0-0 libegl1 libxkbcommon-x11-0 \
    libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 libxcb-xkb1 \
    libxcb-randr0 libfontconfig1 libdbus-1-3 fonts-dejavu-core >/dev/null
fi

# A venv: with --system-site-packages it borrows the packages of the interpreter --python names. Python chains a
# venv to its base interpreter only, so when that interpreter is itself a venv (an image kept in one), its
# site-packages are added here by a .pth file, in its order and with its own .pth files, ahead of the base's. The
# image's own pip installs into the venv when it has one: a bundled pip and setuptools would shadow the image's.
make_venv() {  # DIR
  if [ "$SITE_PACKAGES" != 1 ]; then
    "$PYTHON" -m venv "$1"
    return 0
  fi
  "$PYTHON" -m venv --system-site-packages --without-pip "$1"
  local site
  site="$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$PYTHON" - "$site" <<'PTH'
import site, sys
from pathlib import Path
if sys.prefix != sys.base_prefix:  # a venv: pass its site-packages on
    own = Path(sys.prefix).resolve()
    dirs = [d for d in site.getsitepackages() if Path(d).resolve().is_relative_to(own)]
    line = "import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs)
    Path(sys.argv[1], "_inspector_image.pth").write_text(line + "\n")
PTH
  "$1/bin/python" -m pip --version >/dev/null 2>&1 || "$1/bin/python" -m ensurepip -q --default-pip
}

CHECK_DIR=""
if [ "$SITE_PACKAGES" = 1 ]; then
  # before anything is touched: a throwaway venv made the same way says what the image lacks
  CHECK_DIR="$(mktemp -d)"
  trap 'rm -rf "$CHECK_DIR"' EXIT
  make_venv "$CHECK_DIR/venv"
  say "what the image ($PYTHON) provides"
  set +e
  "$CHECK_DIR/venv/bin/python" "$SRC/installer/check_image.py" --pyproject "$SRC/pyproject.toml" \
    --extras "$EXTRAS" --image "$PYTHON" --missing-out "$CHECK_DIR/missing.txt" --pins-out "$CHECK_DIR/pins.txt" | sed 's/^/  /'
  CHECK=${PIPESTATUS[0]}
  set -e
  MISSING="$(tr '\n' ' ' < "$CHECK_DIR/missing.txt" 2>/dev/null || true)"
  if [ "$CHECK" = 2 ]; then
    echo "install.sh: the image's torch does not meet the product's needs (above), and the installer never replaces" \
      "the image's build. Install a torch (and torchvision) that does into the image ($PYTHON), or run without" \
      "--system-site-packages to take the generic wheels from the package index. Nothing was installed." >&2
    exit 1
  elif [ "$CHECK" = 1 ] && [ "$IMAGE_ONLY" = 1 ]; then
    echo "install.sh: the image lacks what the product needs (above): $MISSING" >&2
    echo "  add them to the image:  $PYTHON -m pip install $(sed "s/.*/'&'/" "$CHECK_DIR/missing.txt" | tr '\n' ' ')" >&2
    echo "  or run without --image-only: the installer adds them to $PREFIX/venv (the image's torch stays as it is)." >&2
    echo "  Nothing was installed." >&2
    exit 1
  elif [ "$CHECK" = 1 ]; then
    say "  adding to the venv what the image lacks: $MISSING(the image's torch and torchvision are kept as they are)"
  elif [ "$CHECK" != 0 ]; then
    echo "install.sh: the check of the image failed (exit $CHECK, above); nothing was installed" >&2
    exit 1
  fi
fi

if [ "$MAKE_USER" = 1 ] && ! id "$USER_NAME" >/dev/null 2>&1; then
  need_root "creating the service user"
  say "service user $USER_NAME"
  useradd --system --home-dir "$DATA" --shell /usr/sbin/nologin --user-group "$USER_NAME"
fi

R="$DEST"
install -d "$R$PREFIX" "$R$DATA" "$R$DATA/inbox" "$R$DATA/models" "$R$DATA/routing_rules" "$R$CONF"
install -d -m 0750 "$R/var/backups/inspector"  # the daily backup's folder (inspector-backup.service)
TARGET="$SRC"
[ -n "$EXTRAS" ] && TARGET="$SRC[$EXTRAS]"

say "virtual environment $PREFIX/venv"
make_venv "$R$PREFIX/venv"
PIP=("$R$PREFIX/venv/bin/python" -m pip install -q)
if [ "$SITE_PACKAGES" = 1 ]; then
  # the image's packages stay as they are (pins); what it lacks (checked above) comes from the index into the venv
  "${PIP[@]}" -c "$CHECK_DIR/pins.txt" "$TARGET"
else
  "${PIP[@]}" "$TARGET"
fi
install -m 0644 "$SRC/README.md" "$R$PREFIX/README.md"

render() {  # template -> target, with this install's paths
  sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@DATA@|$DATA|g" -e "s|@CONF@|$CONF|g" -e "s|@USER@|$USER_NAME|g" "$1" > "$2"
}

say "configuration $CONF, rules $DATA/routing_rules (existing files are kept)"
# the rules are edited over the API and the dashboard, so they live where the kiosk may write: the data directory
for f in "$SRC"/routing_rules/*.yaml; do
  [ -e "$R$DATA/routing_rules/$(basename "$f")" ] || install -m 0664 "$f" "$R$DATA/routing_rules/"
done
[ -e "$R$CONF/inspector.yaml" ] || { render "$SRC/installer/inspector.yaml" "$R$CONF/inspector.yaml"; chmod 0644 "$R$CONF/inspector.yaml"; }
[ -e "$R$CONF/kiosk.env" ] || { render "$SRC/installer/kiosk.env" "$R$CONF/kiosk.env"; chmod 0640 "$R$CONF/kiosk.env"; }
[ -e "$R$CONF/llm.env" ] || { render "$SRC/installer/llm.env" "$R$CONF/llm.env"; chmod 0640 "$R$CONF/llm.env"; }
# the API token that rule and memory edits over HTTP need: random, readable by the service user only
if [ ! -e "$R$CONF/api-token" ]; then
  (umask 077; "$R$PREFIX/venv/bin/python" -c 'import secrets; print(secrets.token_urlsafe(32))' > "$R$CONF/api-token")
fi
chmod 0600 "$R$CONF/api-token"
# TLS for the kiosk's API and the model server: the plant's own pair when given (--tls-cert/--tls-key copied to
# $CONF/tls), else a self-signed one made here; clients pin its fingerprint (printed now, and by
# `inspector tls fingerprint $CONF/tls/cert.pem`). Plain HTTP is served on loopback only.
if [ -n "$TLS_CERT" ]; then
  install -d -m 0750 "$R$CONF/tls"
  install -m 0644 "$TLS_CERT" "$R$CONF/tls/cert.pem"
  install -m 0600 "$TLS_KEY" "$R$CONF/tls/key.pem"
else
  "$R$PREFIX/venv/bin/inspector" tls make --out "$R$CONF/tls" --host "$(hostname)" ${TLS_HOSTS:+$TLS_HOSTS} | sed 's/^/  /'
fi
say "TLS certificate $CONF/tls/cert.pem, fingerprint $("$R$PREFIX/venv/bin/inspector" tls fingerprint "$R$CONF/tls/cert.pem")"
say "  dashboards and CLIs elsewhere trust it with: --tls-pin <that fingerprint> (or --tls-ca cert.pem)"

say "systemd units (kiosk, daily retention, daily backup) and desktop entry"
install -d "$R/etc/systemd/system" "$R/usr/share/applications"
render "$SRC/installer/inspector-kiosk.service" "$R/etc/systemd/system/inspector-kiosk.service"
render "$SRC/installer/inspector-prune.service" "$R/etc/systemd/system/inspector-prune.service"
render "$SRC/installer/inspector-prune.timer" "$R/etc/systemd/system/inspector-prune.timer"
render "$SRC/installer/inspector-backup.service" "$R/etc/systemd/system/inspector-backup.service"
render "$SRC/installer/inspector-backup.timer" "$R/etc/systemd/system/inspector-backup.timer"
render "$SRC/installer/inspector-llm.service" "$R/etc/systemd/system/inspector-llm.service"  # not enabled here
[ "$DESKTOP" = 1 ] && render "$SRC/installer/inspector-dashboard.desktop" "$R/usr/share/applications/inspector-dashboard.desktop"
install -d "$R$PREFIX/share"
install -m 0644 "$SRC/installer/grafana-inspector.json" "$R$PREFIX/share/grafana-inspector.json"
install -m 0644 "$SRC/installer/prometheus-alerts.yml" "$R$PREFIX/share/prometheus-alerts.yml"
install -m 0644 "$SRC/installer/postgres-roles.sql" "$R$PREFIX/share/postgres-roles.sql"

if [ "$MAKE_USER" = 1 ]; then
  chown -R "$USER_NAME:$USER_NAME" "$DATA" /var/backups/inspector
  # operators in the group may edit the rules the kiosk watches; the config is root's, readable by the service
  chown -R "root:$USER_NAME" "$CONF"
  chmod 2775 "$DATA/routing_rules"
  chown "$USER_NAME:$USER_NAME" "$CONF/api-token"  # the kiosk's service token: the model server's lease
  chown "$USER_NAME:$USER_NAME" "$CONF/tls/key.pem"  # the kiosk and the model server read it
fi

if [ "$DEMO_ZOO" = 1 ]; then
  say "training the demo experts (about 15 minutes)"
  run_as=()
  [ "$MAKE_USER" = 1 ] && run_as=(runuser -u "$USER_NAME" --)
  (cd "$R$DATA" && "${run_as[@]}" env INSPECTOR_CONFIG="$R$CONF/inspector.yaml" YOLO_OFFLINE=1 \
    "$R$PREFIX/venv/bin/inspector" --models "$R$DATA/models" zoo build --demo)
fi

if [ "$SYSTEMD" = 1 ]; then
  need_root "enabling the service"
  systemctl daemon-reload
  systemctl enable --now inspector-kiosk.service inspector-prune.timer inspector-backup.timer
  say "inspector-kiosk is running: systemctl status inspector-kiosk; curl -s 127.0.0.1:9107/health"
  say "make the first admin: sudo -u $USER_NAME $PREFIX/venv/bin/inspector user add NAME --role admin"
else
  say "staged under ${DEST:-/}; start with: systemctl daemon-reload && systemctl enable --now inspector-kiosk"
fi
