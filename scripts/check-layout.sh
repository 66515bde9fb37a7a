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
# Below app: author, evidence, operation, upstream, profile, store, config, http, records, tls,
# contract, mock, error, util.
below_app="src/author src/evidence src/operation src/upstream src/profile src/store src/config src/http src/records.rs src/tls src/contract src/mock src/error.rs src/util"
# A line of grep -rn output that is not a comment.
code="grep -vE '^[^:]+:[0-9]+:[[:space:]]*//'"
check "nothing below app names app, proxy, admin, server or commands" \
    "grep -rnE 'crate::(app|proxy|admin|server|commands)\b' $below_app | $code"
check "author/ and evidence/ never open the store" \
    "grep -rnE 'crate::store\b' src/author src/evidence | $code"
check "only store/ names sled or tokio_postgres" \
    "grep -rnE '\b(sled|tokio_postgres)::|use (sled|tokio_postgres)\b' src | grep -v '^src/store/' | $code"
check "util/ and error.rs import only themselves" \
    "grep -rnE 'crate::\w+' src/util | grep -vE 'crate::util\b' | $code; grep -nE 'crate::\w+' src/error.rs | grep -vE 'crate::error\b' | sed 's|^|src/error.rs:|' | $code"
check "contract/ imports only itself, util and error" \
    "grep -rnE 'crate::\w+' src/contract | grep -vE 'crate::(contract|util|error)\b' | $code"
check "mock/ imports only itself and error" \
    "grep -rnE 'crate::\w+' src/mock | grep -vE 'crate::(mock|error)\b' | $code"
check "profile/ does no I/O: no tokio::net, no HTTP client, no store, no operation" \
    "grep -rnE 'tokio::net|TcpStream|reqwest|hyper_util::client|hyper::client|crate::(store|operation|upstream)\b' src/profile | $code"
check "no loose .rs at the top of src/ beyond main, lib, cli, config, error, records" \
    "ls src/*.rs | grep -vE '^src/(main|lib|cli|config|error|records)\.rs$'"
check "exactly one write_call( outside the store (the one commit)" \
    "n=\$(grep -rn 'write_call(' src | grep -v '^src/store' | wc -l); [ \"\$n\" -eq 1 ] || { echo \"write_call( outside src/store: \$n (expected 1)\"; grep -rn 'write_call(' src | grep -v '^src/store'; }"
check "one dot-path walker" \
    "grep -rnF \"split('.')\" src | grep -v '^src/mock/path.rs'"
check "proxy/call and proxy/decision never name forward, mcp or pipeline" \
    "grep -rnE '(super|proxy)::(forward|mcp|pipeline)\\b' src/proxy/call.rs src/proxy/call src/proxy/decision.rs | grep -v '//'"
check "proxy/forward and proxy/mcp never name pipeline" \
    "grep -rnE '(super|proxy)::pipeline\\b|\\bpipeline::' src/proxy/forward src/proxy/mcp | grep -v '//'"
check "the MCP endpoint parses a request body once (jsonrpc::Posted, made by proxy/mcp/mod.rs)" \
    "grep -rnE 'from_slice\\(&?req\\.body|req\\.json\\(|req\\.json_body\\(|harness_reply\\(|handle_streaming\\(' src/proxy/mcp | grep -v '//'; grep -rn 'Posted::parse' src/proxy | grep -v '^src/proxy/mcp/mod.rs' | grep -v '//'"
check "one finish_stateless" \
    "n=\$(grep -rn 'fn finish_stateless' src | wc -l); [ \"\$n\" -eq 1 ] || grep -rn 'fn finish_stateless' src"
check "upstream/ names no app, proxy, admin, server or commands" \
    "grep -rnE 'crate::(app|proxy|admin|server|commands)\\b' src/upstream | grep -v '//'"
check "profile/ reaches no network: no upstream client, no sockets" \
    "grep -rnE 'crate::upstream|hyper_util::client|tokio::net' src/profile | grep -v '//'"
check "one request built from an input (upstream/request.rs)" \
    "grep -rnE 'const SALESFORCE_API_VERSION|fn (fill_template|render_value|request_for|build_request|capture_text|text_of)\\b' src | grep -v '^src/upstream/request.rs'"
check "one real answer -> envelope (upstream/answer.rs)" \
    "grep -rnE 'fn (envelope|real_envelope)\\(status' src | grep -v '^src/upstream/answer.rs'; grep -rnE '== 204|== 304' src | grep -v '^src/profile/mod.rs'"
check "one mock-vs-real diff (upstream/diff.rs)" \
    "grep -rnE 'fn (diff|diff_value|member_path)\\b|\"upstream\": (y|b|self\\.real)\\b' src | grep -v '^src/upstream/diff.rs'"
check "one Problem (error.rs)" \
    "grep -rnE '(pub )?(struct|enum) Problem\\b' src | grep -v '^src/error.rs'"
check "one JSON type-name function (util/json.rs)" \
    "grep -rnE 'Value::(Bool\\(_\\)|Array\\(_\\)) => \"(a |an )?(boolean|array)\"' src | grep -v '^src/util/json.rs'"
check "no tuple stands for a failed real call" \
    "grep -rnE 'type CallFailure' src"
check "the profile is a type (contract::ProfileKind), never a string: no profile: &str, no profile == \"mcp\"" \
    "grep -rnE '\\bprofile(_name)?: &str\\b|\\bprofile(\\.as_str\\(\\)|\\.name\\(\\))? *[!=]= *\"|match self\\.name\\(\\)' src | grep -v '//'"
check "no non-test file in src/ over 800 lines but the engine's (mock/eval.rs, mock/expr.rs)" \
    "find src -name '*.rs' ! -name '*tests.rs' ! -path src/mock/eval.rs ! -path src/mock/expr.rs -exec wc -l {} + | awk '\$2 != \"total\" && \$1 > 800 { print \$2 \": \" \$1 \" lines\" }'"
exit $failed
