//! Replay hot path without the store: stages 4–6 of `proxy::pipeline` (evaluate under the
//! state lock, output validation, native rendering), what the evidence event takes of the
//! result (a static answer's encoded JSON, else a copy), and the HTTP response (a static
//! answer's prebuilt bytes, else `http::to_http`), for the two operations of `bench/project`
//! that `bench/run.sh` drives: `get_contact` (a result without any reference) and
//! `bump_counter` (a `$state` read, a rule tried, `set_state` from the input).
//!
//! Also the first routing pass over 10 000 operation files (`proxy::route`): every file
//! through `may_match`, as `route::operation` does, against only the candidates of a
//! `RouteIndex`.
//!
//! `cargo bench --bench pipeline -- --warm-up-time 1 --measurement-time 3`

use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};
use std::hint::black_box;
use understudy::app::attempt::AttemptState;
use understudy::contract::template::{path_segments, RequestView};
use understudy::contract::ProfileKind;
use understudy::http::to_http;
use understudy::operation::{load_dir, Operation};
use understudy::profile::Profile;
use understudy::profile::Wire;
use understudy::proxy::call::{evaluate, Prepared};
use understudy::proxy::route::{may_match, RouteIndex};
use understudy::store::EncodedResult;

fn prepared(id: &str, input: Value) -> Prepared {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/project/mocks/crm");
    let (loaded, problems) = load_dir(&dir, understudy::contract::ProfileKind::Salesforce);
    assert!(problems.is_empty(), "{problems:?}");
    let l = loaded
        .into_iter()
        .find(|l| l.op.operation_id == id)
        .expect("operation in bench/project");
    let op = Arc::new(Operation::compile("crm", ProfileKind::Salesforce, l).unwrap());
    Prepared {
        engine: op.engine().unwrap().expect("a mock"),
        op,
        wire: Wire::Http(Profile::builtin("salesforce").unwrap()),
        revision: 1,
        variant: None,
        input,
        idempotency: None,
    }
}

/// One call as `pipeline::handle` runs it, minus routing and the store: what the evidence
/// event takes of the result (a shared static answer's encoded JSON, else a copy of the
/// rendered result) and the HTTP response.
fn call(
    state: &mut AttemptState,
    p: &Prepared,
) -> (Option<EncodedResult>, Value, understudy::http::HttpResponse) {
    let d = evaluate(state, p);
    assert_eq!(d.result_status, understudy::records::ResultStatus::Ok);
    if let Some((integ, s)) = d.new_state {
        state.state.insert(integ, s);
    }
    match &d.shared {
        Some(a) => (a.result_json.clone(), Value::Null, a.to_http()),
        None => (None, d.result.clone(), to_http(d.response)),
    }
}

fn bench(c: &mut Criterion) {
    let get = prepared("get_contact", json!({"id": "003000000000001"}));
    let bump = prepared("bump_counter", json!({"Name": "c1", "By": "bench"}));
    let mut state = AttemptState::default();
    state
        .state
        .insert("crm".into(), bump.engine.initial_state());
    c.bench_function("replay: get_contact (static result)", |b| {
        b.iter(|| call(black_box(&mut state), black_box(&get)))
    });
    c.bench_function("replay: bump_counter ($state read, set_state)", |b| {
        b.iter(|| call(black_box(&mut state), black_box(&bump)))
    });
}

/// `n` GET operations `/services/data/*/sobjects/BenchNNNNN__c/{id}` (as bench/gen_ops.py).
fn many_operations(n: usize) -> Vec<Arc<Operation>> {
    (0..n)
        .map(|i| {
            let file = json!({
                "operation_id": format!("bench_{i:05}"),
                "match": {"method": "GET", "path": format!("/services/data/*/sobjects/Bench{i:05}__c/{{id}}")},
                "input_schema": {"type": "object"},
                "output_schema": {},
            });
            let l = understudy::operation::load::parse_operation(
                &file,
                Path::new("crm/x.json"),
                understudy::contract::ProfileKind::Salesforce,
            )
            .unwrap();
            Arc::new(Operation::compile("crm", ProfileKind::Salesforce, l).unwrap())
        })
        .collect()
}

fn routing(c: &mut Criterion) {
    let ops = many_operations(10_000);
    let index = RouteIndex::new(&ops);
    let segments = path_segments("/services/data/v60.0/sobjects/Bench04321__c/a0B000000000001");
    let headers = hyper::http::HeaderMap::new();
    let view = RequestView {
        method: "GET",
        segments: &segments,
        query: &[],
        headers: &headers,
    };
    let first_pass = |ids: &mut dyn Iterator<Item = &Arc<Operation>>| {
        ids.filter(|o| may_match(o.matcher.as_ref().unwrap(), &view))
            .count()
    };
    assert_eq!(first_pass(&mut ops.iter()), 1);
    // What the first pass did before `may_match`: `matches` (and its mismatch message) per file.
    c.bench_function(
        "route: 10 000 operations, every file through matches",
        |b| {
            b.iter(|| {
                black_box(&ops)
                    .iter()
                    .filter(|o| o.matcher.as_ref().unwrap().matches(&view).is_ok())
                    .count()
            })
        },
    );
    c.bench_function(
        "route: 10 000 operations, every file through may_match",
        |b| b.iter(|| first_pass(&mut black_box(&ops).iter())),
    );
    c.bench_function("route: 10 000 operations, RouteIndex candidates", |b| {
        b.iter(|| {
            first_pass(
                &mut black_box(&index)
                    .candidates(&view)
                    .into_iter()
                    .map(|i| &ops[i]),
            )
        })
    });
}

criterion_group!(benches, bench, routing);
criterion_main!(benches);
