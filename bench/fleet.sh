#!/usr/bin/env bash
# bench/fleet.sh — the fleet store's cost (issue 17), measured in ONE sitting on 127.0.0.1:
#   1. replay (workload A of bench/run.sh: GET get_contact, evidence on and durable) at c=64
#      through one process on the embedded store;
#   2. the same through one process on PostgreSQL (a server started here: initdb in a temp
#      dir, Debian defaults, fsync on);
#   3. the same through nginx (round robin, keep-alive) in front of two processes sharing that
#      PostgreSQL;
#   4. runs 1–3 again with the calls spread round robin over ATTEMPTS attempts (tokens in the
#      Understudy-Attempt header).
# Runs 1–3 call the default attempt, so on PostgreSQL every call takes that ONE attempt's row
# lock and waits for the previous call's commit: the serialized worst case (docs/src/operations/fleet-store.md: calls of
# one attempt are linearizable). Calls of different attempts commit concurrently (run 4).
# Output: one JSON document on stdout (progress on stderr), with `ratios`: PostgreSQL one
# process ÷ embedded one process, and nginx + two processes ÷ one process (both on
# PostgreSQL), for rps and p99, for the default attempt and for ATTEMPTS attempts. Not a test.
#
#   bash bench/fleet.sh            # DUR=15 s per run, WARM=3 s, C=64 (~2 min)
#   SMOKE=1 BUILD=0 bash bench/fleet.sh    # DUR=2 WARM=1 C=8 ATTEMPTS=8: does it run?
# Knobs: DUR, WARM, C, ATTEMPTS, BIN (default target/release/understudy; BUILD=1, the
# default, builds it first: BUILD=0 BIN=<release binary> uses one as it is).
set -euo pipefail
export LC_ALL=C
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
if [ "${SMOKE:-0}" = 1 ]; then
  DUR="${DUR:-2}"; WARM="${WARM:-1}"; C="${C:-8}"; ATTEMPTS="${ATTEMPTS:-8}"
else
  DUR="${DUR:-15}"; WARM="${WARM:-3}"; C="${C:-64}"; ATTEMPTS="${ATTEMPTS:-64}"
fi
BIN="${BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/understudy}"
STUB_PATH="/services/data/v60.0/sobjects/Contact/003000000000001"
if [ "${BUILD:-1}" = 1 ]; then (cd "$ROOT" && cargo build --release --locked --quiet --bin understudy) >&2; fi
[ -x "$BIN" ] || { echo "bench/fleet.sh: no binary at $BIN" >&2; exit 2; }
command -v wrk >/dev/null || { echo "bench/fleet.sh: wrk is required (apt-get install wrk)" >&2; exit 2; }
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$NGINX" ] || { echo "bench/fleet.sh: nginx is required (apt-get install nginx-light)" >&2; exit 2; }
PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[ -x "$PGBIN/pg_ctl" ] || { echo "bench/fleet.sh: PostgreSQL is required (apt-get install postgresql)" >&2; exit 2; }

WORK="$(mktemp -d /tmp/understudy-fleet-bench-XXXXXX)"
PIDS=()
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u pgtest -- "$@"; else "$@"; fi; }
cleanup() {
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# PostgreSQL.
PGUSER="$(id -un)"
if [ "$(id -u)" = 0 ]; then id pgtest >/dev/null 2>&1 || useradd -m pgtest; PGUSER=pgtest; chown pgtest "$WORK"; fi
PGPORT="$(free_port)"
as_pg "$PGBIN/initdb" -D "$WORK/pg" -A trust -U "$PGUSER" -E UTF8 >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w -o "-p $PGPORT -k /tmp -c listen_addresses=127.0.0.1" start >/dev/null
as_pg "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U "$PGUSER" -d postgres -c "CREATE DATABASE bench"
STORE="postgres://$PGUSER@127.0.0.1:$PGPORT/bench"

# serve NAME ARGS... → sets URL to the base URL (not in a $(…) subshell: PIDS must keep the
# server's PID for the cleanup)
serve() {
  local name="$1"; shift
  local port; port="$(free_port)"
  "$BIN" serve --config "$HERE/project/understudy.json" --listen "127.0.0.1:$port" "$@" \
    >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=("$!")
  for _ in $(seq 1 300); do
    grep -q "understudy listening on" "$WORK/$name.out" 2>/dev/null && { URL="http://127.0.0.1:$port"; return; }
    sleep 0.1
  done
  echo "bench/fleet.sh: $name did not start: $(tail -3 "$WORK/$name.err")" >&2; exit 1
}

# run LABEL URL [TOKENS] → one JSON object (TOKENS: spread the calls over those attempts)
run() {
  local label="$1" url="$2" tokens="${3:-}" lua="$HERE/wrk_report.lua"
  curl -sf -o /dev/null "$url" || { echo "bench/fleet.sh: $label: $url does not answer 200" >&2; exit 1; }
  if [ -n "$tokens" ]; then lua="$WORK/tokens_report.lua"; cat "$HERE/wrk_tokens.lua" "$HERE/wrk_report.lua" > "$lua"; fi
  WRK_TOKENS="$tokens" wrk -t1 -c"$C" -d"${WARM}s" --timeout 5s -s "$lua" "$url" >/dev/null 2>&1 || true
  echo "bench/fleet.sh: $label c=$C ${DUR}s" >&2
  local line
  line=$(WRK_TOKENS="$tokens" wrk -t1 -c"$C" -d"${DUR}s" --timeout 5s --latency -s "$lua" "$url" | grep '^RESULT ' | cut -c8-)
  echo "{\"target\":\"$label\",\"c\":$C,\"wrk\":$line}"
}
# tokens BASE → ATTEMPTS new attempts' tokens, space-separated
tokens() {
  local t="" i
  for i in $(seq 1 "$ATTEMPTS"); do
    t="$t $(curl -sf -X POST -d '{}' "$1/_understudy/api/attempts" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')"
  done
  echo "$t"
}

serve embedded --data-dir "$WORK/data-embedded"; EMB="$URL"
R1="$(run "embedded, one process" "$EMB/crm$STUB_PATH")"
serve pg1 --store "$STORE"; PG1="$URL"
R2="$(run "postgres, one process" "$PG1/crm$STUB_PATH")"
serve pg2 --store "$STORE"; PG2="$URL"
NPORT="$(free_port)"
mkdir -p "$WORK/ngx"; chmod 777 "$WORK/ngx"
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/ngx/b; proxy_temp_path $WORK/ngx/p; fastcgi_temp_path $WORK/ngx/f;
  uwsgi_temp_path $WORK/ngx/u; scgi_temp_path $WORK/ngx/s;
  keepalive_requests 10000000;
  upstream understudy { server ${PG1#http://}; server ${PG2#http://}; keepalive 128; }
  server {
    listen 127.0.0.1:$NPORT;
    location / { proxy_pass http://understudy; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host \$http_host; }
  }
}
CONF
"$NGINX" -p "$WORK" -e "$WORK/nginx.err" -c "$WORK/nginx.conf"
sleep 0.3
R3="$(run "postgres, nginx + two processes" "http://127.0.0.1:$NPORT/crm$STUB_PATH")"
T_EMB="$(tokens "$EMB")"; T_PG="$(tokens "$PG1")"
R4="$(run "embedded, one process, $ATTEMPTS attempts" "$EMB/crm$STUB_PATH" "$T_EMB")"
R5="$(run "postgres, one process, $ATTEMPTS attempts" "$PG1/crm$STUB_PATH" "$T_PG")"
R6="$(run "postgres, nginx + two processes, $ATTEMPTS attempts" "http://127.0.0.1:$NPORT/crm$STUB_PATH" "$T_PG")"
python3 - "$R1" "$R2" "$R3" "$R4" "$R5" "$R6" "$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" "$($PGBIN/postgres --version)" "$("$BIN" --version 2>&1 | head -1)" "DUR=$DUR WARM=$WARM C=$C ATTEMPTS=$ATTEMPTS bash bench/fleet.sh" <<'PY'
import json, sys, time
r = [json.loads(x) for x in sys.argv[1:7]]


def q(a, b, key):
    x, y = a["wrk"][key], b["wrk"][key]
    return round(x / y, 3) if y else None


ratios = []
for label, (emb, pg1, pg2) in (("default attempt (one row lock)", r[0:3]), (f"{r[3]['target'].split(', ')[-1]} (round robin)", r[3:6])):
    for x in (emb, pg1, pg2):
        x["ratio_to_embedded"] = q(x, emb, "rps")
    ratios.append({"calls_on": label,
                   "postgres_one_vs_embedded_one": {"rps": q(pg1, emb, "rps"), "p99": q(pg1, emb, "p99_us")},
                   "nginx_two_vs_one_process_postgres": {"rps": q(pg2, pg1, "rps"), "p99": q(pg2, pg1, "p99_us")}})
print(json.dumps({"bench": "fleet", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "command": sys.argv[11], "understudy": sys.argv[10], "cores": int(sys.argv[7]),
                  "cpu": sys.argv[8], "postgres": sys.argv[9], "ratios": ratios, "runs": r}, indent=1))
PY
python3 - "$R1" "$R2" "$R3" "$R4" "$R5" "$R6" <<'PY' >&2
import json, sys
r = [json.loads(x) for x in sys.argv[1:]]
print("\n| run | rps | p50 ms | p99 ms | errors | ÷ embedded rps |\n|---|---|---|---|---|---|")
for g in (r[0:3], r[3:6]):
    for x in g:
        w = x["wrk"]; e = sum(v for k, v in w.items() if k.startswith("err_"))
        print(f"| {x['target']} | {w['rps']:.0f} | {w['p50_us'] / 1000:.2f} | {w['p99_us'] / 1000:.2f} | {e} | {w['rps'] / g[0]['wrk']['rps']:.3f} |")
PY
