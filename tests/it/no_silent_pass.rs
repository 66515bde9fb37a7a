//! No silent pass (seed 003, "Five negative tests for the evidence boundary"), end to end: an
//! attempt is created through the API, calls are made, the server stops, and the real
//! `understudy evidence <id> --data-dir <dir>` must exit non-zero for a swallowed harness
//! error, a missing evidence event, a duplicate side effect, unverified cleanup, an expired
//! lease and an unknown ("pending") outcome — and 0 for the clean controls. The verdict rules
//! themselves are unit-tested in `src/evidence.rs`.
//!
//! Negative fixtures the server itself refuses to produce (a duplicate write, a hole in the
//! sequence, a failed cleanup) are forged into the stopped server's store through the store's
//! API or, for a deleted event, sled itself.

use std::process::Command;
use std::sync::Arc;

use serde_json::json;
use understudy::app::attempt::{Clock, ManualClock, SystemClock};
use understudy::records::{ResultStatus, ToolEvent};
use understudy::store::{CallRecord, Store};

use crate::support::{standard_project, Project, Server};

/// `understudy evidence <id> --data-dir <dir>`: exit code, stdout, stderr.
fn evidence_cli(p: &Project, id: &str) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["evidence", id, "--data-dir"])
        .arg(p.data_dir())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_fails(p: &Project, id: &str, why: &str) {
    let (code, stdout, stderr) = evidence_cli(p, id);
    assert_eq!(
        code, 1,
        "{why}: expected verdict fail (exit 1)\n{stderr}\n{stdout}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("the envelope is printed");
    assert_eq!(v["verdict"], "fail");
    assert!(stderr.contains(why), "the reason names `{why}`:\n{stderr}");
}

fn assert_passes(p: &Project, id: &str) {
    let (code, stdout, stderr) = evidence_cli(p, id);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
}

async fn bump(s: &Server, base: &str, n: i64) -> u16 {
    s.call(
        "POST",
        &format!("{base}/counter"),
        Some(&json!({ "n": n })),
        &[],
    )
    .await
    .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swallowed_harness_error_fails_the_attempt_even_when_the_agent_succeeds_after() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let clean = s.attempt(json!({})).await;
    let a = s.attempt(json!({})).await;
    assert_eq!(bump(&s, &clean.base("api"), 1).await, 200);
    // An input error alone does not fail (the agent may recover).
    assert_eq!(
        s.call(
            "POST",
            &format!("{}/counter", clean.base("api")),
            Some(&json!({ "n": "x" })),
            &[]
        )
        .await
        .status,
        400
    );
    assert_eq!(bump(&s, &a.base("api"), 1).await, 200);
    // A nested service hits an unmatched request and swallows the 500 …
    let r = s
        .call("GET", &format!("{}/not/mocked", a.base("api")), None, &[])
        .await;
    assert_eq!(r.status, 500);
    // … then the agent carries on and "succeeds".
    for n in 2..6 {
        assert_eq!(bump(&s, &a.base("api"), n).await, 200);
    }
    assert_eq!(s.evidence(&a.id).await["verdict"], "fail");
    assert_eq!(s.evidence(&clean.id).await["verdict"], "pass");
    s.stop().await.unwrap();
    assert_fails(&p, &a.id, "harness error");
    assert_passes(&p, &clean.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_evidence_event_fails() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let b = s.attempt(json!({})).await;
    for n in 1..=3 {
        assert_eq!(bump(&s, &a.base("api"), n).await, 200);
        assert_eq!(bump(&s, &b.base("api"), n).await, 200);
    }
    s.stop().await.unwrap();
    assert_passes(&p, &a.id);
    // Remove a's event 2 and b's last event (3) behind the server's back.
    {
        let store = understudy::store::Store::open(&p.data_dir()).unwrap();
        for (id, seq) in [(&a.id, 2u64), (&b.id, 3u64)] {
            assert!(
                store.remove_event_for_test(id, seq).unwrap(),
                "event {id}#{seq} existed"
            );
        }
    }
    assert_fails(&p, &a.id, "missing evidence");
    // The last event gone: no gap in 1..2, but the attempt's sequence counter still says 3.
    // The evidence is unreadable rather than passing (exit 2, naming the missing evidence).
    let (code, _, stderr) = evidence_cli(&p, &b.id);
    assert_ne!(code, 0, "a missing last event never passes: {stderr}");
    assert!(stderr.contains("missing evidence"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_side_effect_fails() {
    let p = Project::new(&[("api", "rest")]);
    p.op(
        "api",
        json!({
            "operation_id": "create_order",
            "match": { "method": "POST", "path": "/orders" },
            "idempotency": { "header": "Idempotency-Key" },
            "input_schema": { "type": "object", "required": ["item"] },
            "output_schema": { "type": "object", "required": ["status"] },
            "mock": {
                "schema_version": 1, "default_variant": "ok",
                "variants": { "ok": { "result": { "status": 201, "data": { "item": { "$input": "item" } } } } },
                "examples": [ { "variant": "ok", "input": { "item": "a" },
                                "expected": { "status": 201, "data": { "item": "a" } } } ]
            }
        }),
    );
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let url = format!("{}/orders", a.base("api"));
    let key = [("Idempotency-Key", "k-1")];
    for _ in 0..2 {
        let r = s
            .call("POST", &url, Some(&json!({ "item": "a" })), &key)
            .await;
        assert_eq!(r.status, 201);
    }
    s.stop().await.unwrap();
    // A retry that was replayed is not a duplicate.
    assert_passes(&p, &a.id);
    // A second execution attempt of the same logical write that took effect is.
    {
        let store = Store::open(&p.data_dir()).unwrap();
        let events = store.evidence(&a.id).unwrap();
        assert_eq!(events[1].result_status, ResultStatus::Replayed);
        let mut dup: ToolEvent = events[0].clone();
        dup.execution_attempt_id = "forged-second-execution".into();
        store
            .record_call(
                &a.id,
                CallRecord {
                    event: dup,
                    state: None,
                    result_json: None,
                },
            )
            .await
            .unwrap();
    }
    assert_fails(&p, &a.id, "duplicate side effect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unverified_cleanup_fails_and_verified_cleanup_passes() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let ended = s.attempt(json!({})).await;
    let residue = s.attempt(json!({})).await;
    for a in [&ended, &residue] {
        assert_eq!(bump(&s, &a.base("api"), 1).await, 200);
    }
    let r = s
        .call(
            "DELETE",
            &format!("/_understudy/api/attempts/{}", ended.id),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["cleanup"]["status"], "verified");
    s.stop().await.unwrap();
    assert_passes(&p, &ended.id);
    {
        let store = Store::open(&p.data_dir()).unwrap();
        let mut rec = store.attempt(&residue.id).unwrap().unwrap();
        rec.cleanup = Some(json!({ "status": "failed", "remaining_state_keys": 1 }));
        store.put_attempt(&rec).unwrap();
        let mut rec = store.attempt(&ended.id).unwrap().unwrap();
        rec.cleanup = Some(json!({ "status": "verified", "remaining_state_keys": 2 }));
        store.put_attempt(&rec).unwrap();
    }
    assert_fails(&p, &residue.id, "cleanup not verified");
    assert_fails(&p, &ended.id, "cleanup not verified");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_fails() {
    let p = standard_project();
    let clock = Arc::new(ManualClock::new(SystemClock.now()));
    let mut opts = p.options();
    opts.clock = clock.clone();
    let s = Server::start_with(opts).await;
    let expired = s.attempt(json!({ "ttl_s": 60 })).await;
    let late = s.attempt(json!({ "ttl_s": 60 })).await;
    assert_eq!(bump(&s, &expired.base("api"), 1).await, 200);
    assert_eq!(bump(&s, &late.base("api"), 1).await, 200);
    clock.advance(chrono::Duration::seconds(61));
    // The agent's call after the lease is a harness error it may ignore.
    assert_eq!(bump(&s, &expired.base("api"), 2).await, 500);
    s.stop().await.unwrap();
    assert_passes(&p, &late.id);
    assert_fails(&p, &expired.id, "lease_expired");
    // Defensive rule: an `ok` call stamped after the lease fails even if not marked expired.
    {
        let store = Store::open(&p.data_dir()).unwrap();
        let mut ev = store.evidence(&late.id).unwrap()[0].clone();
        ev.execution_attempt_id = "forged-late-call".into();
        ev.timestamp = understudy::util::time::rfc3339(clock.now());
        store
            .record_call(
                &late.id,
                CallRecord {
                    event: ev,
                    state: None,
                    result_json: None,
                },
            )
            .await
            .unwrap();
    }
    assert_fails(&p, &late.id, "after the lease expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_outcome_is_never_a_pass() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    assert_eq!(bump(&s, &a.base("api"), 1).await, 200);
    s.stop().await.unwrap();
    {
        let store = Store::open(&p.data_dir()).unwrap();
        let mut ev = store.evidence(&a.id).unwrap()[0].clone();
        ev.execution_attempt_id = "forged-pending".into();
        ev.result_status = "pending".into();
        store
            .record_call(
                &a.id,
                CallRecord {
                    event: ev,
                    state: None,
                    result_json: None,
                },
            )
            .await
            .unwrap();
    }
    assert_fails(&p, &a.id, "unknown result_status");
}

/// Broken correlation (seed 003's third negative test): a later call refers to something an
/// earlier call of the same run should have produced. `create_order` stores the order id in
/// the attempt's state; `get_order` answers with `{"$state": "order_id"}`. When the create
/// never happened in this run — skipped, refused as an input error, or made by another
/// attempt (a different run id) — the reference cannot be joined to this run: the read is a
/// harness error `missing_reference` and the attempt fails, never a pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_to_something_this_run_never_produced_fails() {
    let p = Project::new(&[("api", "rest")]);
    p.op(
        "api",
        json!({
            "operation_id": "create_order",
            "match": { "method": "POST", "path": "/orders" },
            "input_schema": { "type": "object", "required": ["id"],
                              "properties": { "id": { "type": "string" } } },
            "output_schema": { "type": "object", "required": ["status"] },
            "mock": {
                "schema_version": 1, "default_variant": "ok",
                "variants": { "ok": {
                    "result": { "status": 201, "data": { "id": { "$input": "id" } } },
                    "set_state": { "order_id": { "$input": "id" } }
                } },
                "examples": [ { "variant": "ok", "input": { "id": "o-1" },
                                "expected": { "status": 201, "data": { "id": "o-1" } } } ]
            }
        }),
    );
    p.op(
        "api",
        json!({
            "operation_id": "get_order",
            "match": { "method": "GET", "path": "/orders/{id}" },
            "input_schema": { "type": "object", "required": ["id"] },
            "output_schema": { "type": "object", "required": ["status"] },
            "mock": {
                "schema_version": 1, "default_variant": "ok",
                "variants": { "ok": {
                    "result": { "status": 200, "data": { "id": { "$state": "order_id" } } }
                } },
                "examples": [ { "variant": "ok", "input": { "id": "o-1" },
                                "state": { "order_id": "o-1" },
                                "expected": { "status": 200, "data": { "id": "o-1" } } } ]
            }
        }),
    );
    let s = Server::start(&p).await;
    let create = |a: &crate::support::Attempt, body: serde_json::Value| {
        let url = format!("{}/orders", a.base("api"));
        let s = &s;
        async move { s.call("POST", &url, Some(&body), &[]).await.status }
    };
    let get = |a: &crate::support::Attempt| {
        let url = format!("{}/orders/o-1", a.base("api"));
        let s = &s;
        async move { s.call("GET", &url, None, &[]).await }
    };

    // Control: the create, then the read that refers to it.
    let joined = s.attempt(json!({ "test_run_id": "run-1" })).await;
    assert_eq!(create(&joined, json!({ "id": "o-1" })).await, 201);
    let r = get(&joined).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["id"], "o-1");

    // The create was skipped.
    let skipped = s.attempt(json!({ "test_run_id": "run-2" })).await;
    // The create was refused (an input error changes no state).
    let refused = s.attempt(json!({ "test_run_id": "run-3" })).await;
    assert_eq!(create(&refused, json!({ "id": 42 })).await, 400);
    // The create happened, but in another run.
    let producer = s.attempt(json!({ "test_run_id": "run-4" })).await;
    let other_run = s.attempt(json!({ "test_run_id": "run-5" })).await;
    assert_eq!(create(&producer, json!({ "id": "o-1" })).await, 201);
    for (name, a) in [
        ("skipped", &skipped),
        ("refused", &refused),
        ("other run", &other_run),
    ] {
        let r = get(a).await;
        assert_eq!(r.status, 500, "{name}: {}", r.text);
        assert_eq!(
            r.header("understudy-error"),
            Some("missing_reference"),
            "{name}"
        );
        let ev = s.evidence(&a.id).await;
        assert_eq!(ev["verdict"], "fail", "{name}: {ev}");
        assert_eq!(ev["harness_errors"][0]["code"], "missing_reference");
    }
    s.stop().await.unwrap();
    assert_passes(&p, &joined.id);
    assert_passes(&p, &producer.id);
    for a in [&skipped, &refused, &other_run] {
        assert_fails(&p, &a.id, "missing_reference");
    }
}
