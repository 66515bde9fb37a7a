use super::*;
use serde_json::{json, Value};

fn chaos(v: Value) -> ChaosFault {
    serde_json::from_value(v).unwrap()
}

/// Which of the first `n` evaluated calls fault, as the proxy would see them.
fn run(spec: &ChaosFault, op: &str, n: u64) -> Vec<bool> {
    let mut c = ChaosCounter::default();
    (0..n)
        .map(|_| decide(None, Some(spec), &mut c, op).is_some())
        .collect()
}

const OP: &str = "crm/book_appointment";

#[test]
fn the_same_seed_gives_the_same_faults_on_the_same_call_sequence() {
    let spec =
        chaos(json!({"kind": "timeout", "after_effect": true, "probability": 0.5, "seed": 42}));
    let a = run(&spec, OP, 200);
    let b = run(&spec, OP, 200);
    assert_eq!(a, b);
    let fired = a.iter().filter(|f| **f).count();
    assert!(
        (60..=140).contains(&fired),
        "p=0.5 over 200 calls fired {fired}"
    );
    // Pinned values: the draw is SHA-256 based and must never change between versions.
    assert_eq!(chaos_draw(42, OP, 0), chaos_draw(42, OP, 0));
    assert!((0.0..1.0).contains(&chaos_draw(42, OP, 0)));
}

#[test]
fn different_seeds_and_operations_differ() {
    let s42 =
        chaos(json!({"kind": "reset", "after_effect": false, "probability": 0.5, "seed": 42}));
    let s43 =
        chaos(json!({"kind": "reset", "after_effect": false, "probability": 0.5, "seed": 43}));
    assert_ne!(run(&s42, OP, 64), run(&s43, OP, 64));
    assert_ne!(run(&s42, OP, 64), run(&s42, "crm/lookup", 64));
}

#[test]
fn times_bounds_how_many_fire() {
    let once = chaos(json!({"kind": "timeout", "after_effect": true, "times": 1}));
    assert_eq!(run(&once, OP, 5), vec![true, false, false, false, false]);
    let p = chaos(
        json!({"kind": "timeout", "after_effect": true, "probability": 0.5, "seed": 7, "times": 3}),
    );
    let r = run(&p, OP, 500);
    assert_eq!(r.iter().filter(|f| **f).count(), 3);
    // The bounded run is the unbounded one cut after its third fault.
    let unbounded =
        chaos(json!({"kind": "timeout", "after_effect": true, "probability": 0.5, "seed": 7}));
    let u = run(&unbounded, OP, 500);
    let third = u.iter().enumerate().filter(|(_, f)| **f).nth(2).unwrap().0;
    assert_eq!(r[..=third], u[..=third]);
    assert!(r[third + 1..].iter().all(|f| !f));
}

#[test]
fn probability_zero_never_fires_and_one_always_does() {
    let never = chaos(json!({"kind": "close", "after_effect": false, "probability": 0, "seed": 1}));
    assert!(run(&never, OP, 1000).iter().all(|f| !f));
    let always =
        chaos(json!({"kind": "close", "after_effect": false, "probability": 1.0, "seed": 1}));
    assert!(run(&always, OP, 1000).iter().all(|f| *f));
    let default = chaos(json!({"kind": "close", "after_effect": false}));
    assert_eq!(
        (default.probability, default.seed, default.times),
        (1.0, 0, None)
    );
}

#[test]
fn chaos_wins_over_the_definition_and_the_index_always_advances() {
    let def = Fault {
        kind: FaultKind::Reset,
        after_effect: false,
        ms: None,
        chunks: None,
        status: None,
        headers: None,
        code: None,
        message: None,
    };
    let spec = chaos(json!({"kind": "timeout", "after_effect": true, "ms": 100, "times": 1}));
    let mut c = ChaosCounter::default();
    let first = decide(Some(&def), Some(&spec), &mut c, OP).unwrap();
    assert_eq!(
        (first.kind, first.origin),
        (FaultKind::Timeout, FaultOrigin::Chaos)
    );
    assert_eq!(first.answer, FaultAnswer::Hold { ms: 100 });
    let second = decide(Some(&def), Some(&spec), &mut c, OP).unwrap();
    assert_eq!(
        (second.kind, second.origin),
        (FaultKind::Reset, FaultOrigin::Mock)
    );
    assert_eq!(decide(None, Some(&spec), &mut c, OP), None);
    assert_eq!(c, ChaosCounter { calls: 3, fired: 1 });
    assert_eq!(decide(None, None, &mut ChaosCounter::default(), OP), None);
}

#[test]
fn plans_status_and_record() {
    let plan = |v: Value| FaultPlan::of(&serde_json::from_value(v).unwrap(), FaultOrigin::Mock);
    let t = plan(json!({"kind": "timeout", "after_effect": true}));
    assert!(t.commit_effect);
    assert_eq!(t.answer, FaultAnswer::Hold { ms: 30000 });
    assert_eq!(t.result_status(), ResultStatus::Ok);
    assert_eq!(
        serde_json::to_value(t.record(201)).unwrap(),
        json!({"kind": "timeout", "after_effect": true, "origin": "mock"})
    );
    let r = plan(json!({"kind": "reset", "after_effect": false}));
    assert_eq!(
        (r.commit_effect, r.result_status()),
        (false, ResultStatus::Blocked)
    );
    assert_eq!(r.answer, FaultAnswer::Reset);
    let s = plan(
        json!({"kind": "status", "after_effect": true, "status": 503, "headers": {"Retry-After": "2"}}),
    );
    assert_eq!(
        s.answer,
        FaultAnswer::Status {
            status: 503,
            headers: vec![("Retry-After".into(), "2".into())]
        }
    );
    assert_eq!(s.record(201).wire_status, Some(503));
    let b = plan(json!({"kind": "slow_body", "after_effect": true, "ms": 1000}));
    assert_eq!(
        b.answer,
        FaultAnswer::SlowBody {
            chunks: 10,
            ms: 1000
        }
    );
    assert_eq!(b.record(201).wire_status, Some(201));
    assert_eq!(
        plan(json!({"kind": "malformed_body", "after_effect": true})).answer,
        FaultAnswer::Truncated
    );
    assert_eq!(
        plan(json!({"kind": "close", "after_effect": true})).answer,
        FaultAnswer::Close
    );
    assert_eq!(
        plan(json!({"kind": "jsonrpc_error", "after_effect": false, "code": -32000})).answer,
        FaultAnswer::JsonRpcError {
            code: -32000,
            message: "fault injected".into()
        }
    );
    let cut = plan(json!({"kind": "stream_cut", "after_effect": true}));
    assert_eq!(
        (cut.answer.clone(), cut.record(200).wire_status),
        (FaultAnswer::StreamCut, Some(200))
    );
}

#[test]
fn bodies_are_cut_and_dribbled() {
    let body = br#"{"id":"a1","success":true}"#;
    let t = truncated_body(body);
    assert!(t.len() < body.len() && body.starts_with(&t));
    assert!(serde_json::from_slice::<Value>(&t).is_err());
    assert_eq!(truncated_body(b""), b"{");
    let plan = slow_chunks(body, 4, 1000);
    assert_eq!(plan.len(), 4);
    assert_eq!(plan.iter().map(|(ms, _)| ms).sum::<u64>(), 1000);
    let joined: Vec<u8> = plan
        .iter()
        .flat_map(|(_, r)| body[r.clone()].to_vec())
        .collect();
    assert_eq!(joined, body);
    assert_eq!(
        slow_chunks(b"ab", 10, 100).len(),
        2,
        "never more chunks than bytes"
    );
    assert_eq!(slow_chunks(b"", 10, 100), vec![(100, 0..0)]);
}

#[test]
fn chaos_specs_are_checked_and_round_trip() {
    let spec = chaos(
        json!({"kind": "timeout", "after_effect": true, "probability": 0.5, "seed": 42, "times": 1}),
    );
    let v = serde_json::to_value(&spec).unwrap();
    assert_eq!(
        v,
        json!({"kind": "timeout", "after_effect": true, "probability": 0.5, "seed": 42, "times": 1})
    );
    assert_eq!(chaos(v), spec);
    assert!(chaos_problems(OP, &spec, false).is_empty());
    let bad = chaos(
        json!({"kind": "jsonrpc_error", "after_effect": true, "code": 1, "probability": 1.5, "times": 0}),
    );
    let p = chaos_problems(OP, &bad, false);
    assert!(
        p.iter()
            .any(|p| p
                .starts_with("faults/crm/book_appointment/kind: `jsonrpc_error` is an MCP fault")),
        "{p:?}"
    );
    assert!(
        p.contains(
            &"faults/crm/book_appointment/probability: 1.5: expected a number 0..=1".to_string()
        ),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|p| p.starts_with("faults/crm/book_appointment/times: 0: expected at least 1")),
        "{p:?}"
    );
    assert!(chaos_problems(OP, &bad, true).len() == 2);
    let e = serde_json::from_value::<ChaosFault>(
        json!({"kind": "timeout", "after_effect": true, "probabilty": 0.5}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown field `probabilty`"), "{e}");
    let e = serde_json::from_value::<ChaosFault>(
        json!({"kind": "timeout", "after_effect": true, "seed": -1}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("`seed`"), "{e}");
}

#[test]
fn old_attempt_records_read_without_faults() {
    let old = json!({"attempt_id": "a", "token_hash": "h", "secret": "", "test_run_id": null,
        "started_at": "2026-01-01T00:00:00Z", "ended_at": null, "expires_at": null,
        "pins": {}, "variants": {}, "is_default": false, "cleanup": null});
    let rec: crate::records::AttemptRecord = serde_json::from_value(old.clone()).unwrap();
    assert!(rec.faults.is_empty());
    assert_eq!(
        serde_json::to_value(&rec).unwrap(),
        old,
        "no `faults` member written when empty"
    );
    let mut with = old;
    with["faults"] = json!({OP: {"kind": "timeout", "after_effect": true, "seed": 42, "times": 1}});
    let rec: crate::records::AttemptRecord = serde_json::from_value(with).unwrap();
    assert_eq!(rec.faults[OP].times, Some(1));
}

#[test]
fn only_an_ok_event_with_an_after_effect_fault_counts_as_fault_after_effect() {
    let rec = |after_effect| FaultRecord {
        kind: "timeout".into(),
        after_effect,
        origin: None,
        wire_status: None,
    };
    assert!(fault_after_effect(&ResultStatus::Ok, Some(&rec(true))));
    assert!(!fault_after_effect(&ResultStatus::Ok, Some(&rec(false))));
    assert!(!fault_after_effect(
        &ResultStatus::Blocked,
        Some(&rec(true))
    ));
    assert!(!fault_after_effect(
        &ResultStatus::Replayed,
        Some(&rec(true))
    ));
    assert!(!fault_after_effect(&ResultStatus::Ok, None));
}
