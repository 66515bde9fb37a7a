#!/usr/bin/env bash
# One sitting, one command: the peer mock servers (bench/peers, vendored: nginx, WireMock,
# Mountebank, mockttp, mitmproxy, Prism), then understudy's own harness (bench/run.sh), on the
# same machine minutes apart, with the same generator (wrk -t1), durations and concurrencies.
# Prints Markdown tables with understudy's ratios to every peer and issue 20's targets (target,
# figure, threshold, met / not met; bench/side_by_side.py); keeps the raw JSON.
#
#   bash bench/side_by_side.sh                 # DUR=15 s per run, c=1 and c=64 (~20 min: peers
#                                              # ~10, run.sh ~7, plus the builds)
#   DUR=30 WARM=5 bash bench/side_by_side.sh   # the peers' own default durations
#
# Env: PEERS_DIR (default bench/peers, in this repository), PERF_HOME (/tmp/peer-bench),
# OUT (bench/results), DUR, WARM, QUIET_MAX/QUIET_CORES (passed to both harnesses).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$HERE/peers}"
export PERF_HOME="${PERF_HOME:-/tmp/peer-bench}"
export DUR="${DUR:-15}" WARM="${WARM:-3}" GENS=wrk CONCS="1 64"
OUT="${OUT:-$ROOT/bench/results}"
STAMP="$(date -u +%Y-%m-%dT%H%M)"
PASS="sbs-$STAMP"
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

[ -d "$PEERS_DIR" ] || { echo "peer harness not found at $PEERS_DIR (set PEERS_DIR)" >&2; exit 2; }
if [ ! -d "$PERF_HOME/node/node_modules/wiremock" ] || [ ! -x "$PERF_HOME/venv/bin/mitmdump" ]; then
  log "installing the peers (once): bash $PEERS_DIR/setup.sh"
  bash "$PEERS_DIR/setup.sh" >&2
fi
mkdir -p "$OUT"
log "peers, pass $PASS (DUR=$DUR WARM=$WARM, wrk)"
PASSES="$PASS" bash "$PEERS_DIR/run_all.sh" > "$OUT/$STAMP-peers.md" || log "some peer failed (see above)"
cp "$PERF_HOME/results/results.jsonl" "$OUT/$STAMP-peers-results.jsonl"
cp "$PERF_HOME/results/mem.jsonl" "$OUT/$STAMP-peers-mem.jsonl" 2>/dev/null || true
log "understudy: bench/run.sh"
bash "$HERE/run.sh" > "$OUT/$STAMP-understudy.json"
python3 "$HERE/side_by_side.py" "$OUT/$STAMP-peers-results.jsonl" "$OUT/$STAMP-understudy.json" "$PASS" \
  | tee "$OUT/$STAMP-side-by-side.md"
