//! Evaluation hot path: one call against a realistic compiled definition (10 variants, 20 rules
//! in the selected variant, a nested result with `$input`, `$state`, `$number` and `$dateAdd`).
//!
//! `cargo bench --bench engine -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Map, Value};
use std::hint::black_box;
use understudy::mock::{Definition, Engine};

fn definition() -> Value {
    let result = json!({
        "status": 200,
        "data": {
            "order": {
                "id": {"$input": "order.id"},
                "customer": {"$state": "customer"},
                "amount": {"$number": {"$input": "order.amount"}},
                "currency": "EUR",
                "due": {"$dateAdd": {"value": {"$input": "order.date"}, "days": 30, "hours": 6}},
                "lines": [
                    {"sku": {"$input": "order.lines.0.sku"}, "qty": {"$number": {"$input": "order.lines.0.qty"}}},
                    {"sku": {"$input": "order.lines.1.sku"}, "qty": {"$number": {"$input": "order.lines.1.qty"}}}
                ],
                "flags": {"priority": {"$input": "order.priority"}, "static": [1, 2, 3]}
            },
            "meta": {"source": "understudy", "region": {"$state": "region"}, "version": 3}
        }
    });
    let mut rules = Vec::new();
    for i in 0..20 {
        rules.push(json!({
            "when": [
                {"source": "input", "path": "order.channel", "op": "eq", "value": format!("channel-{i}")},
                {"source": "state", "path": "customer.tier", "op": "in", "value": ["gold", "silver", "bronze"]},
                {"source": "input", "path": "order.lines.0.sku", "op": "exists"}
            ],
            "result": if i % 2 == 0 { result.clone() } else { json!({"status": 409, "data": [{"errorCode": "DUPLICATE", "rule": i}]}) },
            "set_state": {"last_order": {"$input": "order.id"}, "count": i},
            "delay_ms": i * 10
        }));
    }
    let mut variants = Map::new();
    for v in 0..10 {
        variants.insert(
            format!("variant-{v}"),
            json!({"result": result, "set_state": {"seen": true}, "delay_ms": 5, "rules": rules}),
        );
    }
    json!({
        "schema_version": 1,
        "default_variant": "variant-0",
        "initial_state": {"customer": {"id": "C-1", "tier": "gold", "name": "Ada"}, "region": "eu-west"},
        "variants": variants
    })
}

fn input(channel: &str) -> Value {
    json!({"order": {
        "id": "O-123", "amount": "199.90", "date": "2024-02-29T22:30:00-03:00",
        "channel": channel, "priority": true,
        "lines": [{"sku": "A-1", "qty": "2"}, {"sku": "B-7", "qty": 1}]
    }})
}

fn bench(c: &mut Criterion) {
    let def = Definition::from_value(&definition()).unwrap();
    let engine = Engine::new(def).unwrap();
    let state = engine.initial_state();
    // Sanity: the benched calls succeed and take the intended paths.
    let late = input("channel-18");
    let none = input("web");
    assert_eq!(
        engine
            .evaluate(Some("variant-7"), &late, &state)
            .unwrap()
            .rule,
        Some(18)
    );
    assert_eq!(
        engine
            .evaluate(Some("variant-7"), &none, &state)
            .unwrap()
            .rule,
        None
    );

    c.bench_function("evaluate: rule 18 of 20 matches, full render", |b| {
        b.iter(|| {
            engine
                .evaluate(
                    black_box(Some("variant-7")),
                    black_box(&late),
                    black_box(&state),
                )
                .unwrap()
        })
    });
    c.bench_function(
        "evaluate: no rule matches (20 tried), variant render",
        |b| {
            b.iter(|| {
                engine
                    .evaluate(
                        black_box(Some("variant-7")),
                        black_box(&none),
                        black_box(&state),
                    )
                    .unwrap()
            })
        },
    );
    c.bench_function("compile: Engine::new of the same definition", |b| {
        let def = Definition::from_value(&definition()).unwrap();
        b.iter(|| Engine::new(black_box(def.clone())).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
