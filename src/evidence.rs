//! Evidence (SPEC section 8): the exported envelope of the [`ToolEvent`]s recorded for every
//! call (the type lives in [`crate::records`]), the verdict and redaction, and the
//! `understudy evidence` command.
//!
//! The store keeps exactly one [`ToolEvent`] per call, whatever its outcome. Everything else
//! in the envelope is derived here, at export time:
//!
//! | envelope member | content |
//! |---|---|
//! | `tool_events` | every call, in sequence order |
//! | `tool_input_errors` | calls with `result_status: "input_error"`: `{sequence, integration, operation_id, arguments, error}` |
//! | `harness_errors` | calls with `result_status: "harness_error"`: `{sequence, integration, operation_id, code, message, path}` |
//! | `blocked_side_effects` | calls with `result_status` `blocked` or `simulated`, or `source: "tool_test"`: `{sequence, integration, operation_id, is_write, arguments, http_status, action}` where `action` is `blocked`, `simulated` or `tagged` |
//! | `final_state` | integration → state object |
//! | `verdict` | `pass` or `fail` (below) |
//!
//! # Verdict
//!
//! The verdict reads no clock: the same evidence always gives the same verdict. It is `fail`
//! when any of these holds ([`verdict_reasons`] says which), else `pass`:
//!
//! 1. **harness error** — any call with `result_status: "harness_error"` (SPEC 5.3). A call
//!    after the lease expired is recorded by the server as the harness error
//!    `lease_expired`, so it fails here.
//! 2. **call after the lease** — defensively, any call whose `timestamp` is later than the
//!    attempt's `expires_at`, even if it was not recorded as `lease_expired`. An attempt
//!    merely *ended* (DELETE) after its lease, with every call inside it, passes: ending late
//!    is the harness's cleanup, not the agent's behaviour. A timestamp that cannot be read
//!    while a lease is set makes the check inconclusive, which fails.
//! 3. **cleanup not verified** — the attempt has a `cleanup` record whose `status` is not
//!    `verified` or whose `remaining_state_keys` is not 0.
//! 4. **duplicate side effect** — two write calls with the same `idempotency_key_ref` that
//!    both took effect (`result_status` `ok` or `forwarded`). An idempotent repeat is
//!    recorded as `replayed` and does not count.
//! 5. **missing evidence** — the sequences are not exactly 1, 2, … n (a gap, a duplicate or a
//!    wrong start means an event is missing or was redelivered).
//! 6. **unknown result status** — a `result_status` outside SPEC 8's list (for example
//!    `pending`): the outcome of that call is unknown, so the run cannot pass.
//!
//! Input errors alone never fail the attempt (SPEC 5.2).
//!
//! # Redaction
//!
//! The export replaces the value of every object member whose name is in the redaction list
//! (compared ASCII case-insensitively, at any depth) with `"[redacted]"` in `arguments`,
//! `result` and `error` of every event (and of the derived lists), and in `final_state`.
//! Stored evidence is never changed.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Map, Value};

use crate::records::{AttemptRecord, EventSource, ResultStatus, ToolEvent};

/// The `schema_version` of the exported envelope.
pub const SCHEMA_VERSION: &str = "understudy.evidence.v1";
/// What a redacted value becomes.
pub const REDACTED: &str = "[redacted]";
/// The SPEC 8 envelope of one attempt, with its verdict. `redact` names the object members
/// to hide (see the module doc).
pub fn envelope(
    attempt: &AttemptRecord,
    events: &[ToolEvent],
    final_state: &BTreeMap<String, Map<String, Value>>,
    redact: &[String],
) -> Value {
    let mut sorted: Vec<&ToolEvent> = events.iter().collect();
    sorted.sort_by_key(|e| e.sequence);
    let r = |v: &Value| redacted(v, redact);

    let mut tool_events = Vec::with_capacity(sorted.len());
    let mut input_errors = Vec::new();
    let mut harness_errors = Vec::new();
    let mut blocked = Vec::new();
    for e in &sorted {
        let mut ev = serde_json::to_value(e).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut ev {
            for field in ["arguments", "result", "error"] {
                if let Some(v) = m.get_mut(field) {
                    redact_in_place(v, redact);
                }
            }
        }
        tool_events.push(ev);
        let error = e.error.as_ref().map(r).unwrap_or(Value::Null);
        match e.result_status {
            ResultStatus::InputError => input_errors.push(json!({
                "sequence": e.sequence,
                "integration": e.integration,
                "operation_id": e.operation_id,
                "arguments": r(&e.arguments),
                "error": error,
            })),
            ResultStatus::HarnessError => harness_errors.push(json!({
                "sequence": e.sequence,
                "integration": e.integration,
                "operation_id": e.operation_id,
                "code": error.get("code").cloned().unwrap_or(Value::Null),
                "message": error.get("message").cloned().unwrap_or(Value::Null),
                "path": error.get("path").cloned().unwrap_or(Value::Null),
            })),
            _ => {}
        }
        if let Some(action) = side_effect_action(e) {
            blocked.push(json!({
                "sequence": e.sequence,
                "integration": e.integration,
                "operation_id": e.operation_id,
                "is_write": e.is_write,
                "arguments": r(&e.arguments),
                "http_status": e.http_status,
                "action": action,
            }));
        }
    }

    let pins: Map<String, Value> = attempt
        .pins
        .iter()
        .map(|(k, p)| {
            (
                k.clone(),
                json!({ "revision": p.revision, "contract_hash": p.contract_hash }),
            )
        })
        .collect();
    let final_state: Map<String, Value> = final_state
        .iter()
        .map(|(k, s)| (k.clone(), r(&Value::Object(s.clone()))))
        .collect();

    json!({
        "schema_version": SCHEMA_VERSION,
        "attempt_id": attempt.attempt_id,
        "test_run_id": attempt.test_run_id,
        "started_at": attempt.started_at,
        "ended_at": attempt.ended_at,
        "pins": pins,
        "tool_events": tool_events,
        "tool_input_errors": input_errors,
        "harness_errors": harness_errors,
        "blocked_side_effects": blocked,
        "final_state": final_state,
        "verdict": verdict(attempt, events),
    })
}

/// `blocked`, `simulated` or `tagged` when the call is a side effect that was held back or
/// marked as test traffic.
fn side_effect_action(e: &ToolEvent) -> Option<&'static str> {
    match e.result_status {
        ResultStatus::Blocked => Some("blocked"),
        ResultStatus::Simulated => Some("simulated"),
        _ if e.source == EventSource::ToolTest => Some("tagged"),
        _ => None,
    }
}

/// `"pass"` or `"fail"` (rules in the module doc).
pub fn verdict(attempt: &AttemptRecord, events: &[ToolEvent]) -> &'static str {
    if verdict_reasons(attempt, events).is_empty() {
        "pass"
    } else {
        "fail"
    }
}

/// Why the verdict is `fail`, one line per finding; empty when it passes.
pub fn verdict_reasons(attempt: &AttemptRecord, events: &[ToolEvent]) -> Vec<String> {
    let mut reasons = Vec::new();
    let mut sorted: Vec<&ToolEvent> = events.iter().collect();
    sorted.sort_by_key(|e| e.sequence);

    // 1. harness errors, 6. unknown statuses
    for e in &sorted {
        if e.result_status == ResultStatus::HarnessError {
            let field = |k: &str| {
                e.error
                    .as_ref()
                    .and_then(|v| v.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string()
            };
            reasons.push(format!(
                "harness error at sequence {}: {}: {}",
                e.sequence,
                field("code"),
                field("message")
            ));
        } else if let ResultStatus::Unknown(status) = &e.result_status {
            reasons.push(format!(
                "unknown result_status `{status}` at sequence {}: the outcome of that call is unknown",
                e.sequence
            ));
        }
    }

    // 2. calls after the lease
    if let Some(expires) = &attempt.expires_at {
        match parse_time(expires) {
            None => reasons.push(format!(
                "lease check inconclusive: expires_at `{expires}` is not an RFC 3339 time"
            )),
            Some(exp) => {
                for e in &sorted {
                    match parse_time(&e.timestamp) {
                        Some(t) if t > exp && e.result_status != ResultStatus::HarnessError => {
                            reasons.push(format!(
                                "call at sequence {} ({}) arrived after the lease expired at {}",
                                e.sequence, e.timestamp, expires
                            ))
                        }
                        Some(_) => {}
                        None => reasons.push(format!(
                            "lease check inconclusive: timestamp `{}` of sequence {} is not an RFC 3339 time",
                            e.timestamp, e.sequence
                        )),
                    }
                }
            }
        }
    }

    // 3. cleanup
    if let Some(cleanup) = &attempt.cleanup {
        let status = cleanup.get("status").and_then(Value::as_str);
        let remaining = cleanup.get("remaining_state_keys");
        let remaining_ok = match remaining {
            None => true,
            Some(v) => v.as_u64() == Some(0),
        };
        if status != Some("verified") || !remaining_ok {
            reasons.push(format!(
                "cleanup not verified: status {}, remaining_state_keys {}",
                status.map_or_else(|| "missing".to_string(), |s| format!("`{s}`")),
                remaining.map_or_else(|| "missing".to_string(), Value::to_string)
            ));
        }
    }

    // 4. duplicate side effects
    let mut applied: HashMap<&str, u64> = HashMap::new();
    for e in &sorted {
        let Some(key) = e.idempotency_key_ref.as_deref() else {
            continue;
        };
        if !e.is_write || !matches!(e.result_status, ResultStatus::Ok | ResultStatus::Forwarded) {
            continue;
        }
        if let Some(first) = applied.get(key) {
            reasons.push(format!(
                "duplicate side effect: sequences {first} and {} are both applied writes with idempotency_key_ref {key}",
                e.sequence
            ));
        } else {
            applied.insert(key, e.sequence);
        }
    }

    // 5. contiguous sequences
    for (i, e) in sorted.iter().enumerate() {
        let expected = i as u64 + 1;
        if e.sequence != expected {
            reasons.push(format!(
                "missing evidence: expected sequence {expected}, found {} (sequences must be 1..{} without gaps or repeats)",
                e.sequence,
                sorted.len()
            ));
            break;
        }
    }
    reasons
}

fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(s).ok()
}

/// A copy of `v` where every object member named in `names` (ASCII case-insensitive, any
/// depth) is replaced by `"[redacted]"`.
pub fn redacted(v: &Value, names: &[String]) -> Value {
    let mut v = v.clone();
    redact_in_place(&mut v, names);
    v
}

fn redact_in_place(v: &mut Value, names: &[String]) {
    if names.is_empty() {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if names.iter().any(|n| n.eq_ignore_ascii_case(k)) {
                    *child = Value::String(REDACTED.to_string());
                } else {
                    redact_in_place(child, names);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| redact_in_place(c, names)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Pin;

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
            )]),
            variants: BTreeMap::new(),
            is_default: false,
            cleanup: None,
            faults: BTreeMap::new(),
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

    fn reasons(a: &AttemptRecord, events: &[ToolEvent]) -> Vec<String> {
        let r = verdict_reasons(a, events);
        assert_eq!(
            verdict(a, events),
            if r.is_empty() { "pass" } else { "fail" }
        );
        r
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
        assert_eq!(reasons(&attempt(), &[]), Vec::<String>::new());
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
        a.cleanup = Some(json!({"status": "failed", "remaining_state_keys": 1}));
        assert!(reasons(&a, &[])[0].contains("cleanup not verified"));
        a.cleanup = Some(json!({"status": "verified", "remaining_state_keys": 2}));
        assert_eq!(reasons(&a, &[]).len(), 1);
        a.cleanup = Some(json!({"remaining_state_keys": 0}));
        assert_eq!(reasons(&a, &[]).len(), 1);
        a.cleanup = Some(json!({"status": "verified", "remaining_state_keys": 0}));
        assert!(reasons(&a, &[]).is_empty());
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
        let v =
            json!({"phone": "1", "a": [{"Phone": "2", "x": {"PHONE": {"deep": 1}}}], "keep": "k"});
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
            error: Some(
                json!({"code": "input_error", "message": "phone missing", "path": "phone"}),
            ),
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
}
