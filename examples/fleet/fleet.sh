#!/usr/bin/env bash
# examples/fleet/fleet.sh — a fleet in one command (docs/src/operations/fleet-store.md): PostgreSQL, N `understudy serve`
# processes sharing it (default 2, on free loopback ports) and nginx in front (round robin,
# no stickiness), serving the healthplus example. Prints
#   fleet listening on http://127.0.0.1:PORT
# once everything answers, then runs until SIGINT/SIGTERM, which stops nginx, the servers
# (gracefully) and PostgreSQL, and removes what it created.
#
#   bash examples/fleet/fleet.sh                     # http://127.0.0.1:7777, 2 processes
#   FLEET_PROCS=3 FLEET_PORT=8080 bash examples/fleet/fleet.sh
#
# Knobs (env): FLEET_PORT (7777), FLEET_PROCS (2), FLEET_CONFIG (examples/healthplus/
# understudy.json), FLEET_DIR (a temp dir: logs, nginx prefix), FLEET_DATA (PostgreSQL data
# dir, default $FLEET_DIR/pgdata; an existing one is reused, so state survives a restart),
# UNDERSTUDY_BIN (default target/release/understudy, built when missing), FLEET_STORE (an
# existing postgres:// URL: no PostgreSQL is started).
# FLEET_ADMIN_TOKEN: the admin token of the control plane (`/_understudy/…`; default: a
# random one, written to $FLEET_DIR/admin-token). Why a token: behind nginx every request
# reaches the servers from loopback, so loopback cannot be what grants access — nginx adds
# X-Forwarded-For, and the fleet's project file (a copy of FLEET_CONFIG beside it) sets
# "trust_loopback": false and names the front address in "allowed_hosts" (the servers see
# nginx's Host, not their own port). Send `Authorization: Bearer $FLEET_ADMIN_TOKEN`.
# Needs Debian's postgresql and nginx-light (nginx) packages. As root, PostgreSQL runs as
# the user `pgtest` (created when missing): the server refuses to run as root.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PORT="${FLEET_PORT:-7777}"
PROCS="${FLEET_PROCS:-2}"
CONFIG="${FLEET_CONFIG:-$ROOT/examples/healthplus/understudy.json}"
OWN_DIR=0
if [ -z "${FLEET_DIR:-}" ]; then FLEET_DIR="$(mktemp -d /tmp/understudy-fleet-XXXXXX)"; OWN_DIR=1; fi
mkdir -p "$FLEET_DIR"
DIR="$(cd "$FLEET_DIR" && pwd)"
PGDATA="${FLEET_DATA:-$DIR/pgdata}"
BIN="${UNDERSTUDY_BIN:-$ROOT/target/release/understudy}"
log() { echo "fleet: $*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

if [ ! -x "$BIN" ]; then
  log "building $BIN"
  (cd "$ROOT" && cargo build --release --locked --quiet)
fi
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$NGINX" ] || { log "nginx is missing: apt-get install -y nginx-light"; exit 1; }

PIDS=()
PG_STARTED=0
PGBIN=""
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u pgtest -- "$@"; else "$@"; fi; }
cleanup() {
  trap - EXIT INT TERM
  [ -f "$DIR/nginx.pid" ] && kill "$(cat "$DIR/nginx.pid")" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$PG_STARTED" = 1 ]; then as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null 2>&1 || true; fi
  rm -f "${FLEET_CFG:-}"
  if [ "$OWN_DIR" = 1 ]; then rm -rf "$DIR"; fi
  log "stopped"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# 1. PostgreSQL.
if [ -n "${FLEET_STORE:-}" ]; then
  STORE="$FLEET_STORE"
else
  PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  [ -x "$PGBIN/pg_ctl" ] || { log "PostgreSQL is missing: apt-get install -y postgresql"; exit 1; }
  PGUSER="$(id -un)"
  if [ "$(id -u)" = 0 ]; then
    id pgtest >/dev/null 2>&1 || useradd -m pgtest
    PGUSER=pgtest
  fi
  PGPORT="$(free_port)"
  if [ ! -f "$PGDATA/PG_VERSION" ]; then
    mkdir -p "$PGDATA"; [ "$(id -u)" = 0 ] && chown pgtest "$PGDATA"
    as_pg "$PGBIN/initdb" -D "$PGDATA" -A trust -U "$PGUSER" -E UTF8 >"$DIR/initdb.log" 2>&1
  fi
  [ "$(id -u)" = 0 ] && chown pgtest "$DIR"
  as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -l "$DIR/postgres.log" -w -t 60 \
    -o "-p $PGPORT -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
  PG_STARTED=1
  as_pg "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U "$PGUSER" -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = 'understudy'" | grep -q 1 \
    || as_pg "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U "$PGUSER" -d postgres -c "CREATE DATABASE understudy"
  STORE="postgres://$PGUSER@127.0.0.1:$PGPORT/understudy"
  log "PostgreSQL on 127.0.0.1:$PGPORT"
fi

# 2. The fleet's project file: the given one plus the control-plane settings of a server
# behind a reverse proxy (see the header), beside it so its relative paths still resolve.
TOKEN="${FLEET_ADMIN_TOKEN:-$(python3 -c 'import secrets; print(secrets.token_hex(24))')}"
umask 077; printf '%s\n' "$TOKEN" >"$DIR/admin-token"; umask 022
FLEET_CFG="$(dirname "$CONFIG")/.understudy.fleet-$PORT.json"
python3 - "$CONFIG" "$FLEET_CFG" "$PORT" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
port = sys.argv[3]
cfg["allowed_hosts"] = sorted(set(cfg.get("allowed_hosts", []) + [f"127.0.0.1:{port}", f"localhost:{port}"]))
cfg["trust_loopback"] = False
json.dump(cfg, open(sys.argv[2], "w"), indent=2)
PY
CONFIG="$FLEET_CFG"
export UNDERSTUDY_ADMIN_TOKEN="$TOKEN"

# 3. The understudy processes (one after the other: the first creates the schema and the
# shared default attempt, the others adopt them — starting them together works too).
UPSTREAMS=""
for i in $(seq 1 "$PROCS"); do
  P="$(free_port)"
  "$BIN" serve --config "$CONFIG" --listen "127.0.0.1:$P" --store "$STORE" \
    >"$DIR/serve-$i.out" 2>"$DIR/serve-$i.log" &
  PIDS+=("$!")
  for _ in $(seq 1 300); do
    grep -q "understudy listening on" "$DIR/serve-$i.out" 2>/dev/null && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || { log "serve $i exited:"; cat "$DIR/serve-$i.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q "understudy listening on" "$DIR/serve-$i.out" || { log "serve $i did not start"; exit 1; }
  UPSTREAMS="$UPSTREAMS    server 127.0.0.1:$P;
"
  log "understudy $i on 127.0.0.1:$P (pid ${PIDS[-1]})"
done

# 4. nginx, keep-alive to the upstreams, routing by attempt token (`hash … consistent`): the
# calls of one attempt reach the process that holds its lease (docs/src/operations/fleet-store.md),
# which answers without asking PostgreSQL first; another process would have to take the lease
# over. The token is the `Understudy-Attempt` header or the `/~<token>/` path prefix; calls
# without one (the fleet's default attempt) share the key "default". A process that goes
# away: nginx sends its attempts to the next one on the ring, which takes their leases over. A
# non-idempotent request is never retried on another process (nginx's default since
# 1.9.13): a call reaches one process.
mkdir -p "$DIR/nginx-tmp"; chmod 777 "$DIR/nginx-tmp"
cat >"$DIR/nginx.conf" <<CONF
worker_processes 1;
pid $DIR/nginx.pid;
error_log $DIR/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $DIR/nginx-tmp/body;
  proxy_temp_path $DIR/nginx-tmp/proxy;
  fastcgi_temp_path $DIR/nginx-tmp/fastcgi;
  uwsgi_temp_path $DIR/nginx-tmp/uwsgi;
  scgi_temp_path $DIR/nginx-tmp/scgi;
  client_max_body_size 10m;
  map \$uri \$understudy_path_token { ~^/~(?<t>[^/]+) \$t; default ""; }
  map "\$http_understudy_attempt\$understudy_path_token" \$understudy_attempt_key { "" default; default \$http_understudy_attempt\$understudy_path_token; }
  upstream understudy {
    hash \$understudy_attempt_key consistent;
$UPSTREAMS    keepalive 64;
  }
  server {
    listen 127.0.0.1:$PORT;
    location / {
      proxy_pass http://understudy;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$http_host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_buffering off;
      proxy_read_timeout 120s;
    }
  }
}
CONF
"$NGINX" -p "$DIR" -c "$DIR/nginx.conf" -g 'daemon on;' 2>>"$DIR/nginx-error.log"
for _ in $(seq 1 100); do
  python3 - "$PORT" <<'PY' && break
import sys, urllib.request
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/crm/", timeout=1).read()
except urllib.error.HTTPError:
    pass
except Exception:
    sys.exit(1)
PY
  sleep 0.1
done
echo "fleet listening on http://127.0.0.1:$PORT"
log "store $STORE; logs in $DIR; Ctrl-C stops everything"
while true; do
  for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || log "a server exited (pid $p): the others keep serving"; done
  sleep 5 & wait $! || true
done
