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
check "the lower layers name no server-side module" \
    "grep -rnE 'crate::(proxy|app|admin|server)::' src/profile src/contract src/mock src/operation src/author/record src/store src/evidence.rs src/records.rs | grep -v '//'"
check "evidence.rs and record/ do not open the store" \
    "grep -rn 'crate::store' src/evidence.rs src/author/record | grep -v '//'"
check "only store/ uses sled" \
    "grep -rln 'sled::' src | grep -v '^src/store/'"
check "exactly one write_call( outside the store (the one commit)" \
    "n=\$(grep -rn 'write_call(' src | grep -v '^src/store' | wc -l); [ \"\$n\" -eq 1 ] || { echo \"write_call( outside src/store: \$n (expected 1)\"; grep -rn 'write_call(' src | grep -v '^src/store'; }"
check "one dot-path walker" \
    "grep -rnF \"split('.')\" src | grep -v '^src/mock/path.rs'"
exit $failed
