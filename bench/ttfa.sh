#!/usr/bin/env bash
# Time to first answer: a fresh clone with an empty target directory, the README's first
# command (`cargo run --locked -- serve --config examples/healthplus/understudy.json`), until
# the first HTTP answer on the listener. Prints CPU seconds (user+sys of cargo, rustc and the
# server, the figure that does not depend on what else the machine is doing), wall seconds and
# the load average before and after.
#
#   bash bench/ttfa.sh [REPO [REV]]      # default: this repository, HEAD
#   TTFA_DIR=/tmp/ttfa bash bench/ttfa.sh /path/to/repo main
#   TTFA_PORT=17777 …   # listen there instead of the README's 7777 (two runs side by side)
#   TTFA_PROFILE=release …  # `cargo run --locked --release -- serve …` (the optimized build)
#
# Needs: git, cargo, curl, GNU time (/usr/bin/time). The crates are taken from the local cargo
# registry cache when present (what a user who built anything before has); the figure is the
# compile of this crate and its dependencies, not the download.
set -euo pipefail

src=${1:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
rev=${2:-HEAD}
rev=$(git -C "$src" rev-parse "$rev")
dir=${TTFA_DIR:-$(mktemp -d /tmp/ttfa.XXXXXX)}
if [ -e "$dir/.git" ] || [ -e "$dir/target" ]; then
    echo "ttfa: $dir is not empty; give an empty TTFA_DIR" >&2
    exit 2
fi
git clone -q "$src" "$dir"
git -C "$dir" checkout -q "$rev"
cd "$dir"

# The README's listener is 127.0.0.1:7777; when another process holds it, listen elsewhere
# (the compile, which is what is measured, is the same).
addr=127.0.0.1:7777
extra=()
if [ -n "${TTFA_PORT:-}" ]; then
    addr=127.0.0.1:$TTFA_PORT
    extra=(--listen "$addr")
elif curl -s -o /dev/null --max-time 1 "http://$addr/"; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    addr=127.0.0.1:$port
    extra=(--listen "$addr")
fi

profile=()
[ "${TTFA_PROFILE:-dev}" = release ] && profile=(--release)

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s.%N)
/usr/bin/time -v -o "$dir/ttfa.time" \
    cargo run --locked "${profile[@]}" -- serve --config examples/healthplus/understudy.json "${extra[@]}" \
    >"$dir/ttfa.log" 2>&1 &
timer=$!

code=000
while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$addr/" || true)
    [ "$code" != 000 ] && break
    if ! kill -0 "$timer" 2>/dev/null; then
        echo "ttfa: the command ended before answering; its output:" >&2
        tail -30 "$dir/ttfa.log" >&2
        exit 1
    fi
    sleep 0.5
done
end=$(date +%s.%N)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# `cargo run` execs the server in place of cargo on Unix: the timer's child is the server.
server=$(pgrep -P "$timer" || true)
[ -n "$server" ] && kill -INT "$server"
wait "$timer" || true

user=$(awk -F': ' '/User time/ {print $2}' "$dir/ttfa.time")
sys=$(awk -F': ' '/System time/ {print $2}' "$dir/ttfa.time")
wall=$(echo "$end - $start" | bc)
cpu=$(echo "$user + $sys" | bc)
printf 'rev          %s\n' "$rev"
printf 'profile      %s\n' "${TTFA_PROFILE:-dev}"
printf 'first answer HTTP %s on %s\n' "$code" "$addr"
printf 'cpu_seconds  %s (user %s + sys %s)\n' "$cpu" "$user" "$sys"
printf 'wall_seconds %.1f\n' "$wall"
printf 'load_average before %s, after %s (nproc %s)\n' "$load_before" "$load_after" "$(nproc)"
printf 'rustc        %s\n' "$(rustc --version)"
printf 'clone        %s (delete it when done)\n' "$dir"
