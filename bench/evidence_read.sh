#!/usr/bin/env bash
# Evidence read in bounded memory (issue 34, item 4): one attempt of N entries (default
# 1 000 000) is written into a fresh data dir through the store's own write path
# (bench/evidence_fill.rs), `understudy serve` is started on it, and one
# `GET /_understudy/api/attempts/ID/evidence` is read to the end. Prints the answer's size,
# its time and MB/s, and the server's RSS before the GET and its peak (VmHWM) after it: the
# growth is what the read added. Targets: growth <= 64 MiB, >= 50 MB/s. Also times one page
# (?after=N/2&limit=1000) and `understudy evidence --url` (the CLI's own RSS peak), and
# `understudy report --report-dir` (all three formats) of the same attempt, through --url and
# from the data dir after the server stopped: each one's time, output sizes and peak RSS.
#
#   bash bench/evidence_read.sh            # N=1000000
#   N=200000 BUILD=0 bash bench/evidence_read.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-1000000}"
PORT="${PORT:-17931}"
PROFILE="${PROFILE:-release}"   # PROFILE=debug: the dev build (figures say so)
flag=--release; [ "$PROFILE" = debug ] && flag=
if [ "${BUILD:-1}" = 1 ]; then
    cargo build $flag --bin understudy --example evidence_fill >&2
fi
BIN=target/$PROFILE/understudy
FILL=target/$PROFILE/examples/evidence_fill
echo "profile: $PROFILE, N=$N, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
work="$(mktemp -d)"
trap 'kill "$srv" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/ops"
cat >"$work/understudy.json" <<JSON
{ "listen": "127.0.0.1:$PORT", "data_dir": "$work/data", "mode": "replay",
  "integrations": { "crm": { "profile": "salesforce", "operations": "$work/ops" } } }
JSON
t0=$(date +%s.%N)
"$FILL" "$work/data" bench-evidence "$N" >&2
t1=$(date +%s.%N)
echo "fill: $N entries in $(echo "$t1 - $t0" | bc) s; evidence file $(du -sh "$work/data/events" | cut -f1)"

"$BIN" serve --config "$work/understudy.json" >"$work/serve.log" 2>&1 &
srv=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$PORT/_understudy/api/health" >/dev/null && break
    sleep 0.1
done
kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$srv/status"; }
before=$(kb VmRSS)
url="http://127.0.0.1:$PORT/_understudy/api/attempts/bench-evidence/evidence"
read -r size secs <<<"$(curl -s -o "$work/env.json" -w '%{size_download} %{time_total}' "$url")"
peak=$(kb VmHWM)
tail_bytes=$(tail -c 40 "$work/env.json")
echo "GET evidence: $size bytes in $secs s = $(echo "scale=1; $size / $secs / 1000000" | bc) MB/s; ends: …$tail_bytes"
echo "server RSS: before $((before / 1024)) MiB, peak after $((peak / 1024)) MiB, growth $(((peak - before) / 1024)) MiB (target <= 64)"
read -r psize psecs <<<"$(curl -s -o /dev/null -w '%{size_download} %{time_total}' "$url?after=$((N / 2))&limit=1000")"
echo "one page (after=$((N / 2)), limit=1000): $psize bytes in $psecs s (one judging pass over all $N entries)"
/usr/bin/time -f '%M' -o "$work/cli.rss" "$BIN" evidence bench-evidence --url "http://127.0.0.1:$PORT" >/dev/null 2>"$work/cli.err" || true
echo "understudy evidence --url: peak RSS $(( $(tail -1 "$work/cli.rss") / 1024 )) MiB"
# The reports of the same attempt: JSON, JUnit XML and HTML in one run, through the server and
# then from the data dir (the server stopped first: it holds the store while it runs).
report() {
    local how="$1"; shift
    rm -rf "$work/reports"
    local t0 t1
    t0=$(date +%s.%N)
    /usr/bin/time -f '%M' -o "$work/report.rss" "$BIN" report bench-evidence --report-dir "$work/reports" "$@" \
        >/dev/null 2>"$work/report.err" || { echo "understudy report ($how) failed: $(tail -2 "$work/report.err")"; return; }
    t1=$(date +%s.%N)
    echo "understudy report --report-dir ($how): $(echo "$t1 - $t0" | bc) s, $(du -sh "$work/reports" | cut -f1) written ($(cd "$work/reports" && ls | tr '\n' ' ')), peak RSS $(( $(tail -1 "$work/report.rss") / 1024 )) MiB"
}
report "--url" --url "http://127.0.0.1:$PORT"
kill "$srv"; wait "$srv" 2>/dev/null || true
report "data dir" --data-dir "$work/data" --config "$work/understudy.json"
