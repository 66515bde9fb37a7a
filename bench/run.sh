#!/usr/bin/env bash
# bench/run.sh — understudy's side-by-side load harness (see bench/README.md).
#
# Measures, in ONE sitting, on 127.0.0.1 only, the same way the peer harness measures WireMock,
# Mountebank, mockttp, mitmproxy and Prism (wrk -t1 with a Lua done() hook, keep-alive, a
# response check before every target, CPU and RSS from /proc):
#   * workload A  — GET get_contact: understudy replays a mock whose wire body is the peers'
#                   604-byte body.json; nginx serves the same bytes as a static file (reference);
#   * state       — POST bump_counter: a rule, a `$state` read and a `set_state` per call (a
#                   new `By` on every request, so every call commits a state change);
#   * dry-run     — understudy `--mode dry-run` forwarding an unmocked read to that nginx,
#                   vs hitting nginx directly (added p50); reported "unavailable: <reason>"
#                   when this build cannot do it;
#   * durability  — the same replay and dry-run at c=1 with `"durability": "attempt"` in the
#                   project file (opt-in); "unavailable: <reason>" when the build refuses it;
#   * rss_30s     — a fresh server's RSS after RSS_DUR s of replay at the highest concurrency;
#   * startup     — wall time from spawn to the readiness line and RSS after start-up, for the
#                   bench project and for OPS generated operation files (cold and warm store);
#                   on the warm server also a hot reload of one rewritten file among OPS and
#                   `POST /_understudy/api/attempts` latency (wrk -c1, one keep-alive connection);
#   * engine      — criterion `cargo bench --bench engine` estimates (ENGINE=0 skips it).
# report.py turns it all into one JSON document whose `targets` list holds issue 20's targets
# as ratios / figures with a threshold and a verdict each.
# Evidence recording stays on and durable (the server's default: every call goes through the
# store's group commit before it is answered); the data dirs live on the disk under $TMPDIR.
#
# Output: ONE JSON document on stdout (progress on stderr). Raw generator output and server
# logs stay in a temp dir that is removed unless KEEP=1.
#
# Usage (from anywhere):
#   bash bench/run.sh                      # full run: DUR=15 s per measurement, c=1 and c=64
#   SMOKE=1 bash bench/run.sh              # 2 s runs, c=1 and c=4, 1000 ops; nginx optional
#   DUR=30 WARM=5 OHA=1 bash bench/run.sh > result.json
# Knobs (env):
#   DUR      seconds per measured run (15; SMOKE: 2)       WARM   unrecorded warm-up s at max conc (5; SMOKE: 1)
#   CONCS    concurrencies ("1 64"; SMOKE: "1 4")           OPS    operation files for start-up (10000; SMOKE: 1000)
#   XDUR     seconds per run of the durability section (10; SMOKE: 2)
#   RSS_DUR  seconds of load before the rss_30s reading (30; SMOKE: 3)
#   ATT_DUR  seconds of attempt creation on one connection (5; SMOKE: 1)
#   ENGINE   1 (cargo bench --bench engine at the end; ENGINE_ARGS "--warm-up-time 1
#            --measurement-time 3", SMOKE "--warm-up-time 0.3 --measurement-time 1") | 0 (skip)
#   OHA=1    also run oha (installs oha 1.16.0 with `cargo install --locked` when missing; the
#            state workload stays wrk only: oha cannot vary the body)
#   NGINX    auto (install when missing, except SMOKE) | 0 (skip the nginx reference and dry-run)
#   INSTALL  1 (apt-get/cargo install what is missing) | 0 (never install)
#   BUILD    1 (cargo build --release first) | 0 (use the existing binary)
#   BIN      the understudy binary (default $CARGO_TARGET_DIR or ./target, release/understudy)
#   QUIET_MAX seconds to wait before each run for other tenants to go under QUIET_CORES
#            cores (0 = don't wait; default 0, QUIET_CORES 0.3) — as the peers' wait_quiet
#   STARTUP_TIMEOUT  seconds to wait for a readiness line (600)
#   KEEP=1   keep the work dir (logs, raw wrk output); its path is in the JSON
set -euo pipefail
export LC_ALL=C

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SMOKE="${SMOKE:-0}"
if [ "$SMOKE" = 1 ]; then
  DUR="${DUR:-2}"; WARM="${WARM:-1}"; CONCS="${CONCS:-1 4}"; OPS="${OPS:-1000}"
  XDUR="${XDUR:-2}"; RSS_DUR="${RSS_DUR:-3}"; ATT_DUR="${ATT_DUR:-1}"
  ENGINE_ARGS="${ENGINE_ARGS:---warm-up-time 0.3 --measurement-time 1}"
else
  DUR="${DUR:-15}"; WARM="${WARM:-5}"; CONCS="${CONCS:-1 64}"; OPS="${OPS:-10000}"
  XDUR="${XDUR:-10}"; RSS_DUR="${RSS_DUR:-30}"; ATT_DUR="${ATT_DUR:-5}"
  ENGINE_ARGS="${ENGINE_ARGS:---warm-up-time 1 --measurement-time 3}"
fi
ENGINE="${ENGINE:-1}"
CMAX=$(echo "$CONCS" | tr ' ' '\n' | sort -n | tail -1)
OHA="${OHA:-0}"
NGINX="${NGINX:-auto}"
INSTALL="${INSTALL:-1}"
BUILD="${BUILD:-1}"
QUIET_MAX="${QUIET_MAX:-0}"
QUIET_CORES="${QUIET_CORES:-0.3}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-600}"
KEEP="${KEEP:-0}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="${BIN:-$TARGET_DIR/release/understudy}"
OHA_BIN="${OHA_BIN:-$(command -v oha || echo "$HOME/.cargo/bin/oha")}"
GENS="wrk"; [ "$OHA" = 1 ] && GENS="wrk oha"

STUB_PATH="/services/data/v60.0/sobjects/Contact/003000000000001"
BUMP_PATH="/services/data/v60.0/sobjects/Counter__c"
BUMP_BODY='{"Name":"c1","By":"bench"}'   # the evidence check's call; the load varies By (wrk_post.lua)
BODY_FILE="$HERE/body.json"
CLK_TCK="$(getconf CLK_TCK)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/understudy-bench.XXXXXX")"
chmod 755 "$WORK"                       # nginx's worker (nobody) reads the static root below it
META="$WORK/meta.jsonl"; RUNS="$WORK/runs.jsonl"; : > "$META"; : > "$RUNS"
declare -a PIDS=()                      # every server we started; stopped by PID at exit
declare -A FDS=()                       # pid -> fd holding its stdout fifo open

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# ---- process bookkeeping (only PIDs recorded here are ever signalled) ----------------------
stop_pid() {  # stop_pid PID : TERM, wait up to 30 s (graceful drain + store flush), then KILL
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -n "${FDS[$pid]:-}" ]; then local fd="${FDS[$pid]}"; exec {fd}>&-; unset "FDS[$pid]"; fi
}
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && stop_pid "$p"; done
  if [ "$KEEP" = 1 ]; then log "work dir kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

meta() {  # meta KEY JSON_VALUE : one fact for the final document
  printf '{"key":"%s","value":%s}\n' "$1" "$2" >> "$META"
}
jstr() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
descendants() {  # descendants PID : PID and all its descendants (nginx: master + worker)
  local p="$1" c; echo "$p"
  for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do descendants "$c"; done
}
cpu_ticks() {  # utime+stime (clock ticks, every thread) summed over the process tree
  local s=0 p v
  for p in $(descendants "$1"); do
    v=$(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0); s=$((s + ${v:-0}))
  done
  echo "$s"
}
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }
mem_kb() {  # mem_kb PID -> {"rss_kb":..,"hwm_kb":..} (VmRSS, VmHWM) summed over the process tree
  local r=0 w=0 p a b
  for p in $(descendants "$1"); do
    a=$(awk '/^VmRSS:/{print $2}' "/proc/$p/status" 2>/dev/null || true)
    b=$(awk '/^VmHWM:/{print $2}' "/proc/$p/status" 2>/dev/null || true)
    r=$((r + ${a:-0})); w=$((w + ${b:-0}))
  done
  echo "{\"rss_kb\":$r,\"hwm_kb\":$w}"
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# wait_quiet: as the peers' helper — before a run, wait up to QUIET_MAX s for other tenants
# to use < QUIET_CORES cores in two consecutive 2 s windows (QUIET_MAX=0: don't wait).
wait_quiet() {
  [ "$QUIET_MAX" -gt 0 ] || return 0
  local waited=0 ok=0 a b used
  while :; do
    a=$(busy_ticks); sleep 2; b=$(busy_ticks)
    used=$(awk -v d=$((b-a)) -v hz="$CLK_TCK" 'BEGIN{printf "%.2f", d/hz/2}')
    if awk -v u="$used" -v t="$QUIET_CORES" 'BEGIN{exit !(u<t)}'; then
      ok=$((ok+1)); [ "$ok" -ge 2 ] && return 0; continue
    fi
    ok=0; waited=$((waited+2))
    [ "$waited" -ge "$QUIET_MAX" ] && { log "machine still busy ($used cores); measuring anyway"; return 0; }
  done
}

# spawn_server NAME ARGS... : start `understudy serve ARGS...` and wait for its readiness line
# (`understudy listening on http://HOST:PORT`, read from a fifo: no sleeping). Sets SRV_PID,
# SRV_URL, SRV_READY_MS (spawn → line, wall clock); on failure returns 1 with SRV_FAIL.
spawn_server() {
  local name="$1"; shift
  local fifo="$WORK/$name.stdout" fd line="" t0 t1 deadline rc
  SRV_PID=""; SRV_URL=""; SRV_READY_MS=""; SRV_FAIL=""
  rm -f "$fifo"; mkfifo "$fifo"
  exec {fd}<>"$fifo"                   # held open until the server stops: no EOF, no SIGPIPE
  t0=$EPOCHREALTIME
  "$BIN" serve "$@" > "$fifo" 2> "$WORK/$name.stderr" < /dev/null &
  SRV_PID=$!
  PIDS+=("$SRV_PID"); FDS[$SRV_PID]=$fd
  deadline=$((EPOCHSECONDS + STARTUP_TIMEOUT))
  local part="" chunk
  while :; do
    # `read -t` keeps what it had read of a line when the timer fires: carry it over, so a
    # line that arrives across a timeout is still seen whole.
    if IFS= read -r -t 0.2 -u "$fd" chunk; then
      line="$part$chunk"; part=""
      case "$line" in "understudy listening on http://"*) break ;; esac
      continue
    fi
    part="$part$chunk"
    if ! alive "$SRV_PID"; then
      rc=0; wait "$SRV_PID" 2>/dev/null || rc=$?
      SRV_FAIL="understudy serve exited (code $rc) before its readiness line: $(tail -n 3 "$WORK/$name.stderr" | tr '\n' ' ' | cut -c1-400)"
      exec {fd}>&-; unset "FDS[$SRV_PID]"
      return 1
    fi
    if [ "$EPOCHSECONDS" -gt "$deadline" ]; then
      SRV_FAIL="no readiness line within ${STARTUP_TIMEOUT}s"
      stop_pid "$SRV_PID"; return 1
    fi
  done
  t1=$EPOCHREALTIME
  SRV_READY_MS=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b-a)*1000}')
  SRV_URL="${line#understudy listening on }"
  log "$name ready in ${SRV_READY_MS} ms at $SRV_URL (pid $SRV_PID)"
}

# check_resp NAME URL STATUS EXPECTED_JSON_FILE [curl args...] : status, application/json and a
# JSON-equal body. Prints one JSON object; returns 1 when the check fails.
check_resp() {
  local name="$1" url="$2" want="$3" exp="$4"; shift 4
  local h="$WORK/check.$name.h" b="$WORK/check.$name.b"
  : > "$h"; : > "$b"
  curl -s -m 10 -D "$h" -o "$b" "$@" "$url" || true
  python3 - "$h" "$b" "$exp" "$want" <<'PY'
import json, sys
h, b, exp, want = sys.argv[1:]
lines = open(h, encoding="latin-1", newline="").read().split("\r\n")
status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else None
ct = next((l.split(":", 1)[1].strip() for l in lines if l.lower().startswith("content-type:")), None)
body = open(b, "rb").read(); ref = open(exp, "rb").read()
try: same_json = json.loads(body) == json.loads(ref)
except Exception: same_json = False
ok = status == int(want) and same_json and bool(ct) and ct.startswith("application/json")
print(json.dumps({"ok": ok, "status": status, "content_type": ct, "bytes": len(body),
                  "expected_bytes": len(ref), "bytes_equal": body == ref, "json_equal": same_json,
                  "body_excerpt": None if ok else body[:300].decode("utf-8", "replace")}))
sys.exit(0 if ok else 1)
PY
}

# store_flushes URL : understudy_store_flushes_total from the admin metrics (group flushes of
# the evidence store), or "null" when this build has no such metric (nginx, older builds).
store_flushes() {
  local v
  v=$(curl -s -m 5 "$1/_understudy/api/metrics" 2>/dev/null | awk '$1=="understudy_store_flushes_total"{print $2; exit}')
  echo "${v:-null}"
}

# bench_run TARGET WORKLOAD URL CONC PID KIND : one measured run per generator; KIND get|post
# (post = the state workload: wrk only, a new `By` per request) | attempts (POST {} to the
# attempts API). RUN_DUR overrides DUR. Appends one JSON line per run to $RUNS (raw fields;
# bench/report.py derives the rest).
bench_run() {
  local target="$1" wl="$2" url="$3" c="$4" pid="$5" kind="$6" gen dur="${RUN_DUR:-$DUR}"
  local base="${url%%/crm/*}"; base="${base%%/_understudy/*}"
  for gen in $GENS; do
    [ "$kind" = get ] || [ "$gen" = wrk ] || continue
    wait_quiet
    local tf="$WORK/gen.time" raw="$WORK/$gen.$target.$wl.c$c.txt" load t0 t1 b0 b1 out res mem f0=null f1=null
    load=$(loadavg)
    [ "$target" = nginx ] || f0=$(store_flushes "$base")
    t0=$(cpu_ticks "$pid"); b0=$(busy_ticks)
    if [ "$gen" = wrk ]; then
      local lua; lua=$(wrk_script "$kind")
      out=$( { TIMEFORMAT='%U %S'; time wrk -t1 -c"$c" -d"${dur}s" --timeout 5s --latency -s "$lua" "$url" 2>&1; } 2>"$tf" ) || true
    else
      out=$( { TIMEFORMAT='%U %S'; time "$OHA_BIN" --no-tui --output-format json --worker-threads 1 -z "${dur}s" -c "$c" -t 5s "$url" 2>&1; } 2>"$tf" ) || true
    fi
    b1=$(busy_ticks); t1=$(cpu_ticks "$pid")
    [ "$target" = nginx ] || f1=$(store_flushes "$base")
    mem=$(mem_kb "$pid")
    printf '%s\n' "$out" > "$raw"
    res=$(printf '%s\n' "$out" | python3 "$HERE/peers/parse_gen.py" "$gen") || { log "$gen produced no result for $target $wl c=$c"; res=null; }
    printf '{"target":"%s","workload":"%s","conc":%s,"gen":"%s","dur_s":%s,"loadavg_before":"%s","server_cpu_ticks":%s,"busy_ticks":%s,"gen_cpu":"%s","clk_tck":%s,"mem":%s,"flushes_before":%s,"flushes_after":%s,"r":%s}\n' \
      "$target" "$wl" "$c" "$gen" "$dur" "$load" "$((t1 - t0))" "$((b1 - b0))" "$(cat "$tf" 2>/dev/null | tr '\n' ' ')" "$CLK_TCK" "$mem" "$f0" "$f1" "$res" >> "$RUNS"
    log "$target $wl $gen c=$c (load $load) -> $res"
  done
}

# wrk_script KIND : the wrk script of a run kind (wrk takes one script: the request setup is
# prepended to wrk_report.lua)
wrk_script() {
  case "$1" in
    get) echo "$HERE/peers/wrk_report.lua" ;;
    post) cat "$HERE/wrk_post.lua" "$HERE/peers/wrk_report.lua" > "$WORK/wrk_post_report.lua"; echo "$WORK/wrk_post_report.lua" ;;
    attempts) cat "$HERE/wrk_attempts.lua" "$HERE/peers/wrk_report.lua" > "$WORK/wrk_attempts_report.lua"; echo "$WORK/wrk_attempts_report.lua" ;;
  esac
}

warm() {  # warm URL KIND [C] : unrecorded warm-up (default: at the highest concurrency)
  local url="$1" kind="$2" c="${3:-$CMAX}" lua
  [ "$WARM" -gt 0 ] || return 0
  lua=$(wrk_script "$kind")
  wrk -t1 -c"$c" -d"${WARM}s" --timeout 5s -s "$lua" "$url" > /dev/null 2>&1 || true
}

# ---- 0. tools ------------------------------------------------------------------------------
install_apt() {
  [ "$INSTALL" = 1 ] || { log "missing $*; INSTALL=0"; return 1; }
  log "installing $* (apt-get)"
  if ! apt-get install -y -qq "$@" > "$WORK/apt.log" 2>&1; then
    apt-get update -qq >> "$WORK/apt.log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >> "$WORK/apt.log" 2>&1
  fi
}
if ! command -v wrk > /dev/null && [ "$INSTALL" = 1 ]; then
  apt-get update -qq > /dev/null 2>&1 || true          # wrk missing: refresh the lists first
  DEBIAN_FRONTEND=noninteractive install_apt wrk || true
fi
command -v wrk > /dev/null || { echo "bench/run.sh: wrk is required (apt-get install wrk)" >&2; exit 2; }
command -v curl > /dev/null || DEBIAN_FRONTEND=noninteractive install_apt curl || true
command -v curl > /dev/null || { echo "bench/run.sh: curl is required" >&2; exit 2; }
NGINX_BIN="$(command -v nginx || echo /usr/sbin/nginx)"
NGINX_OK=0; NGINX_WHY=""
if [ "$NGINX" = 0 ]; then
  NGINX_WHY="NGINX=0"
elif [ -x "$NGINX_BIN" ]; then
  NGINX_OK=1
elif [ "$SMOKE" = 1 ]; then
  NGINX_WHY="nginx is not installed (SMOKE=1 does not install it)"
else
  DEBIAN_FRONTEND=noninteractive install_apt nginx-light && NGINX_OK=1 || NGINX_WHY="could not install nginx-light"
  NGINX_BIN="$(command -v nginx || echo /usr/sbin/nginx)"
fi
if [ "$OHA" = 1 ] && [ ! -x "$OHA_BIN" ]; then
  log "installing oha 1.16.0 (cargo install --locked)"
  cargo install oha --version 1.16.0 --locked >&2
  OHA_BIN="$(command -v oha || echo "$HOME/.cargo/bin/oha")"
fi

# ---- 1. build ------------------------------------------------------------------------------
if [ "$BUILD" = 1 ]; then
  log "cargo build --release (target dir $TARGET_DIR)"
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" cargo build --release --bin understudy) >&2
  if [ "$ENGINE" = 1 ]; then   # the criterion bench too, so section 6 only measures
    log "cargo bench --bench engine --no-run"
    (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" cargo bench --bench engine --no-run) >&2
  fi
fi
[ -x "$BIN" ] || { echo "bench/run.sh: no binary at $BIN" >&2; exit 2; }

meta date "$(jstr "$(date -u +%Y-%m-%dT%H:%M:%SZ)")"
meta command "$(jstr "$(env | grep -E '^(SMOKE|DUR|WARM|CONCS|OPS|XDUR|RSS_DUR|ATT_DUR|ENGINE|ENGINE_ARGS|OHA|NGINX|QUIET_MAX|QUIET_CORES|KEEP|BUILD|INSTALL)=' | sort | tr '\n' ' ')bash bench/run.sh")"
meta machine "{\"nproc\":$(nproc),\"cpu\":$(jstr "$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"),\"kernel\":$(jstr "$(uname -r)"),\"loadavg_start\":$(jstr "$(loadavg)"),\"mem_total_kb\":$(awk '/MemTotal/{print $2}' /proc/meminfo),\"data_dir_fs\":$(jstr "$(df -PT "$WORK" | awk 'NR==2{print $2}')")}"
meta params "{\"dur_s\":$DUR,\"warm_s\":$WARM,\"xdur_s\":$XDUR,\"rss_dur_s\":$RSS_DUR,\"att_dur_s\":$ATT_DUR,\"engine\":$ENGINE,\"concs\":[$(echo $CONCS | tr ' ' ',')],\"gens\":$(jstr "$GENS"),\"smoke\":$([ "$SMOKE" = 1 ] && echo true || echo false),\"ops\":$OPS}"
meta versions "{\"understudy\":$(jstr "$("$BIN" --version 2>/dev/null || echo '?') $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '')$(cd "$ROOT" && git diff --quiet HEAD 2>/dev/null || echo '+dirty')"),\"wrk\":$(jstr "$(wrk -v 2>&1 | head -1)"),\"nginx\":$(jstr "$([ "$NGINX_OK" = 1 ] && "$NGINX_BIN" -v 2>&1 || echo none)"),\"oha\":$(jstr "$([ "$OHA" = 1 ] && "$OHA_BIN" --version 2>&1 || echo none)")}"
meta work_dir "$(jstr "$WORK$([ "$KEEP" = 1 ] || echo ' (removed)')")"

# ---- 2. nginx reference (same body, 1 worker, access log off, keep-alive unlimited) --------
NGINX_PID=""; NGINX_URL=""
if [ "$NGINX_OK" = 1 ]; then
  NGINX_PORT=$(free_port)
  root="$WORK/www"; mkdir -p "$root$(dirname "$STUB_PATH")" "$WORK/nginx"
  cp "$BODY_FILE" "$root$STUB_PATH"; chmod -R a+rX "$root"
  cat > "$WORK/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 75s;
  client_body_temp_path $WORK/nginx/body; proxy_temp_path $WORK/nginx/proxy;
  fastcgi_temp_path $WORK/nginx/fcgi; uwsgi_temp_path $WORK/nginx/uwsgi; scgi_temp_path $WORK/nginx/scgi;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / { root $root; types { } default_type application/json; etag off; }
  }
}
EOF
  "$NGINX_BIN" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf" > "$WORK/nginx/out.log" 2>&1 < /dev/null &
  NGINX_PID=$!; PIDS+=("$NGINX_PID")
  NGINX_URL="http://127.0.0.1:$NGINX_PORT"
  for _ in $(seq 1 100); do curl -s -o /dev/null -m 1 "$NGINX_URL$STUB_PATH" && break; sleep 0.1; done
  if chk=$(check_resp nginx "$NGINX_URL$STUB_PATH" 200 "$BODY_FILE"); then
    meta check_nginx "$chk"
  else
    meta check_nginx "$chk"; NGINX_WHY="nginx response check failed"; NGINX_OK=0
    stop_pid "$NGINX_PID"; NGINX_PID=""
  fi
fi
if [ "$NGINX_OK" = 1 ]; then
  warm "$NGINX_URL$STUB_PATH" get
  for c in $CONCS; do bench_run nginx A "$NGINX_URL$STUB_PATH" "$c" "$NGINX_PID" get; done
  meta nginx_mem "$(mem_kb "$NGINX_PID")"
else
  meta nginx "$(jstr "unavailable: $NGINX_WHY")"
fi

# ---- 3. understudy: workload A and the state workload ------------------------------------
spawn_server main --config "$HERE/project/understudy.json" --listen 127.0.0.1:0 --data-dir "$WORK/data-main" \
  || { echo "bench/run.sh: $SRV_FAIL" >&2; exit 1; }
MAIN_PID=$SRV_PID; US="$SRV_URL"
meta understudy_startup "{\"ready_ms\":$SRV_READY_MS,\"mem_after_start\":$(mem_kb "$MAIN_PID")}"
chk=$(check_resp understudy-A "$US/crm$STUB_PATH" 200 "$BODY_FILE") \
  || { meta check_understudy_A "$chk"; echo "bench/run.sh: understudy workload A check failed: $chk" >&2; exit 1; }
meta check_understudy_A "$chk"
# The state workload's check: a reset (rule), then two bumps with different `By` (as the load
# sends them) whose `previous_by` reads the state the call before wrote.
post=(-X POST -H "Content-Type: application/json")
echo '{"id":"a0C000000000001AAA","success":true,"errors":[],"reset":true}' > "$WORK/exp.reset.json"
echo '{"id":"a0C000000000001AAA","success":true,"errors":[],"previous_by":"nobody"}' > "$WORK/exp.bump1.json"
echo '{"id":"a0C000000000001AAA","success":true,"errors":[],"previous_by":"w1"}' > "$WORK/exp.bump2.json"
state_ok=1
c1=$(check_resp bump-reset "$US/crm$BUMP_PATH" 200 "$WORK/exp.reset.json" "${post[@]}" -d '{"Name":"c1","By":"reset"}') || state_ok=0
c2=$(check_resp bump-1 "$US/crm$BUMP_PATH" 201 "$WORK/exp.bump1.json" "${post[@]}" -d '{"Name":"c1","By":"w1"}') || state_ok=0
c3=$(check_resp bump-2 "$US/crm$BUMP_PATH" 201 "$WORK/exp.bump2.json" "${post[@]}" -d '{"Name":"c1","By":"w2"}') || state_ok=0
meta check_understudy_state "[$c1,$c2,$c3]"

# Evidence is recorded for these calls: a fresh attempt, 3 calls with its token, its evidence.
ev=$(curl -s -m 10 -X POST -H 'Content-Type: application/json' -d '{"test_run_id":"bench"}' "$US/_understudy/api/attempts" || true)
ev_check=$(python3 - "$US" "$STUB_PATH" "$BUMP_PATH" "$BUMP_BODY" "$ev" <<'PY'
import json, sys, urllib.request
us, stub, bump, body, created = sys.argv[1:]
try:
    a = json.loads(created); tok, aid = a["token"], a["attempt_id"]
    h = {"Understudy-Attempt": tok}
    for _ in range(2):
        urllib.request.urlopen(urllib.request.Request(us + "/crm" + stub, headers=h), timeout=10).read()
    urllib.request.urlopen(urllib.request.Request(us + "/crm" + bump, data=body.encode(), method="POST",
        headers={**h, "Content-Type": "application/json"}), timeout=10).read()
    e = json.loads(urllib.request.urlopen(us + f"/_understudy/api/attempts/{aid}/evidence", timeout=10).read())
    ev = e.get("tool_events", [])
    print(json.dumps({"ok": len(ev) == 3 and [x["result_status"] for x in ev] == ["ok"] * 3,
                      "events": len(ev), "expected": 3, "verdict": e.get("verdict"),
                      "final_state": e.get("final_state")}))
except Exception as x:
    print(json.dumps({"ok": False, "error": f"unavailable: {type(x).__name__}: {x}"[:300]}))
PY
)
meta evidence_check "$ev_check"

meta understudy_mem_idle "$(mem_kb "$MAIN_PID")"
warm "$US/crm$STUB_PATH" get
for c in $CONCS; do bench_run understudy A "$US/crm$STUB_PATH" "$c" "$MAIN_PID" get; done
meta understudy_mem_after_A "$(mem_kb "$MAIN_PID")"
if [ "$state_ok" = 1 ]; then
  warm "$US/crm$BUMP_PATH" post
  for c in $CONCS; do bench_run understudy state "$US/crm$BUMP_PATH" "$c" "$MAIN_PID" post; done
  meta understudy_mem_after_state "$(mem_kb "$MAIN_PID")"
  # every call changed the state: the default attempt's last_by is a late `w<n>` of the last run
  meta state_after_load "$(curl -s -m 10 "$US/_understudy/api/attempts/default/state" | python3 -c '
import json, re, sys
try: b = json.load(sys.stdin)["state"]["crm"]["last_by"]
except Exception as e: print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"[:200]})); sys.exit()
m = re.fullmatch(r"w(\d+)", str(b))
print(json.dumps({"ok": bool(m) and int(m.group(1)) > 2, "last_by": b}))')"
else
  meta state "$(jstr "unavailable: the bump_counter response check failed (see check_understudy_state)")"
fi
t0=$EPOCHREALTIME; stop_pid "$MAIN_PID"; t1=$EPOCHREALTIME
meta understudy_shutdown_ms "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b-a)*1000}')"
meta understudy_data_dir_kb "$(du -sk "$WORK/data-main" | cut -f1)"

# ---- 4. dry-run forwarding overhead -------------------------------------------------------
# dry_run_project DIR : a project in DIR whose crm integration forwards to the nginx above and
# has no mock for the GET path (bump_counter only)
dry_run_project() {
  mkdir -p "$1/mocks/crm"
  cp "$HERE/project/mocks/crm/bump_counter.json" "$1/mocks/crm/"
  printf '{"mode":"dry-run","integrations":{"crm":{"profile":"salesforce","upstream":"%s","operations":"mocks/crm","unmatched_writes":"block"}}}\n' "$NGINX_URL" > "$1/understudy.json"
}
# with_durability DIR : set `"durability": "attempt"` (top level) in DIR/understudy.json
with_durability() {
  python3 - "$1/understudy.json" <<'PY'
import json, sys
p = sys.argv[1]; c = json.load(open(p)); c["durability"] = "attempt"
json.dump(c, open(p, "w"), indent=2)
PY
}
# dry_run_section NAME KEY TARGET PROJECT_DIR CONCS : start the dry-run server of PROJECT_DIR,
# check the forwarded read, measure it at CONCS (target TARGET, workload B); meta KEY holds
# "unavailable: <reason>" when it cannot run, else KEY_check and KEY_mem.
dry_run_section() {
  local name="$1" key="$2" target="$3" d="$4" concs="$5" c chk
  if ! spawn_server "$name" --config "$d/understudy.json" --listen 127.0.0.1:0 --mode dry-run --data-dir "$WORK/data-$name"; then
    meta "$key" "$(jstr "unavailable: $SRV_FAIL")"
  elif ! chk=$(check_resp "$name" "$SRV_URL/crm$STUB_PATH" 200 "$BODY_FILE"); then
    meta "$key" "$(jstr "unavailable: the forwarded read failed its response check: $chk")"
    stop_pid "$SRV_PID"
  else
    meta "${key}_check" "$chk"
    local pid=$SRV_PID url="$SRV_URL/crm$STUB_PATH"
    warm "$url" get "$(echo "$concs" | tr ' ' '\n' | sort -n | tail -1)"
    for c in $concs; do bench_run "$target" B "$url" "$c" "$pid" get; done
    meta "${key}_mem" "$(mem_kb "$pid")"
    stop_pid "$pid"
  fi
}
if [ "$NGINX_OK" != 1 ]; then
  meta dry_run "$(jstr "unavailable: no nginx upstream ($NGINX_WHY)")"
else
  dry_run_project "$WORK/dryrun"
  dry_run_section dryrun dry_run understudy-dry-run "$WORK/dryrun" "$CONCS"
fi

# ---- 4b. opt-in durability "attempt": replay and dry-run at c=1 ----------------------------
# The same project with `"durability": "attempt"` added: evidence written in order, flushed in
# the background, durable when the attempt is read for a verdict or ended. An older build
# refuses the key at start: the section says "unavailable: <reason>" and the run goes on.
d="$WORK/durable"; mkdir -p "$d"; cp -r "$HERE/project/." "$d/"; with_durability "$d"
if ! spawn_server durable --config "$d/understudy.json" --listen 127.0.0.1:0 --data-dir "$WORK/data-durable"; then
  meta durability "$(jstr "unavailable: $SRV_FAIL")"
elif ! chk=$(check_resp understudy-durable "$SRV_URL/crm$STUB_PATH" 200 "$BODY_FILE"); then
  meta durability "$(jstr "unavailable: the replay failed its response check: $chk")"
  stop_pid "$SRV_PID"
else
  meta durability_check "$chk"
  DUR_PID=$SRV_PID; DUR_URL="$SRV_URL/crm$STUB_PATH"
  warm "$DUR_URL" get 1
  RUN_DUR=$XDUR bench_run understudy-durability-attempt A "$DUR_URL" 1 "$DUR_PID" get
  stop_pid "$DUR_PID"
  if [ "$NGINX_OK" != 1 ]; then
    meta dry_run_durable "$(jstr "unavailable: no nginx upstream ($NGINX_WHY)")"
  else
    dry_run_project "$WORK/dryrun-durable"; with_durability "$WORK/dryrun-durable"
    RUN_DUR=$XDUR dry_run_section dryrun-durable dry_run_durable understudy-dry-run-durability-attempt "$WORK/dryrun-durable" 1
  fi
fi

# ---- 4c. RSS after RSS_DUR s of replay at the highest concurrency (a fresh server) --------
if spawn_server rss --config "$HERE/project/understudy.json" --listen 127.0.0.1:0 --data-dir "$WORK/data-rss"; then
  RSS_PID=$SRV_PID
  meta rss_load_before "$(mem_kb "$RSS_PID")"
  RUN_DUR=$RSS_DUR bench_run understudy-rss A "$SRV_URL/crm$STUB_PATH" "$CMAX" "$RSS_PID" get
  meta rss_load_after "$(mem_kb "$RSS_PID")"
  stop_pid "$RSS_PID"
else
  meta rss_load_after "$(jstr "unavailable: $SRV_FAIL")"
fi

# ---- 5. start-up with OPS operation files -------------------------------------------------
big="$WORK/ops"; log "generating $OPS operation files"
probe=$(python3 "$HERE/gen_ops.py" "$big" "$OPS")
meta ops_files "{\"count\":$OPS,\"kb\":$(du -sk "$big/mocks" | cut -f1)}"
for phase in cold warm; do   # cold: empty data dir (every file becomes a revision); warm: same dir again
  if spawn_server "ops-$phase" --config "$big/understudy.json" --listen 127.0.0.1:0 --data-dir "$WORK/data-ops"; then
    m=$(mem_kb "$SRV_PID")
    code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "$SRV_URL${probe#GET }" || echo 000)
    meta "startup_${phase}" "{\"ready_ms\":$SRV_READY_MS,\"mem_after_start\":$m,\"probe_status\":$code}"
    if [ "$phase" = warm ]; then
      # A hot reload of one rewritten file among OPS (time to the `hot reload` log line, the
      # files it read, CPU, RSS growth), then attempt creation on one keep-alive connection.
      meta reload "$(python3 "$HERE/reload_probe.py" "$SRV_PID" "$WORK/ops-$phase.stderr" "$big" "$SRV_URL" 2>&1 \
        || echo '{"error":"reload_probe.py failed"}')"
      att=$(curl -s -m 30 -o "$WORK/attempt.json" -w '%{http_code} %{size_download} %{time_total}' -X POST \
        -H 'Content-Type: application/json' -d '{}' "$SRV_URL/_understudy/api/attempts" || echo "000 0 0")
      meta attempt_one "$(python3 -c 'import json,sys; c,b,t=sys.argv[1].split(); print(json.dumps({"status":int(c),"bytes":int(b),"curl_ms":round(float(t)*1000,2)}))' "$att")"
      RUN_DUR=$ATT_DUR bench_run understudy-attempts attempts "$SRV_URL/_understudy/api/attempts" 1 "$SRV_PID" attempts
    fi
    stop_pid "$SRV_PID"
  else
    meta "startup_${phase}" "$(jstr "unavailable: $SRV_FAIL")"
  fi
done
meta ops_data_dir_kb "$(du -sk "$WORK/data-ops" 2>/dev/null | cut -f1 || echo null)"

if [ -n "$NGINX_PID" ]; then stop_pid "$NGINX_PID"; fi

# ---- 6. engine evaluation (criterion), after every server stopped ------------------------
if [ "$ENGINE" = 1 ]; then
  log "cargo bench --bench engine -- $ENGINE_ARGS"
  stamp="$WORK/engine.stamp"; touch "$stamp"
  # shellcheck disable=SC2086 # ENGINE_ARGS are criterion's flags, split on purpose
  if (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" cargo bench --bench engine -- $ENGINE_ARGS) > "$WORK/engine.log" 2>&1; then
    meta engine "$(python3 - "$TARGET_DIR/criterion" "$stamp" "$ENGINE_ARGS" <<'PY'
import glob, json, os, sys
root, stamp, args = sys.argv[1], os.path.getmtime(sys.argv[2]), sys.argv[3]
out = []
for est in sorted(glob.glob(os.path.join(root, "**", "new", "estimates.json"), recursive=True)):
    if os.path.getmtime(est) < stamp:
        continue  # another bench's or an older run's
    d = os.path.dirname(est)
    try:
        title = json.load(open(os.path.join(d, "benchmark.json"))).get("full_id")
    except Exception:
        title = os.path.relpath(os.path.dirname(d), root)
    e = json.load(open(est))
    out.append({"bench": title, "mean_ns": round(e["mean"]["point_estimate"], 1),
                "median_ns": round(e["median"]["point_estimate"], 1),
                "mean_ci95_ns": [round(e["mean"]["confidence_interval"]["lower_bound"], 1),
                                 round(e["mean"]["confidence_interval"]["upper_bound"], 1)]})
print(json.dumps({"args": args, "benches": out} if out
                 else "unavailable: no fresh estimates.json under " + root))
PY
)"
  else
    meta engine "$(jstr "unavailable: cargo bench failed: $(tail -n 3 "$WORK/engine.log" | tr '\n' ' ' | cut -c1-300)")"
  fi
else
  meta engine "$(jstr "unavailable: ENGINE=0")"
fi
meta loadavg_end "$(jstr "$(loadavg)")"

# ---- 7. the JSON document (stdout) and its targets table (stderr) ------------------------
python3 "$HERE/report.py" "$META" "$RUNS" > "$WORK/report.json"
cat "$WORK/report.json"
{ echo; echo "targets (issue 20), this sitting:"; python3 "$HERE/targets.py" "$WORK/report.json"; } >&2
