//! `understudy check` of a 100-operation directory: loading, every SPEC 3.4 check (schema
//! compilation, example evaluation and validation) and the cross-file checks.
//!
//! `cargo bench --bench check -- --warm-up-time 1 --measurement-time 5`

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::hint::black_box;
use understudy::contract::hash::contract_hash;
use understudy::operation::{check_loaded, load_dir};

/// Writes 100 Salesforce-shaped operations (distinct paths, two variants, a rule, references
/// and examples each) into `dir`.
fn write_project(dir: &std::path::Path) {
    for i in 0..100 {
        let id = format!("get_object_{i}");
        let input_schema = json!({"type": "object", "required": ["id"],
            "properties": {"id": {"type": "string", "minLength": 3}}});
        let output_schema = json!({"type": "object", "required": ["status"],
            "properties": {"status": {"type": "integer"},
                           "data": {"type": ["object", "array"]}}});
        let description = format!("Read object {i}");
        let hash = contract_hash(
            understudy::contract::ProfileKind::Salesforce,
            &id,
            Some(&description),
            &input_schema,
            &output_schema,
        );
        let op = json!({
            "operation_id": id,
            "description": description,
            "match": {"method": "GET", "path": format!("/services/data/*/sobjects/Object{i}__c/{{id}}")},
            "input_schema": input_schema,
            "output_schema": output_schema,
            "mock": {
                "contract_hash": hash,
                "schema_version": 1,
                "default_variant": "found",
                "initial_state": {format!("seen_{i}"): false},
                "variants": {
                    "found": {
                        "result": {"status": 200, "data": {"Id": {"$input": "id"}, "Name": "Object",
                                   "Seen": {"$state": format!("seen_{i}")}}},
                        "set_state": {format!("seen_{i}"): true},
                        "rules": [{"when": [{"source": "input", "path": "id", "op": "eq", "value": "missing"}],
                                   "result": {"status": 404, "data": [{"errorCode": "NOT_FOUND", "message": "gone"}]}}]
                    },
                    "error": {"result": {"status": 500, "data": [{"errorCode": "UNKNOWN", "message": "boom"}]}}
                },
                "examples": [
                    {"variant": "found", "input": {"id": "a0B1"},
                     "expected": {"status": 200, "data": {"Id": "a0B1", "Name": "Object", "Seen": false}}},
                    {"variant": "found", "input": {"id": "missing"},
                     "expected": {"status": 404, "data": [{"errorCode": "NOT_FOUND", "message": "gone"}]}},
                    {"variant": "error", "input": {"id": "a0B1"},
                     "expected": {"status": 500, "data": [{"errorCode": "UNKNOWN", "message": "boom"}]}}
                ]
            }
        });
        std::fs::write(
            dir.join(format!("{}.json", op["operation_id"].as_str().unwrap())),
            serde_json::to_vec_pretty(&op).unwrap(),
        )
        .unwrap();
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    write_project(dir.path());
    let (ops, problems) = load_dir(dir.path(), understudy::contract::ProfileKind::Salesforce);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(ops.len(), 100);
    assert!(check_loaded(&ops, understudy::contract::ProfileKind::Salesforce).is_empty());

    c.bench_function("check: load + every check of 100 operation files", |b| {
        b.iter(|| {
            let (ops, problems) = load_dir(
                black_box(dir.path()),
                understudy::contract::ProfileKind::Salesforce,
            );
            let more = check_loaded(&ops, understudy::contract::ProfileKind::Salesforce);
            assert!(problems.is_empty() && more.is_empty());
            black_box(ops.len())
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
