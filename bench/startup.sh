#!/usr/bin/env bash
# bench/startup.sh — start-up with OPS operation files only (bench/run.sh's section 5 without
# the rest): a project from bench/gen_ops.py, then for each binary given, RUNS times: a cold
# start (empty data dir) and a warm one (the same dir again), each until the readiness line
# `understudy listening on …`, printing the time to it and the RSS then. Not a test.
#
#   bash bench/startup.sh target/release/understudy [OTHER_BINARY…]   # OPS=10000 RUNS=2
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OPS="${OPS:-10000}"; RUNS="${RUNS:-2}"
[ $# -ge 1 ] || { echo "usage: bash bench/startup.sh BINARY [BINARY…]" >&2; exit 2; }
WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
python3 "$HERE/gen_ops.py" "$WORK/ops" "$OPS" > /dev/null
for run in $(seq 1 "$RUNS"); do
  for bin in "$@"; do
    data="$WORK/data"; rm -rf "$data"
    for phase in cold warm; do
      log="$WORK/$phase.log"; : > "$log"
      start=$(date +%s%N)
      "$bin" serve --config "$WORK/ops/understudy.json" --listen 127.0.0.1:0 --data-dir "$data" > "$log" 2>&1 &
      pid=$!
      until grep -q "listening on" "$log"; do
        kill -0 "$pid" 2>/dev/null || { echo "bench/startup.sh: $bin exited:" >&2; tail -5 "$log" >&2; exit 1; }
        sleep 0.01
      done
      ms=$(( ($(date +%s%N) - start) / 1000000 ))
      rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
      echo "run $run  $bin  $phase  ready_ms=$ms  rss_mib=$(awk -v k="$rss" 'BEGIN {printf "%.1f", k/1024}')"
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
  done
done
