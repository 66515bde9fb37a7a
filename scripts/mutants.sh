#!/usr/bin/env bash
# cargo-mutants over the verdict and its readers: the files of .cargo/mutants.toml
# (src/evidence/{verdict,stream,envelope}.rs, src/evidence/report/, src/evidence/verify/,
# src/commands/test.rs), tested by the unit tests (`cargo test --lib`).
# Not part of .ci/run: each mutant is a rebuild of the crate (minutes on 2 cores), ~800 in all.
#
#   bash scripts/mutants.sh                               # every file of the config
#   bash scripts/mutants.sh -f src/evidence/verdict.rs    # one file (replaces the config's list)
#   FILTER=evidence:: bash scripts/mutants.sh -f src/evidence/verdict.rs
#                                   # only the unit tests whose path starts with evidence:: (0.6 s
#                                   # instead of 18 s a mutant); a survivor is then re-checked
#                                   # against every unit test before it counts as missed
#
# Built without debug info (CARGO_PROFILE_{DEV,TEST}_DEBUG=0): each mutant is an incremental
# rebuild and a link, and debug info is most of the link. Only the library's test binary is
# built (`--lib` for the build as well as the test): building the integration tests' binary
# too made each mutant 50-140 s instead of ~20 s.
#
# Install: cargo install --locked cargo-mutants   (27.1.0 was used)
# Results: mutants.out/{caught,missed,timeout,unviable}.txt; every `missed` mutant must be
# killed by a new test or argued equivalent in the round's note.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_TEST_DEBUG=0
command -v cargo-mutants >/dev/null || { echo "cargo-mutants is not installed: cargo install --locked cargo-mutants" >&2; exit 2; }
if [[ " $* " == *" -f "* || " $* " == *" --file "* ]]; then
  # A file given on the command line: the config's own list would be added to it.
  exec cargo mutants --no-config -j 1 --timeout 300 --build-timeout 1200 -C --lib "$@" -- ${FILTER:-}
fi
exec cargo mutants -j 1 "$@"
