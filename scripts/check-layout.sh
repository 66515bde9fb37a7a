#!/usr/bin/env bash
# The arrows of issue 13 that must never exist: each check prints the offending lines, and
# the script exits 1 when any check printed something. Run from anywhere in the repository.
cd "$(dirname "$0")/.." || exit 2
failed=0
check() {
    local name="$1" out
    out="$(bash -c "$2" 2>/dev/null)"
    if [ -n "$out" ]; then
        printf '== %s\n%s\n' "$name" "$out"
        failed=1
    fi
}
check "only commands/ and main name cli/commands" \
    "grep -rnE 'crate::(commands|cli)::' src | grep -v '//' | grep -vE '^src/(commands|main)'"
check "only commands/ and main print or exit" \
    "grep -rnE 'eprintln!|println!|process::exit' src | grep -vE '^src/(commands|main)'"
check "proxy/ names no admin or server" \
    "grep -rnE 'crate::(admin|server)::' src/proxy | grep -v '//'"
check "admin/ names no proxy or server" \
    "grep -rnE 'crate::(proxy|server)::' src/admin | grep -v '//'"
check "app/ names no handler" \
    "grep -rnE 'crate::(proxy|admin|server)::' src/app | grep -v '//'"
check "mock/ and contract/ do not import each other" \
    "grep -rn 'crate::contract' src/mock | grep -v '//' ; grep -rn 'crate::mock' src/contract | grep -v '//'"
check "mock/ uses no hyper, tokio or sled" \
    "grep -rlnE 'hyper|tokio|sled' src/mock"
# Below app: author, evidence (evidence.rs, verify/, report/ until they move into
# evidence/), operation, upstream, drift, profile, store, config, http, records, tls, contract,
# mock, error, util. Paths that do not exist (yet, or any more) are skipped.
below_app="src/author src/evidence src/evidence.rs src/verify src/report src/operation src/upstream src/upstream.rs src/drift.rs src/profile src/store src/config.rs src/http src/records.rs src/tls src/contract src/mock src/error.rs src/util"
# A line of grep -rn output that is not a comment.
code="grep -vE '^[^:]+:[0-9]+:[[:space:]]*//'"
check "nothing below app names app, proxy, admin, server or commands" \
    "grep -rnE 'crate::(app|proxy|admin|server|commands)\b' $below_app | $code"
check "author/ and evidence/ never open the store" \
    "grep -rnE 'crate::store\b' src/author src/evidence src/evidence.rs src/verify src/report | $code"
check "only store/ names sled or tokio_postgres" \
    "grep -rnE '\b(sled|tokio_postgres)::|use (sled|tokio_postgres)\b' src | grep -v '^src/store/' | $code"
check "util/ and error.rs import only themselves" \
    "grep -rnE 'crate::\w+' src/util | grep -vE 'crate::util\b' | $code; grep -nE 'crate::\w+' src/error.rs | grep -vE 'crate::error\b' | sed 's|^|src/error.rs:|' | $code"
check "contract/ imports only itself, util and error" \
    "grep -rnE 'crate::\w+' src/contract | grep -vE 'crate::(contract|util|error)\b' | $code"
check "mock/ imports only itself and error" \
    "grep -rnE 'crate::\w+' src/mock | grep -vE 'crate::(mock|error)\b' | $code"
# profile/mcp/client.rs (the MCP network client) is the one exception until it moves to
# upstream/ (issue 27, part 2).
check "profile/ does no I/O: no tokio::net, no HTTP client, no store, no operation" \
    "grep -rnE 'tokio::net|TcpStream|reqwest|hyper_util::client|hyper::client|crate::(store|operation|upstream)\b' src/profile | grep -v '^src/profile/mcp/client.rs:' | $code"
# drift.rs, upstream.rs and evidence.rs are allowed until they move into author/, upstream/
# and evidence/ (issue 27 part 2, issue 29).
check "no loose .rs at the top of src/ beyond main, lib, cli, config, error, records" \
    "ls src/*.rs | grep -vE '^src/(main|lib|cli|config|error|records|drift|upstream|evidence)\.rs$'"
check "exactly one write_call( outside the store (the one commit)" \
    "n=\$(grep -rn 'write_call(' src | grep -v '^src/store' | wc -l); [ \"\$n\" -eq 1 ] || { echo \"write_call( outside src/store: \$n (expected 1)\"; grep -rn 'write_call(' src | grep -v '^src/store'; }"
check "one dot-path walker" \
    "grep -rnF \"split('.')\" src | grep -v '^src/mock/path.rs'"
exit $failed
