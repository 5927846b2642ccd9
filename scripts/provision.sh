#!/usr/bin/env bash
# Makes sure PostgreSQL and Redis answer at DATABASE_URL / REDIS_URL. When one is not reachable and
# its URL points at this machine, it is installed from Debian's packages (if missing) and started.
# It also installs Debian's chromium (the data export's PDF report) when CHROMIUM_PATH is missing, the
# report's fonts (Noto CJK, Noto Color Emoji) when fontconfig does not list them, and
# with PROVISION_TEST_TOOLS=1 (scripts/test.sh) poppler-utils' pdftotext. Safe to run again: reachable
# services are left alone. What it starts is recorded in $RUN_DIR/provisioned (default .run/, one
# line per service), so `npm run services:stop` (scripts/services-stop.sh) stops exactly those.
set -euo pipefail

RUN_DIR="${RUN_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.run}"
STATE="$RUN_DIR/provisioned"

DATABASE_URL="${DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/service}"
REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"

log() { printf '[provision] %s\n' "$*"; }
url_part() { node -e 'const u=new URL(process.argv[1]);const d={"postgres:":"5432","postgresql:":"5432","redis:":"6379"};const v={host:u.hostname,port:u.port||d[u.protocol],user:decodeURIComponent(u.username),password:decodeURIComponent(u.password)}[process.argv[2]];process.stdout.write(v||"")' "$1" "$2"; }
reachable() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
is_local() { [[ "$1" == "127.0.0.1" || "$1" == "localhost" || "$1" == "::1" ]]; }
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else log "need root for: $*"; return 1; fi; }

APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null || { log "no apt-get: install $* yourself"; return 1; }
  if [[ $APT_UPDATED -eq 0 ]]; then as_root apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# record <service> <port> <details…>: one line per started service, replacing an older line for it.
record() {
  mkdir -p "$RUN_DIR"
  touch "$STATE"
  grep -v -E "^$1 $2( |\$)" "$STATE" >"$STATE.tmp" || true
  echo "$*" >>"$STATE.tmp"
  mv "$STATE.tmp" "$STATE"
}

wait_for() { # host port name
  for _ in $(seq 1 60); do reachable "$1" "$2" && return 0; sleep 0.5; done
  log "$3 did not come up on $1:$2"; return 1
}

ensure_postgres() {
  local host port user password
  host=$(url_part "$DATABASE_URL" host); port=$(url_part "$DATABASE_URL" port)
  user=$(url_part "$DATABASE_URL" user); password=$(url_part "$DATABASE_URL" password)
  if reachable "$host" "$port"; then log "PostgreSQL reachable at $host:$port"; return 0; fi
  is_local "$host" || { log "PostgreSQL at $host:$port is not reachable and is not local"; return 1; }
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    log "installing PostgreSQL from Debian's packages"
    apt_install postgresql
  fi
  local version cluster=main
  version=$(ls /usr/lib/postgresql | sort -V | tail -1)
  # Never re-port an existing cluster: a different port gets a cluster of its own.
  if [[ -f "/etc/postgresql/$version/main/postgresql.conf" ]] && ! grep -Eq "^port\s*=\s*$port\b" "/etc/postgresql/$version/main/postgresql.conf"; then
    cluster="svc$port"
  fi
  if [[ ! -d "/etc/postgresql/$version/$cluster" ]]; then as_root pg_createcluster -p "$port" "$version" "$cluster" >/dev/null; fi
  log "starting PostgreSQL $version cluster $cluster on port $port"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start || as_root pg_ctlcluster "$version" "$cluster" start
  wait_for "$host" "$port" PostgreSQL
  record postgres "$port" "$version" "$cluster"
  # Give the URL's role its password so TCP logins with the URL work on Debian's default pg_hba.
  local role="${user:-postgres}" pw="${password:-postgres}"
  as_root su postgres -c "psql -q -p $port -c \"DO \\\$\\\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$role') THEN CREATE ROLE \\\"$role\\\" LOGIN SUPERUSER; END IF; END \\\$\\\$; ALTER ROLE \\\"$role\\\" PASSWORD '$pw';\"" >/dev/null
}

ensure_redis() {
  local host port
  host=$(url_part "$REDIS_URL" host); port=$(url_part "$REDIS_URL" port)
  if reachable "$host" "$port"; then log "Redis reachable at $host:$port"; return 0; fi
  is_local "$host" || { log "Redis at $host:$port is not reachable and is not local"; return 1; }
  command -v redis-server >/dev/null || { log "installing Redis from Debian's packages"; apt_install redis-server; }
  log "starting Redis on port $port"
  mkdir -p /tmp/redis-data "$RUN_DIR"
  local pidfile="$RUN_DIR/redis-$port.pid"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir /tmp/redis-data --logfile /tmp/redis-data/redis.log --pidfile "$pidfile"
  wait_for "$host" "$port" Redis
  record redis "$port" "$pidfile"
}

ensure_chromium() {
  local path="${CHROMIUM_PATH:-/usr/bin/chromium}"
  [[ -x "$path" ]] && { log "Chromium present at $path"; return 0; }
  log "installing Chromium from Debian's packages"
  apt_install chromium fonts-dejavu-core
}

# The report PDF's fonts (workers/export/documents.ts REPORT_FONTS): without them Chromium prints
# Chinese, Japanese, Korean and emoji as empty boxes. Checked apart from Chromium, which a machine
# may already have without them.
ensure_report_fonts() {
  # Read whole, not piped into grep -q: under pipefail, fc-list killed by SIGPIPE when grep stops
  # early fails the pipe, and the fonts were installed again on every run.
  local fonts
  fonts=$(command -v fc-list >/dev/null && fc-list : family || true)
  [[ $fonts == *'Noto Sans CJK'* && $fonts == *'Noto Color Emoji'* ]] && return 0
  log "installing the report fonts (DejaVu, Noto CJK, Noto Color Emoji) from Debian's packages"
  apt_install fontconfig fonts-dejavu-core fonts-noto-cjk fonts-noto-color-emoji
}

ensure_pdftotext() {
  command -v pdftotext >/dev/null && return 0
  log "installing pdftotext (poppler-utils) from Debian's packages"
  apt_install poppler-utils
}

ensure_postgres
ensure_redis
ensure_chromium || log "Chromium could not be installed: data exports fail until CHROMIUM_PATH names one"
ensure_report_fonts || log "the report fonts could not be installed: report.pdf prints CJK and emoji as boxes"
if [[ "${PROVISION_TEST_TOOLS:-0}" == "1" ]]; then ensure_pdftotext; fi
