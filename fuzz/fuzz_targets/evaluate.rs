//! A fixed, realistic definition (rules, `$input`/`$state`, `$number`, `$dateAdd`,
//! `set_state`) evaluated against arbitrary JSON input and state. Never panics; every error
//! is an input or harness error.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};
use understudy::mock::{Definition, Engine};

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let def = json!({
            "schema_version": 1,
            "default_variant": "success",
            "initial_state": { "reference": "TEST-742", "count": 0 },
            "variants": {
                "success": {
                    "result": { "status": 200, "data": {
                        "reference": { "$state": "reference" },
                        "amount": { "$number": { "$input": "amount" } },
                        "due": { "$dateAdd": { "value": { "$input": "date" }, "days": 30, "hours": -3 } },
                        "first": { "$input": "items.0.name" },
                        "lit": { "$number": "42.50" }
                    } },
                    "set_state": { "booked": true, "last": { "$input": "slot" }, "count": { "$number": { "$input": "n" } } },
                    "rules": [
                        { "when": [ { "source": "input", "path": "slot.id", "op": "eq", "value": "S-1" } ],
                          "result": { "status": 409, "data": [ { "errorCode": "DUPLICATE_VALUE" } ] } },
                        { "when": [ { "source": "state", "path": "booked", "op": "exists" },
                                    { "source": "input", "path": "kind", "op": "in", "value": ["a", 1, 1.0, null] } ],
                          "delay_ms": 5 },
                        { "when": [ { "source": "input", "path": "x.1.y", "op": "ne", "value": { "k": [1, 2] } } ],
                          "result": { "status": 201, "data": { "echo": { "$input": "x" } } } }
                    ]
                },
                "missing": { "result": { "status": 404, "data": { "at": { "$state": "nowhere" } } } }
            },
            "examples": [ { "variant": "success", "input": { "amount": "1", "date": "2025-01-01", "items": [ { "name": "a" } ], "slot": {}, "n": 1 },
                            "expected": { "status": 200 } } ]
        });
        Engine::new(Definition::from_value(&def).expect("definition parses")).expect("compiles")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // `[input, state?, variant?]`, or the whole value as the input.
    let (input, state, variant) = match &v {
        Value::Array(a) if !a.is_empty() => (
            a[0].clone(),
            a.get(1).and_then(Value::as_object).cloned().unwrap_or_default(),
            a.get(2).and_then(Value::as_str).map(str::to_string),
        ),
        other => (other.clone(), Map::new(), None),
    };
    let e = engine();
    let _ = e.evaluate(variant.as_deref(), &input, &state);
    let _ = e.evaluate(None, &input, &e.initial_state());
    let _ = e.evaluate(Some("missing"), &input, &state);
});
