#!/usr/bin/env bash
# Replay throughput with OpenTelemetry export off, on (a loopback collector) and pointed at a
# dead endpoint, in one sitting (bench/otel.py): requests per second, p50/p99 latency, and the
# span counters of /metrics after each run. Export must not cost an answer's latency: a dead
# collector shows up only in understudy_otel_spans_dropped_total.
#   bench/otel.sh                                   # builds the release binary first
#   UNDERSTUDY_BIN=path BENCH_SECONDS=3 BENCH_CONNS=4 bench/otel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${UNDERSTUDY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=$PWD/target/release/understudy
fi
python3 bench/otel.py "$bin"
