#!/usr/bin/env bash
# MCP over stdio beside MCP over HTTP (bench/mcp_stdio.py): tools/call round trips per second
# for a static and a state-changing mock over `understudy mcp stdio` and over `serve`'s
# Streamable HTTP endpoint, and `mcp stdio`'s start-up to its first answer.
#   bench/mcp_stdio.sh            # builds the release binary first
#   UNDERSTUDY_BIN=path BENCH_SECONDS=3 BENCH_STARTS=7 bench/mcp_stdio.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${UNDERSTUDY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=$PWD/target/release/understudy
fi
python3 bench/mcp_stdio.py "$bin"
