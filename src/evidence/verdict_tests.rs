use super::*;
use serde_json::json;

fn call(seq: u64, status: &str) -> ToolEvent {
    ToolEvent {
        sequence: seq,
        execution_attempt_id: format!("e{seq}"),
        integration: "crm".into(),
        operation_id: Some("op".into()),
        revision: Some(1),
        variant: None,
        rule: None,
        is_write: false,
        arguments: json!({}),
        result: json!({}),
        result_status: status.into(),
        http_status: 200,
        latency_ms: 0.0,
        delay_ms: 0,
        idempotency_key_ref: None,
        trace_id: None,
        source: "mock".into(),
        error: None,
        timestamp: "2026-01-01T10:05:00Z".into(),
        fault: None,
    }
}

fn harness(seq: u64, code: &str) -> ToolEvent {
    ToolEvent {
        error: Some(json!({"code": code, "message": "m"})),
        ..call(seq, "harness_error")
    }
}

fn codes(a: &AttemptRecord, calls: &[ToolEvent]) -> Vec<String> {
    judge(a, calls, &[], &[])
        .reasons
        .into_iter()
        .map(|r| r.code)
        .collect()
}

#[test]
fn every_attempt_rule_has_its_own_stable_code() {
    let codes: Vec<String> = Rule::ATTEMPT_RULES.iter().map(Rule::code).collect();
    assert_eq!(
        codes,
        [
            "harness_error",
            "store_failure",
            "lease_expired",
            "attempt_ended",
            "duplicate_side_effect",
            "missing_evidence",
            "unknown_status",
            "interrupted",
            "no_calls",
            "outside_attempt",
            "cleanup_not_verified"
        ]
    );
    let c = Rule::Contract {
        id: "book".into(),
        check: "tool[crm/book]".into(),
    };
    assert_eq!(c.code(), "contract:book:tool[crm/book]");
    let r = Reason::new(&c, "m");
    assert!(r.is(&c) && !r.is(&Rule::HarnessError));
}

#[test]
fn harness_codes_map_to_their_rules_with_the_sequence() {
    let a = AttemptRecord::default();
    assert_eq!(
        codes(
            &a,
            &[
                harness(1, "no_mock"),
                harness(2, "lease_expired"),
                harness(3, "attempt_ended"),
                harness(4, "store_error"),
            ]
        ),
        [
            "harness_error",
            "lease_expired",
            "attempt_ended",
            "store_failure"
        ]
    );
    let v = judge(&a, &[call(1, "ok"), harness(2, "attempt_ended")], &[], &[]);
    assert_eq!(v.reasons[0].sequence, Some(2));
    assert_eq!(v.word(), "fail");
}

#[test]
fn the_records_marks_fail_the_attempt() {
    let calls = [call(1, "ok")];
    let base = AttemptRecord::default();
    assert!(codes(&base, &calls).is_empty());
    let a = AttemptRecord {
        store_failures: 1,
        ..base.clone()
    };
    assert_eq!(codes(&a, &calls), ["store_failure"]);
    let a = AttemptRecord {
        outside_calls: 2,
        outside: vec!["GET /x: no token".into()],
        ..base.clone()
    };
    let v = judge(&a, &calls, &[], &[]);
    assert_eq!(v.reasons[0].code, "outside_attempt");
    assert!(v.reasons[0].message.contains("GET /x: no token"));
    let a = AttemptRecord {
        interrupted: true,
        ..base.clone()
    };
    assert_eq!(codes(&a, &calls), ["interrupted"]);
    // No call, no event: `no_calls` unless not expected.
    assert_eq!(codes(&base, &[]), ["no_calls"]);
    let a = AttemptRecord {
        expect_calls: false,
        ..base
    };
    assert!(codes(&a, &[]).is_empty());
}

#[test]
fn a_call_stamped_after_the_end_fails_whatever_its_status() {
    let a = AttemptRecord {
        ended_at: Some("2026-01-01T10:05:00Z".into()),
        ..AttemptRecord::default()
    };
    // At the end instant: inside.
    assert!(codes(&a, &[call(1, "ok")]).is_empty());
    let late = ToolEvent {
        timestamp: "2026-01-01T10:05:00.001Z".into(),
        ..call(2, "ok")
    };
    assert_eq!(codes(&a, &[call(1, "ok"), late]), ["attempt_ended"]);
}

#[test]
fn an_agent_event_alone_is_something_that_happened() {
    let a = AttemptRecord::default();
    let e = AgentEvent {
        sequence: 1,
        name: "said".into(),
        kind: crate::records::AgentEventKind::AgentMessage,
        test_run_id: None,
        text: None,
        data: None,
        timestamp: "2026-01-01T10:05:00Z".into(),
    };
    assert!(judge(&a, &[], &[e], &[]).passed());
}

#[test]
fn the_fold_reports_one_gap_and_repeats() {
    let a = AttemptRecord::default();
    assert_eq!(
        codes(&a, &[call(1, "ok"), call(3, "ok"), call(5, "ok")]),
        ["missing_evidence"]
    );
    assert_eq!(
        codes(&a, &[call(1, "ok"), call(1, "ok")]),
        ["missing_evidence"]
    );
    assert_eq!(codes(&a, &[call(2, "ok")]), ["missing_evidence"]);
    assert!(codes(&a, &[call(2, "ok"), call(1, "ok")]).is_empty());
}

#[test]
fn a_verdict_is_read_back_from_an_envelope_and_a_missing_one_is_an_error() {
    let v = Verdict {
        reasons: vec![Reason::at(&Rule::NoCalls, 3, "m")],
    };
    let env = json!({"verdict": v.word(), "verdict_reasons": v.reasons});
    assert_eq!(Verdict::from_envelope(&env).unwrap(), v);
    assert!(Verdict::from_envelope(&json!({})).is_err());
    assert!(Verdict::from_envelope(&json!({"verdict": "maybe"})).is_err());
    assert!(Verdict::from_envelope(&json!({"verdict": true})).is_err());
    assert!(Verdict::from_envelope(&json!({"verdict": "pass", "verdict_reasons": ["x"]})).is_err());
    let old = Verdict::from_envelope(&json!({"verdict": "fail", "verdict_reasons": ["x"]}));
    assert_eq!(old.unwrap().reasons[0].code, "unknown");
    assert!(Verdict::from_envelope(&json!({"verdict": "pass"}))
        .unwrap()
        .passed());
}

#[test]
fn verification_fails_whenever_the_verdict_fails() {
    let failing = Verdict {
        reasons: vec![Reason::new(&Rule::HarnessError, "m")],
    };
    let (passed, answer) = verification("a1", &[], &failing);
    assert!(!passed);
    assert_eq!(answer["passed"], false);
    assert_eq!(answer["verdict"], "fail");
    assert_eq!(answer["verdict_reasons"][0]["code"], "harness_error");
    let (passed, answer) = verification("a1", &[], &Verdict::default());
    assert!(passed);
    assert_eq!(answer["verdict"], "pass");
}

/// Each rule's title is its own (the JUnit report names a test case by it): killed the
/// cargo-mutants survivors `Rule::title -> ""` and `-> "xyzzy"`.
#[test]
fn every_attempt_rule_has_its_own_title() {
    let titles: std::collections::BTreeSet<&str> =
        Rule::ATTEMPT_RULES.iter().map(Rule::title).collect();
    assert_eq!(titles.len(), Rule::ATTEMPT_RULES.len(), "{titles:?}");
    assert!(titles.iter().all(|t| t.len() > 10), "{titles:?}");
    assert_eq!(
        Rule::NoCalls.title(),
        "the agent made at least one tool call or agent-side event"
    );
    assert_eq!(
        Rule::Contract {
            id: "c".into(),
            check: "x".into()
        }
        .title(),
        "every check of the blocking contract passed"
    );
}

/// `Reason::at` keeps the rule's code, the message and the sequence: killed the cargo-mutants
/// survivor `Reason::at -> Default::default()`.
#[test]
fn a_reason_at_a_sequence_names_its_rule_and_sequence() {
    let r = Reason::at(&Rule::NoCalls, 7, "m");
    assert_eq!(
        r,
        Reason {
            code: "no_calls".into(),
            message: "m".into(),
            sequence: Some(7),
        }
    );
}

/// A generation judged and rolled out: its summary carries each code once with its count
/// and first reason; the next generation is judged from `through + 1` (no missing
/// evidence), and the findings that rolled out fail the verdict first, with their sequence.
#[test]
fn what_rolled_out_still_fails_the_verdict_and_the_rest_is_judged_after_it() {
    let a = AttemptRecord::default();
    let mut j = Judge::new(&a);
    for c in [
        call(1, "ok"),
        harness(2, "no_mock"),
        harness(3, "no_mock"),
        harness(4, "store_error"),
    ] {
        j.call(&c);
    }
    j.expect_last(4);
    let r = j.roll_over(4);
    assert_eq!((r.through, r.rolls, r.calls, r.events), (4, 1, 4, 0));
    assert_eq!(r.findings.len(), 2, "{r:?}");
    assert_eq!(r.findings["harness_error"].count, 2);
    assert_eq!(r.findings["harness_error"].first_sequence, Some(2));
    assert_eq!(r.findings["store_failure"].count, 1);

    let rolled = AttemptRecord {
        rolled_over: Some(r),
        ..AttemptRecord::default()
    };
    assert_eq!(rolled.rolled_through(), 4);
    // Nothing kept: still judged, not `no_calls`, not `missing_evidence`.
    let v = judge(&rolled, &[], &[], &[]);
    let got: Vec<_> = v.reasons.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(got, ["harness_error", "store_failure"], "{v:?}");
    assert_eq!(v.reasons[0].sequence, Some(2));
    assert!(v.reasons[0].message.contains("rolled out"), "{v:?}");
    // Entries after the roll are judged from 5; an entry that rolled out is ignored.
    let v = judge(
        &rolled,
        &[call(1, "ok"), call(5, "ok"), harness(6, "no_mock")],
        &[],
        &[],
    );
    let got: Vec<_> = v
        .reasons
        .iter()
        .map(|r| (r.code.as_str(), r.sequence))
        .collect();
    assert_eq!(
        got,
        [
            ("harness_error", Some(2)),
            ("store_failure", Some(4)),
            ("harness_error", Some(6))
        ]
    );
    // A gap after the roll is still missing evidence.
    let v = judge(&rolled, &[call(6, "ok")], &[], &[]);
    assert!(
        v.reasons.iter().any(|r| r.code == "missing_evidence"),
        "{v:?}"
    );
}

/// A second roll adds its counts to the first's and keeps the first reason of each code;
/// a clean generation rolls out without findings, and the attempt still passes.
#[test]
fn rolls_accumulate_and_a_clean_generation_passes() {
    let a = AttemptRecord::default();
    let mut j = Judge::new(&a);
    j.call(&call(1, "ok"));
    j.call(&call(2, "ok"));
    let clean = j.roll_over(2);
    assert!(clean.findings.is_empty());
    let a = AttemptRecord {
        rolled_over: Some(clean),
        ..AttemptRecord::default()
    };
    assert!(judge(&a, &[], &[], &[]).passed(), "a clean roll passes");
    assert!(judge(&a, &[call(3, "ok")], &[], &[]).passed());

    let mut j = Judge::new(&a);
    j.call(&harness(3, "no_mock"));
    j.event(&AgentEvent {
        sequence: 4,
        name: "said".into(),
        kind: crate::records::AgentEventKind::AgentMessage,
        test_run_id: None,
        text: None,
        data: None,
        timestamp: "2026-01-01T10:05:00Z".into(),
    });
    let one = j.roll_over(4);
    assert_eq!((one.rolls, one.calls, one.events), (2, 3, 1));
    let a = AttemptRecord {
        rolled_over: Some(one),
        ..AttemptRecord::default()
    };
    let mut j = Judge::new(&a);
    j.call(&harness(5, "no_mock"));
    let two = j.roll_over(5);
    assert_eq!(two.findings["harness_error"].count, 2);
    assert_eq!(two.findings["harness_error"].first_sequence, Some(3));
    assert_eq!(two.through, 5);
    // A summary never moves back: rolling "through" an older sequence keeps the newer.
    let b = AttemptRecord {
        rolled_over: Some(two.clone()),
        ..AttemptRecord::default()
    };
    assert_eq!(Judge::new(&b).roll_over(1).through, 5);
    // The judge of the summary fails, first, with the count in its message.
    let v = judge(&b, &[], &[], &[]);
    assert_eq!(v.reasons.len(), 1);
    assert!(v.reasons[0].message.contains("2 finding(s)"), "{v:?}");
    assert_eq!(v.reasons[0].sequence, Some(3));
}

/// A reason the fold found outside its per-code counter (an `expires_at` that is not a
/// time, found when the judge is made) is counted once, not as often as the other codes.
#[test]
fn a_reason_found_before_the_timeline_rolls_over_counted_once() {
    let a = AttemptRecord {
        expires_at: Some("not a time".into()),
        ..AttemptRecord::default()
    };
    let mut j = Judge::new(&a);
    j.call(&harness(1, "no_mock"));
    j.call(&harness(2, "no_mock"));
    j.expect_last(2);
    let r = j.roll_over(2);
    assert_eq!(r.findings["lease_expired"].count, 1, "{r:?}");
    assert_eq!(r.findings["harness_error"].count, 2, "{r:?}");
}

/// What rolled out counts as something that happened, calls and agent-side events alike:
/// one of each rolled out, nothing kept, still a pass (not `no_calls`).
#[test]
fn rolled_out_calls_and_events_together_are_not_no_calls() {
    let a = AttemptRecord {
        rolled_over: Some(RolledOver {
            through: 2,
            rolls: 1,
            calls: 1,
            events: 1,
            findings: Default::default(),
        }),
        ..AttemptRecord::default()
    };
    assert!(judge(&a, &[], &[], &[]).passed());
}

/// A verification adds the reasons of the contracts it was given to the attempt's verdict —
/// a failed blocking contract fails an attempt whose own verdict passed — and lists a reason
/// the verdict already holds (a pinned contract given again) once. Kills the cargo-mutants
/// survivor `delete ! in verification` (which dropped every new reason and kept repeats).
#[test]
fn verification_adds_each_contract_reason_once() {
    let failed = ContractResult {
        contract_id: "book_after_lookup".into(),
        contract_hash: "h".into(),
        policy_version: None,
        risk: Risk::Blocking,
        status: Status::Failed,
        checks: vec![crate::evidence::verify::CheckResult {
            id: "order[in_order]".into(),
            status: Status::Failed,
            evidence: "book at sequence 3 before lookup".into(),
        }],
    };
    let results = [failed];
    let (passed, answer) = verification("a1", &results, &Verdict::default());
    assert!(!passed, "{answer}");
    assert_eq!(answer["verdict"], "fail");
    let reasons = answer["verdict_reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{answer}");
    assert!(reasons[0]["code"]
        .as_str()
        .unwrap()
        .contains("book_after_lookup"));
    // The attempt's verdict already fails for the same contract: one reason, not two.
    let pinned = Verdict {
        reasons: contract_reasons(&results),
    };
    let (passed, answer) = verification("a1", &results, &pinned);
    assert!(!passed);
    assert_eq!(
        answer["verdict_reasons"].as_array().unwrap().len(),
        1,
        "{answer}"
    );
}
