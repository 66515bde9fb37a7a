use super::*;
use crate::evidence::stream::{envelope, envelope_of};
use crate::records::Pin;
use serde_json::json;

fn attempt() -> AttemptRecord {
    AttemptRecord {
        attempt_id: "att_1".into(),
        token_hash: "th".into(),
        secret: "00".repeat(32),
        test_run_id: Some("run_84721".into()),
        started_at: "2026-01-01T10:00:00.000Z".into(),
        ended_at: None,
        expires_at: Some("2026-01-01T11:00:00.000Z".into()),
        pins: BTreeMap::from([(
            "crm/lookup".to_string(),
            Pin {
                revision: 3,
                contract_hash: "sha256:abc".into(),
            },
        )])
        .into(),
        revision_set: None,
        variants: BTreeMap::new(),
        is_default: false,
        cleanup: None,
        contracts: Default::default(),
        final_state: None,
        faults: BTreeMap::new(),
        durability: Default::default(),
        interrupted: false,
        ..Default::default()
    }
}

fn ev(seq: u64, status: &str) -> ToolEvent {
    ToolEvent {
        sequence: seq,
        execution_attempt_id: format!("exec_{seq}"),
        integration: "crm".into(),
        operation_id: Some("lookup".into()),
        revision: Some(3),
        variant: Some("found".into()),
        rule: None,
        is_write: false,
        arguments: json!({"phone": "+1555"}),
        result: json!({"status": 200, "data": {"Id": "003"}}),
        result_status: status.into(),
        http_status: 200,
        latency_ms: 0.4,
        delay_ms: 0,
        idempotency_key_ref: None,
        trace_id: None,
        source: "mock".into(),
        error: None,
        timestamp: "2026-01-01T10:05:00.000Z".into(),
        fault: None,
    }
}

fn write(seq: u64, status: &str, key: &str) -> ToolEvent {
    ToolEvent {
        is_write: true,
        idempotency_key_ref: Some(key.into()),
        ..ev(seq, status)
    }
}

fn harness(seq: u64, code: &str) -> ToolEvent {
    ToolEvent {
        http_status: 500,
        error: Some(json!({"code": code, "message": "boom", "path": null})),
        ..ev(seq, "harness_error")
    }
}

/// The messages of the verdict over `events` alone (no agent-side event, no contract).
fn reasons(a: &AttemptRecord, events: &[ToolEvent]) -> Vec<String> {
    let v = verdict::judge(a, events, &[], &[]);
    assert_eq!(v.passed(), v.reasons.is_empty());
    v.reasons.into_iter().map(|r| r.message).collect()
}

fn all_reasons(i: &Inputs<'_>, results: &[ContractResult]) -> Vec<String> {
    verdict_of(i, results)
        .reasons
        .into_iter()
        .map(|r| r.message)
        .collect()
}

#[test]
fn an_interrupted_attempt_fails_even_when_every_rule_passes() {
    let events = [ev(1, "ok"), ev(2, "ok")];
    assert!(reasons(&attempt(), &events).is_empty());
    let a = AttemptRecord {
        durability: crate::records::Durability::Attempt,
        interrupted: true,
        ..attempt()
    };
    let r = reasons(&a, &events);
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(r[0].starts_with("interrupted:"), "{r:?}");
    let found = AttemptEvidence {
        attempt: a,
        calls: events.to_vec(),
        events: vec![],
        live_state: BTreeMap::new(),
    };
    let env = envelope_of(&Inputs::of(&found, &[]));
    assert_eq!(env["verdict"], "fail");
    assert_eq!(env["verdict_reasons"][0]["code"], "interrupted");
}

#[test]
fn a_clean_attempt_passes() {
    let events = [
        ev(1, "ok"),
        ev(2, "input_error"),
        write(3, "ok", "k1"),
        write(4, "replayed", "k1"),
        ev(5, "blocked"),
        ev(6, "simulated"),
        ev(7, "forwarded"),
    ];
    assert_eq!(reasons(&attempt(), &events), Vec::<String>::new());
    // Nothing happened is not a pass, unless the attempt said so at creation.
    let r = reasons(&attempt(), &[]);
    assert_eq!(r.len(), 1);
    assert!(r[0].starts_with("no calls"), "{r:?}");
    let quiet = AttemptRecord {
        expect_calls: false,
        ..attempt()
    };
    assert_eq!(reasons(&quiet, &[]), Vec::<String>::new());
}

#[test]
fn a_harness_error_fails() {
    let r = reasons(&attempt(), &[ev(1, "ok"), harness(2, "no_mock")]);
    assert_eq!(r.len(), 1);
    assert!(
        r[0].contains("harness error at sequence 2: no_mock"),
        "{r:?}"
    );
}

#[test]
fn a_recorded_lease_expiry_fails() {
    let r = reasons(&attempt(), &[harness(1, "lease_expired")]);
    assert!(r[0].contains("lease_expired"), "{r:?}");
}

#[test]
fn a_call_after_the_lease_fails_even_if_not_recorded_as_expired() {
    let late = ToolEvent {
        timestamp: "2026-01-01T11:00:00.001Z".into(),
        ..ev(1, "ok")
    };
    let r = reasons(&attempt(), &[late]);
    assert_eq!(r.len(), 1);
    assert!(r[0].contains("after the lease expired"), "{r:?}");
}

// Mutation testing found `t > exp` → `>=` survived: a call at the very instant the lease
// expires is still inside it (docs/src/reference/verdict.md: calls *after* the lease fail), one a millisecond later
// is not.
#[test]
fn a_call_at_the_instant_the_lease_expires_is_inside_it() {
    let at = ToolEvent {
        timestamp: "2026-01-01T11:00:00Z".into(),
        ..ev(1, "ok")
    };
    assert!(reasons(&attempt(), &[at]).is_empty());
}

#[test]
fn ending_after_the_lease_with_every_call_inside_it_passes() {
    let a = AttemptRecord {
        ended_at: Some("2026-01-01T12:00:00Z".into()),
        ..attempt()
    };
    assert!(reasons(&a, &[ev(1, "ok")]).is_empty());
}

#[test]
fn an_unreadable_timestamp_makes_the_lease_check_inconclusive() {
    let bad = ToolEvent {
        timestamp: "yesterday".into(),
        ..ev(1, "ok")
    };
    let r = reasons(&attempt(), &[bad]);
    assert!(r[0].contains("inconclusive"), "{r:?}");
}

#[test]
fn unverified_cleanup_fails() {
    let mut a = attempt();
    let one = [ev(1, "ok")];
    a.cleanup = Some(json!({"status": "failed", "remaining_state_keys": 1}));
    assert!(reasons(&a, &one)[0].contains("cleanup not verified"));
    a.cleanup = Some(json!({"status": "verified", "remaining_state_keys": 2}));
    assert_eq!(reasons(&a, &one).len(), 1);
    a.cleanup = Some(json!({"remaining_state_keys": 0}));
    assert_eq!(reasons(&a, &one).len(), 1);
    // What was left is unknown: never a pass.
    a.cleanup = Some(json!({"status": "verified"}));
    assert_eq!(reasons(&a, &one).len(), 1);
    a.cleanup = Some(json!({"status": "verified", "remaining_state_keys": 0}));
    assert!(reasons(&a, &one).is_empty());
}

#[test]
fn two_applied_writes_with_one_idempotency_key_fail() {
    let r = reasons(&attempt(), &[write(1, "ok", "k1"), write(2, "ok", "k1")]);
    assert_eq!(r.len(), 1);
    assert!(
        r[0].contains("duplicate side effect: sequences 1 and 2"),
        "{r:?}"
    );
    // a forwarded retry that reached the real system counts too
    assert_eq!(
        reasons(
            &attempt(),
            &[write(1, "ok", "k1"), write(2, "forwarded", "k1")]
        )
        .len(),
        1
    );
    // different keys, or a replay, are fine
    assert!(reasons(&attempt(), &[write(1, "ok", "k1"), write(2, "ok", "k2")]).is_empty());
    assert!(reasons(
        &attempt(),
        &[write(1, "ok", "k1"), write(2, "replayed", "k1")]
    )
    .is_empty());
}

#[test]
fn a_missing_event_fails() {
    let r = reasons(&attempt(), &[ev(1, "ok"), ev(3, "ok")]);
    assert_eq!(r.len(), 1);
    assert!(
        r[0].contains("missing evidence: expected sequence 2, found 3"),
        "{r:?}"
    );
    assert_eq!(reasons(&attempt(), &[ev(2, "ok")]).len(), 1);
    assert_eq!(reasons(&attempt(), &[ev(1, "ok"), ev(1, "ok")]).len(), 1);
    // order of the slice does not matter, only the set of sequences
    assert!(reasons(&attempt(), &[ev(2, "ok"), ev(1, "ok")]).is_empty());
}

#[test]
fn an_unknown_result_status_fails() {
    let r = reasons(&attempt(), &[ev(1, "pending")]);
    assert!(r[0].contains("unknown result_status `pending`"), "{r:?}");
}

#[test]
fn redaction_is_recursive_and_case_insensitive() {
    let v = json!({"phone": "1", "a": [{"Phone": "2", "x": {"PHONE": {"deep": 1}}}], "keep": "k"});
    let r = redacted(&v, &["phone".to_string()]);
    assert_eq!(
        r,
        json!({"phone": "[redacted]", "a": [{"Phone": "[redacted]", "x": {"PHONE": "[redacted]"}}], "keep": "k"})
    );
    assert_eq!(redacted(&v, &[]), v);
}

#[test]
fn envelope_has_exactly_the_spec_members() {
    let env = envelope(&attempt(), &[ev(1, "ok")], &BTreeMap::new(), &[]);
    let keys: Vec<&str> = env
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = vec![
        "schema_version",
        "attempt_id",
        "test_run_id",
        "started_at",
        "ended_at",
        "pins",
        "tool_events",
        "tool_input_errors",
        "harness_errors",
        "blocked_side_effects",
        "final_state",
        "verdict",
        "contracts",
        "events",
        "cleanup",
        "contract_results",
        "verdict_reasons",
        "store_failures",
        "outside_attempt",
        "last_sequence",
    ];
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(env["schema_version"], "understudy.evidence.v1");
    assert_eq!(env["ended_at"], Value::Null);
    assert_eq!(
        env["pins"],
        json!({"crm/lookup": {"revision": 3, "contract_hash": "sha256:abc"}})
    );
}

#[test]
fn derived_lists_and_redaction_in_the_envelope() {
    let mut state = BTreeMap::new();
    state.insert(
        "crm".to_string(),
        json!({"phone": "+1", "n": 1}).as_object().unwrap().clone(),
    );
    let input = ToolEvent {
        http_status: 400,
        error: Some(json!({"code": "input_error", "message": "phone missing", "path": "phone"})),
        ..ev(2, "input_error")
    };
    let tagged = ToolEvent {
        source: "tool_test".into(),
        is_write: true,
        ..ev(5, "forwarded")
    };
    let events = vec![
        ev(1, "ok"),
        input,
        harness(3, "unmatched_request"),
        ToolEvent {
            is_write: true,
            http_status: 403,
            ..ev(4, "blocked")
        },
        tagged,
        ToolEvent {
            is_write: true,
            http_status: 201,
            ..ev(6, "simulated")
        },
    ];
    let env = envelope(&attempt(), &events, &state, &["phone".to_string()]);
    assert_eq!(env["tool_events"].as_array().unwrap().len(), 6);
    assert_eq!(
        env["tool_events"][0]["arguments"],
        json!({"phone": "[redacted]"})
    );
    assert_eq!(
        env["tool_input_errors"],
        json!([{"sequence": 2, "integration": "crm", "operation_id": "lookup",
                    "arguments": {"phone": "[redacted]"},
                    "error": {"code": "input_error", "message": "phone missing", "path": "phone"}}])
    );
    assert_eq!(
        env["harness_errors"],
        json!([{"sequence": 3, "integration": "crm", "operation_id": "lookup",
                    "code": "unmatched_request", "message": "boom", "path": null}])
    );
    let actions: Vec<(u64, &str)> = env["blocked_side_effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["sequence"].as_u64().unwrap(),
                b["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        vec![(4, "blocked"), (5, "tagged"), (6, "simulated")]
    );
    assert_eq!(
        env["final_state"],
        json!({"crm": {"phone": "[redacted]", "n": 1}})
    );
    assert_eq!(env["verdict"], "fail");
}

#[test]
fn tool_event_serializes_with_the_spec_field_names() {
    let v = serde_json::to_value(ev(1, "ok")).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut want = vec![
        "sequence",
        "execution_attempt_id",
        "integration",
        "operation_id",
        "revision",
        "variant",
        "rule",
        "is_write",
        "arguments",
        "result",
        "result_status",
        "http_status",
        "latency_ms",
        "delay_ms",
        "idempotency_key_ref",
        "trace_id",
        "source",
        "error",
        "timestamp",
    ];
    want.sort();
    assert_eq!(keys, want);
}

fn agent(seq: u64, name: &str) -> AgentEvent {
    AgentEvent {
        sequence: seq,
        name: name.into(),
        kind: crate::records::AgentEventKind::AgentMessage,
        test_run_id: Some("run_84721".into()),
        text: Some("you are booked".into()),
        data: Some(json!({"phone": "+1555", "n": 1})),
        timestamp: "2026-01-01T10:06:00.000Z".into(),
    }
}

fn inputs<'a>(
    a: &'a AttemptRecord,
    calls: &'a [ToolEvent],
    events: &'a [AgentEvent],
    live: &'a BTreeMap<String, Map<String, Value>>,
    redact: &'a [String],
) -> Inputs<'a> {
    Inputs {
        attempt: a,
        calls,
        events,
        live_state: live,
        redact,
    }
}

#[test]
fn the_gap_rule_counts_calls_and_events_together() {
    let a = attempt();
    let live = BTreeMap::new();
    let calls = [ev(1, "ok"), ev(3, "ok")];
    let events = [agent(2, "said")];
    let i = inputs(&a, &calls, &events, &live, &[]);
    assert!(all_reasons(&i, &[]).is_empty());
    assert!(!verify_evidence(&i).has_gap);
    // Without the event, sequence 2 is missing.
    let i = inputs(&a, &calls, &[], &live, &[]);
    assert!(all_reasons(&i, &[])[0].contains("expected sequence 2, found 3"));
    assert!(verify_evidence(&i).has_gap);
    // An event repeating a call's sequence is a repeat.
    let dup = [agent(1, "said")];
    let i = inputs(&a, &calls[..1], &dup, &live, &[]);
    assert_eq!(all_reasons(&i, &[]).len(), 1);
}

#[test]
fn events_are_exported_redacted_and_reach_the_evaluator_redacted() {
    let a = attempt();
    let live = BTreeMap::new();
    let calls = [ev(1, "ok")];
    let events = [agent(2, "told_caller_booked")];
    let redact = ["phone".to_string()];
    let i = inputs(&a, &calls, &events, &live, &redact);
    let env = envelope_of(&i);
    assert_eq!(
        env["events"],
        json!([{"sequence": 2, "name": "told_caller_booked", "kind": "agent_message",
                    "test_run_id": "run_84721", "text": "you are booked",
                    "data": {"phone": "[redacted]", "n": 1},
                    "timestamp": "2026-01-01T10:06:00.000Z"}])
    );
    assert_eq!(env["verdict"], "pass");
    assert_eq!(env["verdict_reasons"], json!([]));
    let e = verify_evidence(&i);
    assert_eq!(e.items.len(), 2);
    match &e.items[1] {
        verify::Item::Event(ev) => assert_eq!(ev.data["phone"], "[redacted]"),
        other => panic!("{other:?}"),
    }
    match &e.items[0] {
        verify::Item::Call(c) => assert_eq!(c.arguments["phone"], "[redacted]"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_end_snapshot_is_the_final_state_once_ended() {
    let mut a = attempt();
    let live = BTreeMap::new();
    let snap = BTreeMap::from([(
        "crm".to_string(),
        json!({"booked": true}).as_object().unwrap().clone(),
    )]);
    a.final_state = Some(snap);
    a.ended_at = Some("2026-01-01T10:30:00Z".into());
    a.cleanup = Some(json!({"status": "verified", "remaining_state_keys": 0}));
    let i = inputs(&a, &[], &[], &live, &[]);
    assert_eq!(
        envelope_of(&i)["final_state"],
        json!({"crm": {"booked": true}})
    );
    let e = verify_evidence(&i);
    assert_eq!(e.final_state, Some(json!({"crm": {"booked": true}})));
    assert!(e.ended && e.cleanup_verified && e.remaining_keys == Some(0));
    a.cleanup = Some(json!({"status": "unverified", "remaining_state_keys": 2}));
    let e = verify_evidence(&inputs(&a, &[], &[], &live, &[]));
    assert!(!e.cleanup_verified && e.remaining_keys == Some(2));
}

// Mutation testing (cargo mutants) found `evaluate_contracts -> vec![]` survived the unit
// tests: the contracts given to `verify --contract` are judged over the same evidence.
#[test]
fn given_contracts_are_each_judged_over_the_evidence() {
    let a = attempt();
    let live = BTreeMap::new();
    let calls = [ev(1, "ok"), ev(2, "input_error")];
    let parse = |id: &str, tool: &str| {
        let c = verify::parse(
            &format!("{id}.yaml"),
            &format!("version: 1\nid: {id}\ntool: {tool}\n"),
        )
        .unwrap();
        let h = verify::contract_hash(&c);
        (c, h)
    };
    let given = [parse("called", "crm/lookup"), parse("never", "crm/book")];
    let results = evaluate_contracts(&inputs(&a, &calls, &[], &live, &[]), &given);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].contract_id, "called");
    assert_eq!(
        results[0].status,
        verify::Status::Passed,
        "{:?}",
        results[0]
    );
    assert_eq!(results[0].contract_hash, given[0].1);
    assert_eq!(results[1].contract_id, "never");
    assert_eq!(results[1].status, verify::Status::Inconclusive);
}

#[test]
fn a_blocking_pinned_contract_that_fails_fails_the_verdict_and_advisory_does_not() {
    let contract = |id: &str, risk: &str| {
        let c = verify::parse(
            &format!("{id}.yaml"),
            &format!("version: 1\nid: {id}\nrisk: {risk}\ntool: crm/book\n"),
        )
        .unwrap();
        crate::records::PinnedContract {
            contract_hash: verify::contract_hash(&c),
            contract: serde_json::to_value(&c).unwrap(),
        }
    };
    let mut a = attempt();
    a.contracts
        .insert("adv".into(), contract("adv", "advisory"));
    let live = BTreeMap::new();
    let calls = [ev(1, "ok")];
    let env = envelope_of(&inputs(&a, &calls, &[], &live, &[]));
    // The tool was never called: inconclusive, which never passes.
    assert_eq!(env["contract_results"][0]["status"], "inconclusive");
    assert_eq!(env["verdict"], "pass", "advisory is reported only");
    a.contracts
        .insert("blk".into(), contract("blk", "blocking"));
    let env = envelope_of(&inputs(&a, &calls, &[], &live, &[]));
    assert_eq!(env["contract_results"].as_array().unwrap().len(), 2);
    // The readers outside the envelope (verify, the span export) get the same results.
    let direct = contract_results(&inputs(&a, &calls, &[], &live, &[]));
    let ids: Vec<&str> = direct.iter().map(|r| r.contract_id.as_str()).collect();
    assert_eq!(ids, ["adv", "blk"]);
    assert_eq!(
        serde_json::to_value(&direct).unwrap(),
        env["contract_results"]
    );
    assert_eq!(env["verdict"], "fail");
    let reasons = env["verdict_reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert_eq!(
        reasons[0]["code"], "contract:blk:tool[crm/book]",
        "{reasons:?}"
    );
    assert!(
        reasons[0]["message"]
            .as_str()
            .unwrap()
            .contains("contract blk"),
        "{reasons:?}"
    );
    // A pinned contract this build cannot read is inconclusive, and fails the verdict.
    a.contracts.clear();
    a.contracts.insert(
        "odd".into(),
        crate::records::PinnedContract {
            contract_hash: "sha256:x".into(),
            contract: json!({"version": 1, "id": "odd", "tool": "crm/book", "future_key": 1}),
        },
    );
    let env = envelope_of(&inputs(&a, &calls, &[], &live, &[]));
    assert_eq!(env["contract_results"][0]["status"], "inconclusive");
    assert_eq!(env["verdict"], "fail");
}

#[test]
fn old_attempt_records_without_the_new_members_still_read() {
    let mut v = serde_json::to_value(attempt()).unwrap();
    let m = v.as_object_mut().unwrap();
    assert!(!m.contains_key("contracts") && !m.contains_key("final_state"));
    m.remove("contracts");
    let back: AttemptRecord = serde_json::from_value(v).unwrap();
    assert_eq!(back, attempt());
}
