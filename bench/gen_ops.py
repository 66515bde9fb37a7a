#!/usr/bin/env python3
"""Write a large benchmark project (default 10 000 operation files) into a directory, for the
start-up measurement of bench/run.sh. Never commit its output.

    python3 bench/gen_ops.py OUT_DIR [N]

OUT_DIR/understudy.json gets one `salesforce` integration `crm` whose operations directory
OUT_DIR/mocks/crm holds N files `bench_NNNNN.json`. Each is a realistic, checked operation:
a GET with its own literal sObject name (`/services/data/*/sobjects/Bench00042__c/{id}`, so no
two templates tie), input and output schemas, a two-variant mock with a rule and an
`$input` reference, one example per variant, and the right `contract_hash` (sha256 of the
RFC 8785 form of the contract; for this ASCII-only data, `json.dumps(sort_keys=True)` with
compact separators is the same text). One request that must answer 200 is printed on stdout:
`GET <path>` of operation 1.

    python3 bench/gen_ops.py --rewrite OUT_DIR I TAG

rewrites operation I's file (atomically: a hidden temp file renamed over it) with TAG appended
to the record's `Name` in its mock result and its example — a changed definition with the same
contract (bench/run.sh's hot-reload measurement).
"""
import hashlib
import json
import os
import sys


def contract_hash(op, profile="salesforce"):
    c = {
        "description": op.get("description", ""),
        "input_schema": op["input_schema"],
        "operation": f"{profile}:{op['operation_id']}",
        "output_schema": op["output_schema"],
    }
    text = json.dumps(c, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def operation(i, tag=""):
    sobject = f"Bench{i:05d}__c"
    op_id = f"bench_{i:05d}"
    record = {
        "attributes": {"type": sobject, "url": {"$input": "id"}},
        "Id": {"$input": "id"},
        "Name": f"Record of {sobject}{tag}",
        "Amount__c": i,
        "Active__c": True,
    }
    op = {
        "operation_id": op_id,
        "description": f"Get one {sobject} record by id (generated benchmark operation {i}).",
        "match": {"method": "GET", "path": f"/services/data/*/sobjects/{sobject}/{{id}}"},
        "input_schema": {
            "type": "object",
            "required": ["id"],
            "properties": {"id": {"type": "string", "minLength": 15, "maxLength": 18}},
        },
        "output_schema": {
            "type": "object",
            "required": ["status", "data"],
            "additionalProperties": False,
            "properties": {
                "status": {"enum": [200, 404]},
                "data": {
                    "anyOf": [
                        {
                            "type": "object",
                            "required": ["attributes", "Id", "Name"],
                            "properties": {
                                "Id": {"type": "string"},
                                "Name": {"type": "string"},
                                "Amount__c": {"type": "number"},
                                "Active__c": {"type": "boolean"},
                            },
                        },
                        {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["message", "errorCode"],
                                "properties": {
                                    "message": {"type": "string"},
                                    "errorCode": {"type": "string"},
                                },
                            },
                        },
                    ]
                },
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
    }
    rid = f"a0B{i:012d}"
    found = {
        "status": 200,
        "data": {"attributes": {"type": sobject, "url": rid}, "Id": rid,
                 "Name": f"Record of {sobject}{tag}", "Amount__c": i, "Active__c": True},
    }
    missing = {"status": 404, "data": [{"errorCode": "NOT_FOUND",
                                        "message": "The requested resource does not exist"}]}
    op["mock"] = {
        "contract_hash": contract_hash(op),
        "schema_version": 1,
        "default_variant": "found",
        "variants": {
            "found": {
                "result": {"status": 200, "data": record},
                "rules": [{"when": [{"source": "input", "path": "id", "op": "eq",
                                     "value": "a0B000000000000"}],
                           "result": missing}],
            },
            "not_found": {"result": missing},
        },
        "examples": [
            {"variant": "found", "input": {"id": rid}, "expected": found},
            {"variant": "not_found", "input": {"id": rid}, "expected": missing},
        ],
    }
    return op


def write(path, op):
    with open(path, "w") as f:
        json.dump(op, f, separators=(",", ":"))


def rewrite(out, i, tag):
    """Operation i again with `tag` in its record's Name, renamed over the old file."""
    op = operation(i, tag)
    ops_dir = os.path.join(out, "mocks", "crm")
    tmp = os.path.join(ops_dir, "." + op["operation_id"] + ".json.tmp")
    write(tmp, op)
    os.rename(tmp, os.path.join(ops_dir, op["operation_id"] + ".json"))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--rewrite":
        rewrite(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    if len(sys.argv) < 2:
        sys.exit("usage: gen_ops.py OUT_DIR [N]")
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    ops_dir = os.path.join(out, "mocks", "crm")
    os.makedirs(ops_dir, exist_ok=True)
    for i in range(1, n + 1):
        op = operation(i)
        write(os.path.join(ops_dir, op["operation_id"] + ".json"), op)
    cfg = {"mode": "replay",
           "integrations": {"crm": {"profile": "salesforce", "operations": "mocks/crm"}}}
    with open(os.path.join(out, "understudy.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"GET /crm/services/data/v60.0/sobjects/Bench00001__c/a0B{1:012d}")


if __name__ == "__main__":
    main()
