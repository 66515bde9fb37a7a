#!/usr/bin/env bash
# Coverage side by side (docs/src/guides/import-drift.md#real-documents): understudy's import +
# replay and Prism's `prism mock` on the same real OpenAPI documents
# (tests/fixtures/openapi-real), asked the same requests — each built from the example input
# the import generated from the operation's input schema — and judged the same way (2xx, and
# the body satisfies the operation's response schema). Prints one table, both coverages per
# document, from one sitting. Only loopback addresses get traffic.
# A `*.postman_collection.json` (tests/fixtures/postman-real: the same documents converted by
# openapi-to-postmanv2) is imported with `--from postman` and served by `prism mock` too (Prism
# reads Postman collections); each request is sent as a Postman client sends it (its auth
# included) and counts when the answer is its saved response (status, and JSON body).
#
#   bash bench/prism-coverage.sh                    # the three vendored documents
#   BUILD=0 VERBOSE=1 bash bench/prism-coverage.sh tests/fixtures/openapi-real/twilio_messaging_v1.json
#
# Prism is `@stoplight/prism-cli` pinned at the version the peer benchmarks use (5.14.2),
# installed once under target/prism with npm. Needs python3 with `jsonschema` and PyYAML
# (installed into target/prism/venv when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
PRISM_VERSION=5.14.2
PROFILE="${PROFILE:-release}"   # PROFILE=debug: the dev build
flag=--release; [ "$PROFILE" = debug ] && flag=
if [ "${BUILD:-1}" = 1 ]; then
    cargo build $flag --bin understudy >&2
fi
BIN="$PWD/target/$PROFILE/understudy"
PRISM="$PWD/target/prism/node_modules/.bin/prism"
if [ ! -x "$PRISM" ] || [ "$("$PRISM" --version 2>/dev/null)" != "$PRISM_VERSION" ]; then
    mkdir -p target/prism
    [ -f target/prism/package.json ] || echo '{"private": true}' > target/prism/package.json
    npm install --prefix target/prism --no-audit --no-fund --silent "@stoplight/prism-cli@$PRISM_VERSION" >&2
fi
PY=python3
if ! python3 -c 'import jsonschema, yaml' 2>/dev/null; then
    [ -x target/prism/venv/bin/python ] || python3 -m venv target/prism/venv
    target/prism/venv/bin/pip install -q 'jsonschema==4.26.0' 'PyYAML==6.0.3' >&2
    PY=target/prism/venv/bin/python
fi
if [ "$#" -eq 0 ]; then
    set -- tests/fixtures/openapi-real/twilio_api_v2010.json \
           tests/fixtures/openapi-real/twilio_messaging_v1.json \
           tests/fixtures/openapi-real/mistral_openapi.yaml \
           tests/fixtures/postman-real/twilio_api_v2010.postman_collection.json \
           tests/fixtures/postman-real/twilio_messaging_v1.postman_collection.json \
           tests/fixtures/postman-real/mistral_openapi.postman_collection.json
fi
echo "understudy $("$BIN" --version | cut -d' ' -f2) ($PROFILE), prism $("$PRISM" --version), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$PY" bench/prism_coverage.py "$BIN" "$PRISM" "$@"
