//! Fills a data dir with one attempt of N calls through the store's own write path (the
//! frames, the journal and the group commit a served call uses), for `bench/evidence_read.sh`:
//! serving a million calls over HTTP would take longer than the read being measured.
//!
//! `cargo run --release --example evidence_fill -- DATA_DIR ATTEMPT_ID N`
//!
//! Every 50th call is an input error and every 1 000th an agent-side event, so the derived
//! lists and the shared sequence are exercised; arguments and results are ~300 bytes, the
//! size of a typical REST call's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;
use understudy::records::{AgentEvent, AgentEventKind, AttemptRecord, ToolEvent};
use understudy::store::{CallRecord, Store};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, id, n] = args.as_slice() else {
        eprintln!("usage: evidence_fill DATA_DIR ATTEMPT_ID N");
        std::process::exit(2);
    };
    let n: u64 = n.parse().expect("N: a number");
    let store = Store::open(&PathBuf::from(dir)).expect("open the data dir");
    let rec = AttemptRecord {
        attempt_id: id.clone(),
        token_hash: format!("bench-{id}"),
        secret: "ab".repeat(32),
        test_run_id: Some("bench".into()),
        started_at: "2026-01-01T10:00:00.000Z".into(),
        expires_at: Some("2099-01-01T00:00:00.000Z".into()),
        variants: BTreeMap::new(),
        ..AttemptRecord::default()
    };
    store.put_attempt(&rec).expect("put the attempt");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pad = "x".repeat(120);
    for i in 1..=n {
        if i % 1000 == 0 {
            let e = AgentEvent {
                sequence: 0,
                name: "checkpoint".into(),
                kind: AgentEventKind::Checkpoint,
                test_run_id: None,
                text: Some(format!("step {i}")),
                data: None,
                timestamp: "2026-01-01T10:01:00.000Z".into(),
            };
            store.write_agent_event(id, e).expect("write an event");
        } else {
            let bad = i % 50 == 0;
            let event = ToolEvent {
                sequence: 0,
                execution_attempt_id: format!("exec_{i}"),
                integration: "crm".into(),
                operation_id: Some("lookup".into()),
                revision: Some(1),
                variant: Some("found".into()),
                rule: None,
                is_write: false,
                arguments: json!({ "phone": format!("+1555{i:07}"), "note": pad }),
                result: json!({ "status": 200, "data": { "Id": format!("003{i:012}"), "FirstName": "Ada", "note": pad } }),
                result_status: if bad { "input_error" } else { "ok" }.into(),
                http_status: if bad { 400 } else { 200 },
                latency_ms: 0.2,
                delay_ms: 0,
                idempotency_key_ref: None,
                trace_id: None,
                source: "mock".into(),
                error: bad.then(|| json!({"code": "invalid_input", "message": "phone: not E.164", "path": "/phone"})),
                timestamp: "2026-01-01T10:01:00.000Z".into(),
                fault: None,
            };
            store
                .write_call(
                    id,
                    CallRecord {
                        event,
                        state: None,
                        result_json: None,
                    },
                )
                .expect("write a call");
        }
        if i % 10_000 == 0 {
            rt.block_on(store.wait_durable()).expect("commit");
        }
    }
    rt.block_on(store.wait_durable()).expect("commit");
    store.flush_now().expect("checkpoint");
    println!("{n} entries in attempt {id}");
}
