#!/usr/bin/env bash
# bench/fleet.sh — the fleet store's cost (issue 17), measured in ONE sitting on 127.0.0.1:
#   1. replay (workload A of bench/run.sh: GET get_contact, evidence on and durable) at c=64
#      through one process on the embedded store;
#   2. the same through one process on PostgreSQL (a server started here: initdb in a temp
#      dir, Debian defaults, fsync on);
#   3. the same through nginx (hash on the attempt token, keep-alive, as examples/fleet) in
#      front of two, then three processes sharing that PostgreSQL;
#   4. runs 1–3 again with the calls spread round robin over ATTEMPTS attempts (tokens in the
#      Understudy-Attempt header);
#   0. first, nginx serving the same body as a static file (the reference).
# Runs 1–3 call the default attempt: ONE attempt, whose calls are linearizable
# (docs/src/operations/fleet-store.md), served by the process holding its lease; its calls
# share commits. Calls of different attempts share commits too (run 4).
# Output: one JSON document on stdout with `targets` (issue 34's two fleet targets, each
# ratio with its threshold and met / not met), `scaling` (1, 2, 3 processes, with
# PostgreSQL's CPU share of the machine) and every run; on stderr the same as Markdown
# tables. Not a test.
#
#   bash bench/fleet.sh            # DUR=15 s per run, WARM=3 s, C=64 (~2 min)
#   SMOKE=1 BUILD=0 bash bench/fleet.sh    # DUR=2 WARM=1 C=8 ATTEMPTS=8: does it run?
# Knobs: DUR, WARM, C, ATTEMPTS, PERF=1 (a perf profile of the two-process run over ATTEMPTS
# attempts, to bench/results/*-fleet-perf.txt), BIN (default target/release/understudy; BUILD=1, the
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
  local label="$1" url="$2" tokens="${3:-}" lua="$HERE/peers/wrk_report.lua"
  local first
  first="$(curl -s -w ' HTTP %{http_code}' "$url")"
  case "$first" in *" HTTP 200") ;; *) echo "bench/fleet.sh: $label: $url does not answer 200: $first" >&2; exit 1 ;; esac
  if [ -n "$tokens" ]; then lua="$WORK/tokens_report.lua"; cat "$HERE/wrk_tokens.lua" "$HERE/peers/wrk_report.lua" > "$lua"; fi
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
    t="$t $(curl -sf -X POST -H 'Content-Type: application/json' -d '{}' "$1/_understudy/api/attempts" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')"
  done
  echo "$t"
}

# cpu → cumulative CPU seconds of PostgreSQL's processes and of the understudy processes
cpu() {
  python3 - "${PIDS[@]}" <<'PY'
import os, sys
tick = os.sysconf("SC_CLK_TCK"); pg = us = 0.0
mine = set(sys.argv[1:])
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        st = open(f"/proc/{p}/stat").read()
    except OSError:
        continue
    comm = st[st.index("(") + 1:st.rindex(")")]
    f = st[st.rindex(")") + 2:].split()
    t = (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / tick  # + reaped children (exited backends)
    if comm.startswith("postgres"):
        pg += t
    elif p in mine:
        us += t
print(f"{pg:.2f} {us:.2f}")
PY
}
# measured LABEL URL [TOKENS] → run's JSON with the CPU seconds PostgreSQL and understudy used
measured() {
  local before after line
  before="$(cpu)"
  line="$(run "$@")"
  after="$(cpu)"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); b=sys.argv[2].split(); a=sys.argv[3].split(); d=float(sys.argv[4])
r["cpu_s"]={"postgres":round(float(a[0])-float(b[0]),2),"understudy":round(float(a[1])-float(b[1]),2),"wall_s":d}; print(json.dumps(r))' "$line" "$before" "$after" "$((DUR + WARM))"
}
# nginx_for NAME URL... → starts nginx in front of those processes (hash on the attempt token,
# as examples/fleet does) and sets NG to its base URL
nginx_for() {
  local name="$1"; shift
  local port ups="" u
  port="$(free_port)"
  for u in "$@"; do ups="$ups server ${u#http://};"; done
  mkdir -p "$WORK/ngx-$name"; chmod 777 "$WORK/ngx-$name"
  cat >"$WORK/nginx-$name.conf" <<CONF
worker_processes 1;
pid $WORK/nginx-$name.pid;
error_log $WORK/nginx-$name.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/ngx-$name/b; proxy_temp_path $WORK/ngx-$name/p; fastcgi_temp_path $WORK/ngx-$name/f;
  uwsgi_temp_path $WORK/ngx-$name/u; scgi_temp_path $WORK/ngx-$name/s;
  keepalive_requests 10000000;
  map \$uri \$understudy_path_token { ~^/~(?<t>[^/]+) \$t; default ""; }
  map "\$http_understudy_attempt\$understudy_path_token" \$understudy_attempt_key { "" default; default \$http_understudy_attempt\$understudy_path_token; }
  upstream understudy { hash \$understudy_attempt_key consistent; $ups keepalive 128; }
  server {
    listen 127.0.0.1:$port;
    location = /static.json { default_type application/json; alias $HERE/body.json; }
    location / { proxy_pass http://understudy; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host \$http_host; }
  }
}
CONF
  "$NGINX" -p "$WORK" -e "$WORK/nginx-$name.err" -c "$WORK/nginx-$name.conf"
  NGINX_PIDFILES+=("$WORK/nginx-$name.pid")
  sleep 0.3
  NG="http://127.0.0.1:$port"
}
NGINX_PIDFILES=()
trap 'for f in "${NGINX_PIDFILES[@]}"; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done; cleanup' EXIT

serve embedded --data-dir "$WORK/data-embedded"; EMB="$URL"
serve pg1 --store "$STORE"; PG1="$URL"
serve pg2 --store "$STORE"; PG2="$URL"
serve pg3 --store "$STORE"; PG3="$URL"
nginx_for two "$PG1" "$PG2"; NG2="$NG"
nginx_for three "$PG1" "$PG2" "$PG3"; NG3="$NG"
T_EMB="$(tokens "$EMB")"; T_PG="$(tokens "$PG1")"
R=()
R+=("$(measured "nginx, static body" "$NG2/static.json")")
R+=("$(measured "embedded, one process" "$EMB/crm$STUB_PATH")")
R+=("$(measured "postgres, one process" "$PG1/crm$STUB_PATH")")
R+=("$(measured "postgres, nginx + two processes" "$NG2/crm$STUB_PATH")")
R+=("$(measured "postgres, nginx + three processes" "$NG3/crm$STUB_PATH")")
R+=("$(measured "embedded, one process, $ATTEMPTS attempts" "$EMB/crm$STUB_PATH" "$T_EMB")")
R+=("$(measured "postgres, one process, $ATTEMPTS attempts" "$PG1/crm$STUB_PATH" "$T_PG")")
# PERF=1: a system-wide perf profile (99 Hz, call graphs) during this run: where the time goes
if [ "${PERF:-0}" = 1 ]; then
  perf record -F 99 -a -g -o "$WORK/perf.data" -- sleep "$((DUR + WARM))" >/dev/null 2>&1 &
  PERF_PID=$!
fi
R+=("$(measured "postgres, nginx + two processes, $ATTEMPTS attempts" "$NG2/crm$STUB_PATH" "$T_PG")")
if [ "${PERF:-0}" = 1 ]; then
  wait "$PERF_PID" || true
  OUTP="${PERF_OUT:-$ROOT/bench/results/$(date -u +%Y-%m-%dT%H%M)-fleet-perf.txt}"
  { echo "# perf record -F 99 -a -g during: postgres, nginx + two processes, $ATTEMPTS attempts (DUR=$DUR WARM=$WARM C=$C)"
    echo "## CPU samples by command"; { perf report -i "$WORK/perf.data" --no-children --sort comm --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -15; } || true
    echo "## top symbols, understudy"; { perf report -i "$WORK/perf.data" --no-children --comms understudy,understudy-pg,tokio-runtime-w --sort dso,symbol --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25; } || true
    echo "## top symbols, postgres"; { perf report -i "$WORK/perf.data" --no-children --comms postgres --sort dso,symbol --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25; } || true
  } > "$OUTP"
  echo "bench/fleet.sh: profile in $OUTP" >&2
fi
R+=("$(measured "postgres, nginx + three processes, $ATTEMPTS attempts" "$NG3/crm$STUB_PATH" "$T_PG")")
LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" "$($PGBIN/postgres --version)" "$("$BIN" --version 2>&1 | head -1)" "DUR=$DUR WARM=$WARM C=$C ATTEMPTS=$ATTEMPTS bash bench/fleet.sh" "$LOAD" "${R[@]}" <<'PY'
import json, sys, time
cores, cpu, pgv, usv, command, load = sys.argv[1:7]
r = [json.loads(x) for x in sys.argv[7:]]
ngx, e1, p1, p2, p3, eN, pN1, pN2, pN3 = r
rps = lambda x: x["wrk"]["rps"]
def ratio(a, b):
    return round(rps(a) / rps(b), 3) if rps(b) else None
for x in r:
    x["ratio_to_nginx"] = ratio(x, ngx)
for g in ((e1, p1, p2, p3), (eN, pN1, pN2, pN3)):
    for x in g:
        x["ratio_to_embedded"] = ratio(x, g[0])
        c = x["cpu_s"]
        x["postgres_cpu_share"] = round(c["postgres"] / (c["wall_s"] * int(cores)), 3)
        # CPU time per answered call (the warm-up runs at the measured rate, so the calls of
        # the whole window are rps x wall): what a call costs PostgreSQL and understudy, the
        # budget that decides whether a fleet on the same cores can outrun one process.
        n = rps(x) * c["wall_s"]
        x["cpu_us_per_call"] = {k: round(c[k] / n * 1e6, 1) if n else None for k in ("postgres", "understudy")}
targets = [
    {"target": f"nginx + two processes, {eN['target'].split(', ')[-1]}, c={eN['c']}: >= 1.0 x one embedded process",
     "ratio": ratio(pN2, eN), "threshold": 1.0},
    {"target": f"nginx + two processes, one attempt, c={e1['c']}: >= 0.5 x one embedded process",
     "ratio": ratio(p2, e1), "threshold": 0.5},
]
for t in targets:
    t["met"] = t["ratio"] is not None and t["ratio"] >= t["threshold"]
scaling = [{"processes": n, "one_attempt_rps": round(rps(a)), "one_attempt_ratio": ratio(a, e1),
            "attempts_rps": round(rps(b)), "attempts_ratio": ratio(b, eN),
            "postgres_cpu_share_attempts": b["postgres_cpu_share"]}
           for n, a, b in ((1, p1, pN1), (2, p2, pN2), (3, p3, pN3))]
print(json.dumps({"bench": "fleet", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "command": command, "understudy": usv, "cores": int(cores), "cpu": cpu,
                  "loadavg_at_end": load, "postgres": pgv, "targets": targets,
                  "scaling": scaling, "runs": r}, indent=1))
print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cores} cores ({cpu}), load {load}, `{command}`", file=sys.stderr)
print("\n| run | rps | p50 ms | p99 ms | errors | ÷ embedded | ÷ nginx static | PostgreSQL CPU share | CPU µs per call (PostgreSQL + understudy) |\n|---|---|---|---|---|---|---|---|---|", file=sys.stderr)
def per_call(x):
    u = x.get("cpu_us_per_call")
    return f"{u['postgres']} + {u['understudy']}" if u else ""
for x in r:
    w = x["wrk"]; e = sum(v for k, v in w.items() if k.startswith("err_"))
    print(f"| {x['target']} | {w['rps']:.0f} | {w['p50_us'] / 1000:.2f} | {w['p99_us'] / 1000:.2f} | {e} | "
          f"{x.get('ratio_to_embedded', '')} | {x['ratio_to_nginx']} | {x.get('postgres_cpu_share', '')} | {per_call(x)} |", file=sys.stderr)
print("\n| target | ratio | threshold | met |\n|---|---|---|---|", file=sys.stderr)
for t in targets:
    print(f"| {t['target']} | {t['ratio']} | {t['threshold']} | {'met' if t['met'] else 'NOT met'} |", file=sys.stderr)
PY
