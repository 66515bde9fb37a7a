#!/usr/bin/env bash
# Import of a 10 MB OpenAPI document (docs/src/guides/import-drift.md#real-documents): Twilio's
# twilio_api_v2010.json (tests/fixtures/openapi-real, 197 operations) with its paths copied
# COPIES times (default 11: 10.6 MB of compact JSON, 1 331 paths, 2 167 operations; each copy
# under `/copyN`, its operation ids suffixed), imported with `understudy import --from openapi` into
# a fresh project. Prints the document's size, the import's summary, wall time and peak RSS
# (GNU time), and whether they meet the targets (< 5 s, < 500 MiB). Nothing leaves the machine.
#
#   bash bench/import_big.sh
#   BUILD=0 COPIES=10 bash bench/import_big.sh
set -euo pipefail
cd "$(dirname "$0")/.."
COPIES="${COPIES:-11}"
PROFILE="${PROFILE:-release}"   # PROFILE=debug: the dev build (figures say so)
flag=--release; [ "$PROFILE" = debug ] && flag=
if [ "${BUILD:-1}" = 1 ]; then
    cargo build $flag --bin understudy >&2
fi
BIN="$PWD/target/$PROFILE/understudy"
[ -x /usr/bin/time ] || { echo "needs GNU time (/usr/bin/time: apt-get install time)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$COPIES" "$work/big.json" <<'PY'
import copy, json, sys
copies, out = int(sys.argv[1]), sys.argv[2]
doc = json.load(open("tests/fixtures/openapi-real/twilio_api_v2010.json"))
paths = {}
for n in range(copies):
    for p, item in doc["paths"].items():
        item = copy.deepcopy(item)
        for m in ("get", "put", "post", "delete", "options", "head", "patch", "trace"):
            if m in item and "operationId" in item[m]:
                item[m]["operationId"] += f"Copy{n}"
        paths[(f"/copy{n}" if n else "") + p] = item
doc["paths"] = paths
json.dump(doc, open(out, "w"), separators=(",", ":"))
PY
cat >"$work/understudy.json" <<JSON
{ "integrations": { "tw": { "profile": "rest", "upstream": "https://api.example.test", "operations": "mocks/tw" } } }
JSON
size=$(stat -c %s "$work/big.json")
echo "profile: $PROFILE, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "document: $size bytes ($COPIES copies of twilio_api_v2010.json's paths)"
set +e
/usr/bin/time -f '%e %M %U %S' -o "$work/time" "$BIN" import --from openapi "$work/big.json" \
    --integration tw --config "$work/understudy.json" --out "$work/mocks/tw" --format json >"$work/report.json"
code=$?
set -e
python3 - "$work/report.json" "$work/time" "$code" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["summary"]
wall, rss_kb, user, sys_ = open(sys.argv[2]).read().split()[-4:]
mib = int(rss_kb) / 1024
print(f"import: exit {sys.argv[3]}, {r['written']} written, {r['draft']} drafts, {r['not_mapped']} not mapped")
print(f"wall {float(wall):.2f} s (user {user} s, sys {sys_} s), peak RSS {mib:.0f} MiB")
ok = float(wall) < 5 and mib < 500
print("targets (< 5 s, < 500 MiB):", "met" if ok else "NOT met")
sys.exit(0 if ok else 1)
PY
