#!/usr/bin/env bash
# Make sure Redis and PostgreSQL are installed and running locally (Debian),
# so that `make test` works on a fresh machine. Idempotent; quick when all is up.
#
# Usage: scripts/ensure-services.sh [cmd:package ...]
#   Each optional argument names a command and the Debian package providing
#   it; the package is installed with apt-get when the command is missing,
#   e.g.  scripts/ensure-services.sh espeak-ng:espeak-ng pdftotext:poppler-utils
set -euo pipefail

REDIS_HOST=127.0.0.1
REDIS_PORT=6379
PG_HOST=127.0.0.1
PG_PORT=5432
WAIT_SECONDS=30

log() { echo "ensure-services: $*"; }
die() { echo "ensure-services: ERROR: $*" >&2; exit 1; }
# A command on the PATH, or (an absolute path) a file a package installs, like a tesseract language pack.
have() { case "$1" in /*) [ -e "$1" ] ;; *) command -v "$1" >/dev/null 2>&1 ;; esac; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if have sudo; then
        SUDO="sudo"
    else
        log "not root and sudo not found; installs/starts may fail"
    fi
fi

export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=0
# Another package install running on the host (an unattended upgrade, a second checkout's `make`) holds dpkg's lock
# for a while; wait for it rather than fail the suite.
APT_LOCK="-o DPkg::Lock::Timeout=600"
apt_install() {
    have apt-get || die "apt-get not found; install manually: $*"
    if [ "$APT_UPDATED" -eq 0 ]; then
        log "apt-get update"
        $SUDO apt-get $APT_LOCK update -qq
        APT_UPDATED=1
    fi
    log "apt-get install $*"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get $APT_LOCK install -y -qq --no-install-recommends "$@" >/dev/null
}

# wait_for DESCRIPTION COMMAND...: retry COMMAND until it succeeds or WAIT_SECONDS pass.
wait_for() {
    local what="$1"; shift
    local deadline=$((SECONDS + WAIT_SECONDS))
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            die "$what not ready after ${WAIT_SECONDS}s"
        fi
        sleep 0.3
    done
}

# ---------------------------------------------------------------- extra packages
# --no-services: only install the named packages (make demo needs espeak-ng, not the servers).
want_services=1
if [ "${1:-}" = "--no-services" ]; then
    want_services=0
    shift
fi
missing_pkgs=()
for spec in "$@"; do
    case "$spec" in
        *:*) cmd="${spec%%:*}"; pkg="${spec#*:}" ;;
        *) die "bad argument '$spec' (expected cmd:package)" ;;
    esac
    [ -n "$cmd" ] && [ -n "$pkg" ] || die "bad argument '$spec' (expected cmd:package)"
    if ! have "$cmd"; then
        missing_pkgs+=("$pkg")
    fi
done

# ---------------------------------------------------------------- installs
if [ "$want_services" = 1 ] && { ! have redis-server || ! have redis-cli; }; then
    missing_pkgs+=(redis-server)
fi

pg_installed() {
    have pg_ctlcluster && [ -d /etc/postgresql ] && [ -n "$(ls -A /etc/postgresql 2>/dev/null)" ]
}
if [ "$want_services" = 1 ] && ! pg_installed; then
    missing_pkgs+=(postgresql)
fi

if [ "${#missing_pkgs[@]}" -gt 0 ]; then
    apt_install "${missing_pkgs[@]}"
fi
for spec in "$@"; do
    cmd="${spec%%:*}"
    have "$cmd" || die "command '$cmd' still missing after installing '${spec#*:}'"
done
[ "$want_services" = 1 ] || exit 0

# ---------------------------------------------------------------- redis
redis_ping() {
    [ "$(timeout 3 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]
}
if redis_ping; then
    log "redis ok ($REDIS_HOST:$REDIS_PORT)"
else
    log "starting redis on $REDIS_HOST:$REDIS_PORT"
    $SUDO mkdir -p /var/lib/redis /var/log/redis
    $SUDO redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
        --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
    wait_for "redis" redis_ping
    log "redis started"
fi

# ---------------------------------------------------------------- postgresql
have pg_ctlcluster || die "pg_ctlcluster not found after installing postgresql"
PG_VERSION="$(ls /etc/postgresql | sort -V | tail -1)"
[ -n "$PG_VERSION" ] || die "no PostgreSQL cluster version under /etc/postgresql"
PG_CONF_DIR="/etc/postgresql/$PG_VERSION/main"
if [ ! -d "$PG_CONF_DIR" ]; then
    log "creating PostgreSQL $PG_VERSION cluster 'main'"
    $SUDO pg_createcluster "$PG_VERSION" main >/dev/null
fi

pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 2; }
if pg_ready; then
    log "postgresql ok ($PG_HOST:$PG_PORT)"
else
    log "starting postgresql $PG_VERSION/main"
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main start || true
    wait_for "postgresql" pg_ready
    log "postgresql started"
fi

# Passwordless TCP access as postgres from localhost (-w: never prompt).
pg_login() {
    PGCONNECT_TIMEOUT=3 psql -w -X -q -h "$PG_HOST" -p "$PG_PORT" -U postgres \
        -d postgres -tA -c 'select 1' </dev/null >/dev/null 2>&1
}
if ! pg_login; then
    HBA="$PG_CONF_DIR/pg_hba.conf"
    log "enabling trust auth for 127.0.0.1 and ::1 in $HBA"
    [ -f "$HBA" ] || $SUDO test -f "$HBA" || die "$HBA not found"
    tmp="$(mktemp)"
    trap 'rm -f "$tmp"' EXIT
    {
        echo "# added by scripts/ensure-services.sh (local test setup)"
        echo "host all all 127.0.0.1/32 trust"
        echo "host all all ::1/128 trust"
        $SUDO cat "$HBA" | grep -v '^# added by scripts/ensure-services.sh' \
            | grep -Ev '^host[[:space:]]+all[[:space:]]+all[[:space:]]+(127\.0\.0\.1/32|::1/128)[[:space:]]+trust[[:space:]]*$' || true
    } >"$tmp"
    # Overwrite in place so owner/mode (postgres, 0640) are preserved.
    $SUDO tee "$HBA" <"$tmp" >/dev/null
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main reload
    wait_for "postgresql login as postgres over TCP" pg_login
    log "postgresql trust auth enabled"
fi

log "all services ready"
