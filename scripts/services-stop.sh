#!/usr/bin/env bash
# npm run services:stop: stops the PostgreSQL cluster and redis-server that scripts/provision.sh
# started (as recorded in $RUN_DIR/provisioned, default .run/), and nothing else: services that were
# already running when provision.sh looked are not recorded and keep running.
set -euo pipefail

RUN_DIR="${RUN_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.run}"
STATE="$RUN_DIR/provisioned"

log() { printf '[services] %s\n' "$*"; }
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else log "need root for: $*"; return 1; fi; }
reachable() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_gone() { # port name
  for _ in $(seq 1 40); do reachable "$1" || return 0; sleep 0.25; done
  log "$2 still answers on port $1"; return 1
}

stop_postgres() { # port version cluster
  log "stopping PostgreSQL $2 cluster $3 (port $1)"
  as_root pg_ctlcluster --skip-systemctl-redirect "$2" "$3" stop 2>/dev/null || as_root pg_ctlcluster "$2" "$3" stop
  wait_gone "$1" PostgreSQL
}

stop_redis() { # port pidfile
  local pid=""
  [[ -f "$2" ]] && pid=$(cat "$2")
  # Only the redis-server that provision.sh started: the pid file's process, if it still is one.
  if [[ -z "$pid" || ! -e "/proc/$pid" || "$(cat "/proc/$pid/comm" 2>/dev/null)" != redis-server* ]]; then
    log "Redis on port $1 is not running any more"
    rm -f "$2"
    return 0
  fi
  log "stopping Redis on port $1 (pid $pid)"
  kill -TERM "$pid"
  wait_gone "$1" Redis
  rm -f "$2"
}

if [[ ! -s "$STATE" ]]; then
  log "nothing to stop: provision.sh started no service here (those already running are left alone)"
  exit 0
fi

failed=0
remaining=()
while read -r service port a b; do
  [[ -z "${service:-}" ]] && continue
  case "$service" in
    postgres) stop_postgres "$port" "$a" "$b" || { failed=1; remaining+=("$service $port $a $b"); } ;;
    redis) stop_redis "$port" "$a" || { failed=1; remaining+=("$service $port $a"); } ;;
    *) log "unknown entry: $service $port $a $b"; remaining+=("$service $port $a $b") ;;
  esac
done <"$STATE"

if [[ ${#remaining[@]} -eq 0 ]]; then rm -f "$STATE"; else printf '%s\n' "${remaining[@]}" >"$STATE"; fi
exit $failed
