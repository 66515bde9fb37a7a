#!/usr/bin/env bash
# bench/soak.sh — understudy's soak test (see bench/README.md, "Soak"). Not part of CI.
#
# One release `understudy serve` on 127.0.0.1, DUR seconds (600) of wrk at CONNS (64)
# keep-alive connections spread over ATTEMPTS (50) attempts created through the admin API, with
# a mixed workload rotated per request: 4/7 reads (get_contact), 2/7 writes that change state
# (bump_counter), 1/7 slow reads (get_case, delay_ms 20). Every SAMPLE (10) s the server's RSS,
# open fds and threads are sampled; wrk runs in SEG-second segments back to back so p50/p99 and
# errors can be followed over time (p99 drift = last segment ÷ first). At the end every
# attempt's evidence is read back through GET /_understudy/api/attempts/{id}/evidence and
# checked: sequences 1..n without a gap or repeat, every result_status `ok`, verdict `pass`.
#
# Output: ONE JSON document on stdout (progress on stderr); `ok` is true when nothing failed.
# The data dir lives under $TMPDIR and is removed unless KEEP=1 (a 10-minute run writes a few
# GB: ~1.5 KiB per call).
#
# Usage:
#   bash bench/soak.sh                       # 10 minutes
#   DUR=60 bash bench/soak.sh                # a one-minute proof that it works
# Knobs (env): DUR (600) CONNS (64) ATTEMPTS (50) SAMPLE (10) SEG (60, or DUR/6 when DUR < 360)
#   BUILD 1 (cargo build --release first) | 0   BIN (default $CARGO_TARGET_DIR or ./target, release)
#   KEEP=1 keep the work dir   RSS_SLACK_KB (16384) FD_SLACK (16): the bounds below
#
# "Bounded": the highest RSS of the second half of the run ≤ 1.25 × the highest RSS of the first
# half + RSS_SLACK_KB, and likewise open fds ≤ first-half max + FD_SLACK; the read-back of every
# attempt's evidence keeps the server's peak RSS (VmHWM) ≤ 1.25 × the load phase's highest
# sample + RSS_SLACK_KB (`readback_rss_kb`). The process helpers
# (spawn_server, stop_pid, alive) are bench/run.sh's, copied so this script stands alone.
set -euo pipefail
export LC_ALL=C

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
DUR="${DUR:-600}"
CONNS="${CONNS:-64}"
ATTEMPTS="${ATTEMPTS:-50}"
SAMPLE="${SAMPLE:-10}"
if [ -z "${SEG:-}" ]; then
  if [ "$DUR" -lt 360 ]; then SEG=$(( DUR / 6 > 5 ? DUR / 6 : 5 )); else SEG=60; fi
fi
BUILD="${BUILD:-1}"
KEEP="${KEEP:-0}"
RSS_SLACK_KB="${RSS_SLACK_KB:-16384}"
FD_SLACK="${FD_SLACK:-16}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-120}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="${BIN:-$TARGET_DIR/release/understudy}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/understudy-soak.XXXXXX")"
declare -a PIDS=()
declare -A FDS=()
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# ---- process bookkeeping (as bench/run.sh: only PIDs recorded here are ever signalled) -----
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
stop_pid() {
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 300); do
    alive "$pid" || break
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

# spawn_server NAME ARGS... : as bench/run.sh (readiness line read from a fifo, no sleeping).
spawn_server() {
  local name="$1"; shift
  local fifo="$WORK/$name.stdout" fd line="" deadline rc part="" chunk
  SRV_PID=""; SRV_URL=""; SRV_FAIL=""
  rm -f "$fifo"; mkfifo "$fifo"
  exec {fd}<>"$fifo"
  "$BIN" serve "$@" > "$fifo" 2> "$WORK/$name.stderr" < /dev/null &
  SRV_PID=$!
  PIDS+=("$SRV_PID"); FDS[$SRV_PID]=$fd
  deadline=$((EPOCHSECONDS + STARTUP_TIMEOUT))
  while :; do
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
  SRV_URL="${line#understudy listening on }"
  log "$name ready at $SRV_URL (pid $SRV_PID)"
}

# ---- 0. tools and build ---------------------------------------------------------------------
command -v wrk > /dev/null || { echo "bench/soak.sh: wrk is required (apt-get install wrk; bench/run.sh installs it)" >&2; exit 2; }
command -v curl > /dev/null || { echo "bench/soak.sh: curl is required" >&2; exit 2; }
if [ "$BUILD" = 1 ]; then
  log "cargo build --release (target dir $TARGET_DIR)"
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" cargo build --release --bin understudy) >&2
fi
[ -x "$BIN" ] || { echo "bench/soak.sh: no binary at $BIN" >&2; exit 2; }

# ---- 1. the soak project: bench/project plus a slow read ------------------------------------
PROJ="$WORK/project"
mkdir -p "$PROJ/mocks/crm"
cp "$HERE/project/understudy.json" "$PROJ/"
cp "$HERE"/project/mocks/crm/*.json "$PROJ/mocks/crm/"
cat > "$PROJ/mocks/crm/get_case.json" <<'EOF'
{
  "operation_id": "get_case",
  "description": "Soak: a slow read (the variant waits 20 ms after the call is recorded)",
  "match": { "method": "GET", "path": "/services/data/*/sobjects/Case/{id}" },
  "input_schema": { "type": "object", "required": ["id"], "properties": { "id": { "type": "string" } } },
  "output_schema": { "type": "object", "required": ["status", "data"] },
  "mock": {
    "schema_version": 1,
    "default_variant": "ok",
    "variants": { "ok": {
      "result": { "status": 200, "data": { "attributes": { "type": "Case" }, "Id": { "$input": "id" }, "Status": "New" } },
      "delay_ms": 20
    } },
    "examples": [ { "variant": "ok", "input": { "id": "500000000000001" },
                    "expected": { "status": 200, "data": { "attributes": { "type": "Case" }, "Id": "500000000000001", "Status": "New" } } } ]
  }
}
EOF
# Rotates attempts (token path prefix) and operations per request. 7 and ATTEMPTS are
# coprime for the default 50, so every attempt sees every kind of call.
cat > "$WORK/soak.lua" <<'EOF'
local tokens = {}
for t in string.gmatch(os.getenv("SOAK_TOKENS") or "", "[^,]+") do tokens[#tokens + 1] = t end
local read_path = "/crm/services/data/v60.0/sobjects/Contact/003000000000001"
local slow_path = "/crm/services/data/v60.0/sobjects/Case/500000000000001"
local bump_path = "/crm/services/data/v60.0/sobjects/Counter__c"
local json = { ["Content-Type"] = "application/json" }
local i = 0
request = function()
  i = i + 1
  local base = "/~" .. tokens[(i % #tokens) + 1]
  local k = i % 7
  if k < 4 then
    return wrk.format("GET", base .. read_path)
  elseif k < 6 then
    return wrk.format("POST", base .. bump_path, json, '{"Name":"c1","By":"soak"}')
  else
    return wrk.format("GET", base .. slow_path)
  end
end
EOF
cat "$WORK/soak.lua" "$HERE/peers/wrk_report.lua" > "$WORK/soak_report.lua"

# ---- 2. server and attempts -------------------------------------------------------------------
spawn_server soak --config "$PROJ/understudy.json" --listen 127.0.0.1:0 --data-dir "$WORK/data" \
  || { echo "bench/soak.sh: $SRV_FAIL" >&2; exit 1; }
PID=$SRV_PID; US=$SRV_URL
: > "$WORK/attempts.jsonl"
for i in $(seq 1 "$ATTEMPTS"); do
  curl -sf -m 10 -X POST -H 'Content-Type: application/json' -d "{\"test_run_id\":\"soak-$i\"}" \
    "$US/_understudy/api/attempts" >> "$WORK/attempts.jsonl" \
    || { echo "bench/soak.sh: attempt creation $i failed" >&2; exit 1; }
  echo >> "$WORK/attempts.jsonl"
done
TOKENS=$(python3 -c 'import json,sys; print(",".join(json.loads(l)["token"] for l in open(sys.argv[1]) if l.strip()))' "$WORK/attempts.jsonl")
for p in /crm/services/data/v60.0/sobjects/Contact/003000000000001 /crm/services/data/v60.0/sobjects/Case/500000000000001; do
  code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "$US/~${TOKENS%%,*}$p")
  [ "$code" = 200 ] || { echo "bench/soak.sh: check GET $p answered $code" >&2; exit 1; }
done
log "$ATTEMPTS attempts created"

# ---- 3. sampler + load ------------------------------------------------------------------------
sample() {
  local t0=$1 rss fds thr
  rss=$(awk '/^VmRSS:/{print $2}' "/proc/$PID/status" 2>/dev/null || echo null)
  thr=$(awk '/^Threads:/{print $2}' "/proc/$PID/status" 2>/dev/null || echo null)
  fds=$(ls "/proc/$PID/fd" 2>/dev/null | wc -l)
  printf '{"t_s":%s,"rss_kb":%s,"fds":%s,"threads":%s,"data_dir_kb":%s}\n' \
    "$((EPOCHSECONDS - t0))" "${rss:-null}" "$fds" "${thr:-null}" "$(du -sk "$WORK/data" 2>/dev/null | cut -f1)"
}
T0=$EPOCHSECONDS
sample "$T0" > "$WORK/samples.jsonl"
(
  while alive "$PID"; do
    sleep "$SAMPLE"
    sample "$T0" >> "$WORK/samples.jsonl"
  done
) &
SAMPLER=$!
PIDS+=("$SAMPLER")

: > "$WORK/segments.jsonl"
left=$DUR; seg=0
while [ "$left" -gt 0 ]; do
  d=$(( left < SEG ? left : SEG ))
  out=$(SOAK_TOKENS="$TOKENS" wrk -t1 -c"$CONNS" -d"${d}s" --timeout 10s --latency -s "$WORK/soak_report.lua" "$US" 2>&1) || true
  res=$(printf '%s\n' "$out" | python3 "$HERE/peers/parse_gen.py" wrk) || res=null
  printf '{"segment":%d,"start_s":%d,"dur_s":%d,"alive":%s,"r":%s}\n' "$seg" "$((DUR - left))" "$d" \
    "$(alive "$PID" && echo true || echo false)" "$res" >> "$WORK/segments.jsonl"
  log "segment $seg (${d}s): $res"
  alive "$PID" || { log "the server died during segment $seg"; break; }
  left=$((left - d)); seg=$((seg + 1))
done
sample "$T0" >> "$WORK/samples.jsonl"
kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true

# ---- 4. evidence of every attempt, then the summary ------------------------------------------
SERVER_ALIVE=$(alive "$PID" && echo true || echo false)
python3 - "$US" "$WORK" "$DUR" "$CONNS" "$ATTEMPTS" "$SAMPLE" "$SEG" "$RSS_SLACK_KB" "$FD_SLACK" "$SERVER_ALIVE" "$PID" \
  "$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$ROOT" && git diff --quiet HEAD 2>/dev/null || echo '+dirty')" \
  > "$WORK/summary.json" <<'PY'
import json, sys, urllib.request
us, work, dur, conns, attempts, sample, seg, rss_slack, fd_slack, alive, pid, rev = sys.argv[1:]
dur, conns, attempts, sample, seg = int(dur), int(conns), int(attempts), int(sample), int(seg)
rss_slack, fd_slack, alive = int(rss_slack), int(fd_slack), alive == "true"
rows = lambda f: [json.loads(l) for l in open(f"{work}/{f}") if l.strip()]
created = rows("attempts.jsonl"); samples = rows("samples.jsonl"); segments = rows("segments.jsonl")

ev = {"attempts": len(created), "events": 0, "gaps": [], "not_ok": {}, "verdicts": {}, "read_errors": []}
for a in created:
    aid = a["attempt_id"]
    try:
        e = json.loads(urllib.request.urlopen(f"{us}/_understudy/api/attempts/{aid}/evidence", timeout=120).read())
    except Exception as x:
        ev["read_errors"].append(f"{aid}: {type(x).__name__}: {x}"[:300]); continue
    events = e.get("tool_events", [])
    ev["events"] += len(events)
    seqs = [x["sequence"] for x in events]
    if seqs != list(range(1, len(seqs) + 1)):
        missing = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
        ev["gaps"].append({"attempt_id": aid, "events": len(seqs), "missing_first": missing[:5]})
    for x in events:
        if x["result_status"] != "ok":
            ev["not_ok"][x["result_status"]] = ev["not_ok"].get(x["result_status"], 0) + 1
    ev["verdicts"][e.get("verdict")] = ev["verdicts"].get(e.get("verdict"), 0) + 1

def status_kb(key):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
# The read-back's cost: the server's RSS after every attempt's evidence was read, and its
# peak over the whole run (VmHWM: the load phase and the read-back alike).
readback = {"rss_kb_after": status_kb("VmRSS"), "peak_rss_kb": status_kb("VmHWM")}

def half_max(key, second):
    pts = [s for s in samples if s.get(key) is not None]
    mid = dur / 2
    sel = [s[key] for s in pts if (s["t_s"] > mid) == second]
    return max(sel) if sel else None
rss1, rss2 = half_max("rss_kb", False), half_max("rss_kb", True)
fd1, fd2 = half_max("fds", False), half_max("fds", True)
rss_bounded = rss1 is not None and rss2 is not None and rss2 <= 1.25 * rss1 + rss_slack
fd_bounded = fd1 is not None and fd2 is not None and fd2 <= fd1 + fd_slack
# Issue 34 item 4: reading the evidence back stays within the load phase's RSS bound.
load_max = max(x for x in (rss1, rss2) if x is not None) if (rss1 or rss2) else None
readback["load_max_rss_kb"] = load_max
readback["bounded"] = (load_max is not None and readback["peak_rss_kb"] is not None
                       and readback["peak_rss_kb"] <= 1.25 * load_max + rss_slack)

segs = [s for s in segments if s.get("r")]
ms = lambda us_: round(us_ / 1000, 3)
seg_rows = [{"segment": s["segment"], "start_s": s["start_s"], "dur_s": s["dur_s"],
             "requests": s["r"]["requests"], "rps": s["r"]["rps"], "p50_ms": ms(s["r"]["p50_us"]),
             "p99_ms": ms(s["r"]["p99_us"]), "max_ms": ms(s["r"]["max_us"]), "errors": s["r"]["errors"],
             "error_detail": s["r"]["detail"]} for s in segs]
requests = sum(r["requests"] for r in seg_rows); errors = sum(r["errors"] for r in seg_rows)
p99_drift = round(seg_rows[-1]["p99_ms"] / seg_rows[0]["p99_ms"], 2) if len(seg_rows) > 1 and seg_rows[0]["p99_ms"] else None
evidence_ok = (not ev["gaps"] and not ev["read_errors"] and not ev["not_ok"]
               and ev["verdicts"] == {"pass": attempts} and ev["events"] >= requests)
out = {
    "ok": bool(alive and evidence_ok and rss_bounded and fd_bounded and readback["bounded"] and errors == 0
               and len(segments) * seg >= dur and all(s["alive"] for s in segments)),
    "params": {"dur_s": dur, "conns": conns, "attempts": attempts, "sample_s": sample, "segment_s": seg,
               "mix": "4/7 get_contact, 2/7 bump_counter (state write), 1/7 get_case (delay_ms 20)",
               "build": rev},
    "server_alive_at_end": alive,
    "load": {"requests": requests, "errors": errors, "rps": round(requests / dur, 1) if dur else None,
             "p99_drift": p99_drift, "segments": seg_rows},
    "evidence": {**ev, "events_ge_answered": ev["events"] >= requests, "ok": evidence_ok},
    "rss_kb": {"start": samples[0].get("rss_kb"), "end": samples[-1].get("rss_kb"),
               "max_first_half": rss1, "max_second_half": rss2, "bounded": rss_bounded},
    "readback_rss_kb": readback,
    "fds": {"start": samples[0].get("fds"), "end": samples[-1].get("fds"),
            "max_first_half": fd1, "max_second_half": fd2, "bounded": fd_bounded},
    "data_dir_kb_end": samples[-1].get("data_dir_kb"),
    "samples": samples,
}
print(json.dumps(out, indent=1))
PY
stop_pid "$PID"
cat "$WORK/summary.json"
python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$WORK/summary.json"
