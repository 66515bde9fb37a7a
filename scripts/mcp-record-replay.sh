#!/usr/bin/env bash
# Record a real MCP server, then replay the recording (docs/src/reference/mcp.md, issue 16): the proof that a
# recorded MCP session replays with its resources, prompts, completions, notifications and
# server-to-client requests.
#
#   scripts/mcp-record-replay.sh
#
# 1. installs the reference server of the conformance suite (tests/mcp-record/everything-server/,
#    `npm ci` into target/mcp-conformance/everything-server/) and starts it on a free loopback
#    port;
# 2. runs the conformance suite against it directly (the baseline);
# 3. runs `understudy serve --mode record --out DIR --allow-writes` in front of it and the suite
#    again through understudy (the recording; its tools are not annotated read-only, so they
#    count as writes, which a recording blocks unless --allow-writes);
# 4. stops understudy (the drafts are written on stop) and the real server;
# 5. `understudy check` on the project the drafts make — the project file beside them names
#    the drafts directory as its operations directory, so the drafts ARE the replay project;
# 6. serves that project in replay mode and runs the suite a third time: every scenario that
#    passed against the real server must pass against the replay (exit 1 otherwise).
# The scenarios are those of scripts/mcp-conformance.sh (every active server scenario).
# Needs Node 20+ and npm. Environment: UNDERSTUDY_BIN (skip the build), CONFORMANCE_VERSION,
# RECORD_REPLAY_DIR (keep the project there instead of a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

command -v npm >/dev/null || { echo "mcp-record-replay: npm (Node 20+) is required" >&2; exit 1; }
if [ -n "${UNDERSTUDY_BIN:-}" ]; then
  bin=$UNDERSTUDY_BIN
else
  cargo build --quiet --locked
  bin=$root/target/debug/understudy
fi
export UNDERSTUDY_BIN=$bin

# The reference server, installed once (the lock file decides what a reinstall gets).
src=$root/tests/mcp-record/everything-server
srv=$root/target/mcp-conformance/everything-server
if ! cmp -s "$src/package-lock.json" "$srv/package-lock.json" || [ ! -x "$srv/node_modules/.bin/tsx" ]; then
  echo "== installing the reference MCP server into $srv"
  mkdir -p "$srv"
  cp "$src/package.json" "$src/package-lock.json" "$srv/"
  (cd "$srv" && npm ci --no-audit --no-fund --silent)
fi
# Beside its node_modules (imports resolve from the file's directory).
cp "$src/everything-server.ts" "$srv/"

work=${RECORD_REPLAY_DIR:-$(mktemp -d)}
mkdir -p "$work"
real_pid=
cleanup() {
  if [ -n "$real_pid" ]; then kill "$real_pid" 2>/dev/null || true; wait "$real_pid" 2>/dev/null || true; fi
  [ -n "${RECORD_REPLAY_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
real_log=$work/everything-server.log
PORT=$port NODE_OPTIONS="--require $src/loopback.cjs" \
  "$srv/node_modules/.bin/tsx" "$srv/everything-server.ts" >"$real_log" 2>&1 &
real_pid=$!
for _ in $(seq 1 150); do
  grep -q 'MCP Conformance Test Server running' "$real_log" && break
  if ! kill -0 "$real_pid" 2>/dev/null; then cat "$real_log"; echo "the reference server exited" >&2; exit 1; fi
  sleep 0.1
done
grep -q 'MCP Conformance Test Server running' "$real_log" || { cat "$real_log"; echo "the reference server did not start" >&2; exit 1; }
real_url=http://127.0.0.1:$port/mcp

# The project: one integration whose operations directory is where the drafts go.
project=$work/project
rm -rf "$project"
mkdir -p "$project/mocks/everything"
cat >"$project/understudy.json" <<EOF
{
  "data_dir": ".understudy",
  "integrations": {
    "everything": {
      "profile": "mcp",
      "upstream": "$real_url",
      "operations": "mocks/everything"
    }
  }
}
EOF

summary() { tail -n1 "$1"; }
run_suite() { # run_suite NAME LOGFILE [env...]: the conformance script's table, never fatal
  local name=$1 logf=$2
  shift 2
  env "$@" CONFORMANCE_OUT="$root/target/mcp-conformance/record-replay/$name" \
    bash scripts/mcp-conformance.sh >"$logf" 2>&1 || true
  sed -n '/^\(PASS\|FAIL\)  /p' "$logf" >"$work/$name.table"
  echo "-- $name: $(summary "$logf")"
}

echo "== 1/3 the real server at $real_url"
run_suite real "$work/real.log" CONFORMANCE_URL="$real_url"

echo "== 2/3 recording through understudy (drafts into $project/mocks/everything)"
run_suite record "$work/record.log" CONFORMANCE_CONFIG="$project/understudy.json" \
  CONFORMANCE_SERVE_ARGS="--mode record --allow-writes --out $project/mocks"
kill "$real_pid" 2>/dev/null || true
wait "$real_pid" 2>/dev/null || true
real_pid=

echo "== the drafts"
(cd "$project/mocks/everything" && find . -name '*.json' | sort | sed 's/^\.\//  /')
if [ -f "$project/mocks/everything/record-notes.txt" ]; then
  echo "== what the recording left out or changed (record-notes.txt)"
  sed -n '3,$p' "$project/mocks/everything/record-notes.txt"
fi
if find "$project/mocks/everything" -name '*.json.draft' | grep -q .; then
  echo "mcp-record-replay: some drafts were written as *.json.draft (an existing file differed)" >&2
  exit 1
fi

echo "== understudy check of the recorded project"
"$bin" check --config "$project/understudy.json"

echo "== 3/3 replaying the recording (replay mode, the real server stopped)"
run_suite replay "$work/replay.log" CONFORMANCE_CONFIG="$project/understudy.json" \
  CONFORMANCE_SERVE_ARGS="--mode replay"

echo
printf '%-40s %-6s %-6s %-6s\n' scenario real record replay
failed=0
while read -r status scenario _; do
  rec=$(awk -v s="$scenario" '$2 == s { print $1 }' "$work/record.table")
  rep=$(awk -v s="$scenario" '$2 == s { print $1 }' "$work/replay.table")
  printf '%-40s %-6s %-6s %-6s\n' "$scenario" "$status" "${rec:--}" "${rep:--}"
  if [ "$status" = PASS ] && { [ "$rec" != PASS ] || [ "$rep" != PASS ]; }; then failed=$((failed + 1)); fi
done <"$work/real.table"
echo
echo "real:   $(summary "$work/real.log")"
echo "record: $(summary "$work/record.log")"
echo "replay: $(summary "$work/replay.log")"
if [ "$failed" -gt 0 ]; then
  echo "mcp-record-replay: $failed scenario(s) passed against the real server but not through the recording proxy or against the replay" >&2
  for phase in record replay; do
    if grep -q '^FAIL' "$work/$phase.table"; then
      echo "-- $phase:" >&2
      grep -h '^FAIL' "$work/$phase.table" >&2
      echo "-- the end of understudy's log while $phase ran:" >&2
      tail -n 40 "$root/target/mcp-conformance/record-replay/$phase/understudy-serve.log" >&2 || true
    fi
  done
  exit 1
fi
if ! grep -q '^PASS' "$work/real.table"; then
  echo "mcp-record-replay: nothing passed against the real server" >&2
  exit 1
fi
echo "mcp-record-replay: every scenario that passed against the real server passes against the replay"
