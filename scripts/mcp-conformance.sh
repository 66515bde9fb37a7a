#!/usr/bin/env bash
# Run the official MCP conformance suite (@modelcontextprotocol/conformance, pinned) against
# understudy serving the fixture project tests/mcp-conformance/ in replay mode.
#
#   scripts/mcp-conformance.sh [SCENARIO...]
#
# Installs the suite into target/mcp-conformance/ with npm (no global install), builds and
# starts `understudy serve` on a free loopback port (read from the readiness line), then:
# - the 0.1 line (default 0.1.12): runs every active server scenario (or the ones named),
#   prints a pass/fail table and exits 1 on any failure;
# - the 0.2 line (e.g. CONFORMANCE_VERSION=0.2.0-alpha.12): runs the server scenarios each
#   revision of CONFORMANCE_REQUIREMENTS requires (`--requirements`, default
#   "2026-07-28 2025-11-25", each at its own wire), prints the suite's table and exits 1 when
#   a scored scenario fails. That line needs Node 22+: when `node` is older, the npm package
#   `node@22` is installed into target/mcp-conformance/node22 and put first on PATH.
# Needs Node 20+ and npm.
#
# Environment: CONFORMANCE_VERSION (default 0.1.12), UNDERSTUDY_BIN (skip the build and use
# this binary), CONFORMANCE_CONFIG (default tests/mcp-conformance/understudy.json),
# CONFORMANCE_INTEGRATION (default everything), CONFORMANCE_REQUIREMENTS (0.2 line),
# CONFORMANCE_SERVE_ARGS (more arguments for `understudy serve`, e.g. `--mode record --out DIR`;
# serve is stopped with SIGTERM, so a recording flushes its drafts before this script returns),
# CONFORMANCE_URL (run the suite against this MCP endpoint instead of starting understudy),
# CONFORMANCE_OUT (results directory, default target/mcp-conformance/results),
# CONFORMANCE_TRANSPORT (`http`, the default, or `stdio`: the suite's runner takes only a URL,
# never a command, so with `stdio` the suite talks to scripts/mcp-conformance-stdio-bridge.mjs,
# a stdio<->HTTP bridge that starts one `understudy mcp stdio` process per MCP session and
# relays each message to it as a line; the scenarios of CONFORMANCE_NOT_STDIO, default
# `dns-rebinding-protection`, test the HTTP listener itself and are listed as N/A, not run).
# scripts/mcp-record-replay.sh uses the last three.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

version=${CONFORMANCE_VERSION:-0.1.12}
config=${CONFORMANCE_CONFIG:-tests/mcp-conformance/understudy.json}
integration=${CONFORMANCE_INTEGRATION:-everything}
tools_dir=$root/target/mcp-conformance/$version
out=${CONFORMANCE_OUT:-$root/target/mcp-conformance/results}
# The suite's pending scenarios are not part of the active suite.
pending=" json-schema-2020-12 server-sse-polling "

command -v npm >/dev/null || { echo "mcp-conformance: npm (Node 20+) is required" >&2; exit 1; }
case "$version" in
  0.1.*) requirements= ;;
  *) requirements=${CONFORMANCE_REQUIREMENTS:-2026-07-28 2025-11-25} ;;
esac
if [ -n "$requirements" ] && [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
  node_dir=$root/target/mcp-conformance/node22
  if [ ! -x "$node_dir/node_modules/.bin/node" ]; then
    echo "== installing node@22 (npm package) into $node_dir: conformance $version needs Node 22+"
    mkdir -p "$node_dir"
    (cd "$node_dir" && { [ -f package.json ] || echo '{"private":true}' >package.json; } &&
      npm install --no-audit --no-fund --silent node@22)
  fi
  export PATH="$node_dir/node_modules/.bin:$PATH"
fi
if [ ! -x "$tools_dir/node_modules/.bin/conformance" ]; then
  echo "== installing @modelcontextprotocol/conformance@$version into $tools_dir"
  mkdir -p "$tools_dir"
  (cd "$tools_dir" && { [ -f package.json ] || echo '{"private":true}' >package.json; } &&
    npm install --no-audit --no-fund --silent "@modelcontextprotocol/conformance@$version")
fi
conformance=$tools_dir/node_modules/.bin/conformance

if [ -n "${CONFORMANCE_URL:-}" ]; then
  url=$CONFORMANCE_URL
  echo "== running against $url (conformance $version)"
else
  if [ -n "${UNDERSTUDY_BIN:-}" ]; then
    bin=$UNDERSTUDY_BIN
  else
    cargo build --quiet --locked
    bin=$root/target/debug/understudy
  fi

  data=$(mktemp -d)
  log=$data/serve.log
  serve_log=$log
  : >"$log"
  cfgdir=$(cd "$(dirname "$config")" && pwd)
  cp -r "$cfgdir"/. "$data/project"
fi
if [ -z "${CONFORMANCE_URL:-}" ] && [ "${CONFORMANCE_TRANSPORT:-http}" = stdio ]; then
  node "$root/scripts/mcp-conformance-stdio-bridge.mjs" -- "$bin" mcp stdio \
    --integration "$integration" --config "$data/project/$(basename "$config")" \
    --data-dir "$data/sessions/{session}" >"$log" 2>&1 &
  pid=$!
  cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"; }
  trap cleanup EXIT
  url=
  for _ in $(seq 1 100); do
    url=$(sed -n 's/^bridge listening on \(http:\/\/[^ ]*\).*/\1/p' "$log" | head -n1)
    [ -n "$url" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then cat "$log"; echo "the stdio bridge exited" >&2; exit 1; fi
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$log"; echo "no readiness line from the stdio bridge" >&2; exit 1; }
  echo "== understudy mcp stdio behind the stdio<->HTTP bridge $url (conformance $version, node $(node --version))"
elif [ -z "${CONFORMANCE_URL:-}" ]; then
  # shellcheck disable=SC2086 # CONFORMANCE_SERVE_ARGS is a list of words
  "$bin" serve --config "$data/project/$(basename "$config")" --listen 127.0.0.1:0 \
    ${CONFORMANCE_SERVE_ARGS:-} >"$log" 2>&1 &
  pid=$!
  # understudy's own log is kept beside the suite's results: a failing scenario's cause is
  # often there (what understudy answered, what the upstream said).
  cleanup() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if [ -d "$out" ]; then cp "$serve_log" "$out/understudy-serve.log" 2>/dev/null || true; fi
    rm -rf "$data"
  }
  trap cleanup EXIT

  addr=
  for _ in $(seq 1 100); do
    addr=$(sed -n 's/^understudy listening on \(http:\/\/[^ ]*\).*/\1/p' "$log" | head -n1)
    [ -n "$addr" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then cat "$log"; echo "understudy serve exited" >&2; exit 1; fi
    sleep 0.1
  done
  [ -n "$addr" ] || { cat "$log"; echo "no readiness line from understudy serve" >&2; exit 1; }
  url=$addr/$integration
  echo "== understudy serving $url (conformance $version, node $(node --version))"
fi

rm -rf "$out"
mkdir -p "$out"
if [ -n "$requirements" ]; then
  status=0
  for rev in $requirements; do
    log=$out/requirements-$rev.log
    NO_COLOR=1 "$conformance" server --url "$url" --requirements "$rev" -o "$out/$rev" >"$log" 2>&1 ||
      status=1
    echo
    echo "-- requirements $rev (conformance $version)"
    grep -E '^(✓|✗) |^Total:|^Not scored|^  (✓|✗) ' "$log" || { cat "$log"; status=1; }
    # The suite's own scoring: scored scenarios are those outside its "Not scored" list.
    awk '/^Not scored/ {ns = 1; next}
         ns && /^  (✓|✗) / {skip[$2] = 1; next}
         /^(✓|✗) / {name = $2; sub(/:$/, "", name); res[name] = $1}
         END {p = 0; f = 0; for (n in res) if (!(n in skip)) { if (res[n] == "✓") p++; else f++ }
              printf "scored for %s: %d passed, %d failed\n", REV, p, f}' REV="$rev" "$log"
  done
  echo
  echo "conformance $version: logs in $out"
  exit "$status"
fi

if [ $# -gt 0 ]; then
  scenarios=("$@")
else
  mapfile -t scenarios < <("$conformance" list --server | sed -n 's/^  - //p')
fi

passed=0
failed=0
rows=()
# Over stdio, the scenarios that test HTTP itself (the Host/Origin checks of a listener) test
# the bridge, not understudy: they are listed, not run.
not_stdio=" ${CONFORMANCE_NOT_STDIO:-dns-rebinding-protection} "
for s in "${scenarios[@]}"; do
  case "$pending" in *" $s "*) continue ;; esac
  if [ "${CONFORMANCE_TRANSPORT:-http}" = stdio ]; then
    case "$not_stdio" in *" $s "*) rows+=("N/A   $s  (tests the HTTP listener: no HTTP over stdio)"); continue ;; esac
  fi
  if NO_COLOR=1 "$conformance" server --url "$url" --scenario "$s" -o "$out/$s" >"$out/$s.log" 2>&1; then
    rows+=("PASS  $s")
    passed=$((passed + 1))
  else
    # The first failing check's message, from the suite's checks.json.
    why=$(find "$out/$s" -name checks.json -exec node -e '
      const c = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      const f = c.find((x) => x.status !== "SUCCESS" && x.status !== "INFO");
      if (f) console.log(`${f.id}: ${f.errorMessage || f.status}`.slice(0, 160));' {} \; 2>/dev/null | head -n1)
    rows+=("FAIL  $s  ${why}")
    failed=$((failed + 1))
  fi
done

echo
printf '%s\n' "${rows[@]}"
echo
echo "conformance $version: $passed passed, $failed failed (logs: $out)"
[ "$failed" -eq 0 ]
