//! The exported evidence envelope of one attempt (the [`ToolEvent`]s recorded for every
//! call, its agent-side events, state and contract results), with the verdict of
//! [`super::verdict`], and redaction.
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
//! | `store_failures` | calls answered 500 `store_error` (the attempt's durable counter) |
//! | `outside_attempt` | `{"calls": n, "listed": [...]}`: calls that missed an exclusive attempt |
//! | `verdict_reasons` | `[{"code","message","sequence"?}]` ([`super::verdict`]) |
//! | `verdict` | `pass` or `fail` |
//!
//! # Redaction
//!
//! The export replaces the value of every object member whose name is in the redaction list
//! (compared ASCII case-insensitively, at any depth) with `"[redacted]"` in `arguments`,
//! `result` and `error` of every event (and of the derived lists), and in `final_state`.
//! Stored evidence is never changed.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::verdict::{self, Verdict};
use super::verify::{self, ContractResult};
use crate::records::{
    AgentEvent, AttemptEvidence, AttemptRecord, EventSource, ResultStatus, ToolEvent,
};

/// The `schema_version` of the exported envelope.
pub const SCHEMA_VERSION: &str = "understudy.evidence.v1";
/// What a redacted value becomes.
pub const REDACTED: &str = "[redacted]";
/// Everything an attempt's envelope is built from, as the store holds it.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub attempt: &'a AttemptRecord,
    /// The attempt's tool calls (any order).
    pub calls: &'a [ToolEvent],
    /// The attempt's agent-side events (docs/src/reference/events.md; any order).
    pub events: &'a [AgentEvent],
    /// The live state: the final state while the attempt runs (once it ended, the record's
    /// end snapshot is used instead).
    pub live_state: &'a BTreeMap<String, Map<String, Value>>,
    /// Object members to hide (see the module doc).
    pub redact: &'a [String],
}

impl<'a> Inputs<'a> {
    /// The envelope's inputs of an attempt as the store holds it, with `redact`.
    pub fn of(a: &'a AttemptEvidence, redact: &'a [String]) -> Inputs<'a> {
        Inputs {
            attempt: &a.attempt,
            calls: &a.calls,
            events: &a.events,
            live_state: &a.live_state,
            redact,
        }
    }
}

impl<'a> Inputs<'a> {
    /// The state the envelope and the contracts read: the end snapshot once the attempt
    /// ended, else the live state.
    pub fn final_state(&self) -> &'a BTreeMap<String, Map<String, Value>> {
        self.attempt.final_state.as_ref().unwrap_or(self.live_state)
    }
}

/// The docs/src/reference/evidence-envelope.md envelope of one attempt without agent-side events (see [`envelope_of`]).
pub fn envelope(
    attempt: &AttemptRecord,
    events: &[ToolEvent],
    final_state: &BTreeMap<String, Map<String, Value>>,
    redact: &[String],
) -> Value {
    envelope_of(&Inputs {
        attempt,
        calls: events,
        events: &[],
        live_state: final_state,
        redact,
    })
}

/// The docs/src/reference/evidence-envelope.md envelope of one attempt, with `events`, `contract_results` (one per pinned
/// contract, evaluated now), `verdict_reasons` and `verdict`.
pub fn envelope_of(inputs: &Inputs<'_>) -> Value {
    let attempt = inputs.attempt;
    let redact = inputs.redact;
    let mut sorted: Vec<&ToolEvent> = inputs.calls.iter().collect();
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
            let mut b = json!({
                "sequence": e.sequence,
                "integration": e.integration,
                "operation_id": e.operation_id,
                "is_write": e.is_write,
                "arguments": r(&e.arguments),
                "http_status": e.http_status,
                "action": action,
            });
            // A write held back by an `after_effect: false` fault says so.
            if let Some(f) = &e.fault {
                b["fault"] = serde_json::to_value(f).unwrap_or(Value::Null);
            }
            blocked.push(b);
        }
    }
    let mut agent: Vec<&AgentEvent> = inputs.events.iter().collect();
    agent.sort_by_key(|e| e.sequence);
    let events: Vec<Value> = agent.iter().map(|e| exported_event(e, redact)).collect();

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
    let contract_pins: Map<String, Value> = attempt
        .contracts
        .iter()
        .map(|(k, p)| (k.clone(), json!({ "contract_hash": p.contract_hash })))
        .collect();
    let final_state: Map<String, Value> = inputs
        .final_state()
        .iter()
        .map(|(k, s)| (k.clone(), r(&Value::Object(s.clone()))))
        .collect();
    let results = contract_results(inputs);
    let verdict = verdict_of(inputs, &results);

    json!({
        "schema_version": SCHEMA_VERSION,
        "attempt_id": attempt.attempt_id,
        "test_run_id": attempt.test_run_id,
        "started_at": attempt.started_at,
        "ended_at": attempt.ended_at,
        "pins": pins,
        "contracts": contract_pins,
        "tool_events": tool_events,
        "events": events,
        "tool_input_errors": input_errors,
        "harness_errors": harness_errors,
        "blocked_side_effects": blocked,
        "final_state": final_state,
        "cleanup": attempt.cleanup,
        "store_failures": attempt.store_failures,
        "outside_attempt": { "calls": attempt.outside_calls, "listed": attempt.outside },
        "contract_results": results,
        "verdict_reasons": verdict.reasons,
        "verdict": verdict.word(),
    })
}

/// An agent-side event as exported: `data` redacted like arguments.
fn exported_event(e: &AgentEvent, redact: &[String]) -> Value {
    json!({
        "sequence": e.sequence,
        "name": e.name,
        "kind": e.kind.as_str(),
        "test_run_id": e.test_run_id,
        "text": e.text,
        "data": e.data.as_ref().map(|d| redacted(d, redact)),
        "timestamp": e.timestamp,
    })
}

/// The one verdict of the attempt ([`verdict::judge`]) over its calls, agent-side events,
/// its record's marks and the contract results.
pub fn verdict_of(inputs: &Inputs<'_>, results: &[ContractResult]) -> Verdict {
    verdict::judge(inputs.attempt, inputs.calls, inputs.events, results)
}

/// The evaluator's view of the attempt ([`verify::Evidence`]): the one adapter from the
/// records to `verify`. Values are redacted as in the export, so a redacted value never
/// proves anything and is never echoed.
pub fn verify_evidence(inputs: &Inputs<'_>) -> verify::Evidence {
    let redact = inputs.redact;
    let attempt = inputs.attempt;
    let mut items: Vec<verify::Item> = inputs
        .calls
        .iter()
        .map(|e| {
            verify::Item::Call(verify::Call {
                sequence: e.sequence,
                integration: e.integration.clone(),
                operation_id: e.operation_id.clone(),
                result_status: e.result_status.as_str().to_string(),
                http_status: Some(e.http_status),
                arguments: redacted(&e.arguments, redact),
                result: redacted(&e.result, redact),
                source: e.source.as_str().to_string(),
                is_write: e.is_write,
                trace_id: e.trace_id.clone(),
                idempotency_key_ref: e.idempotency_key_ref.clone(),
                fault_after_effect: crate::operation::fault::fault_after_effect(
                    &e.result_status,
                    e.fault.as_ref(),
                ),
            })
        })
        .collect();
    items.extend(inputs.events.iter().map(|e| {
        verify::Item::Event(verify::AgentEvent {
            sequence: e.sequence,
            name: e.name.clone(),
            kind: e.kind.as_str().to_string(),
            test_run_id: e.test_run_id.clone(),
            text: e.text.clone(),
            data: e
                .data
                .as_ref()
                .map(|d| redacted(d, redact))
                .unwrap_or(Value::Null),
        })
    }));
    items.sort_by_key(|i| i.sequence());
    let has_gap = items
        .iter()
        .enumerate()
        .any(|(i, it)| it.sequence() != i as u64 + 1);
    let cleanup = attempt.cleanup.as_ref();
    let final_state: Map<String, Value> = inputs
        .final_state()
        .iter()
        .map(|(k, s)| (k.clone(), redacted(&Value::Object(s.clone()), redact)))
        .collect();
    verify::Evidence {
        attempt_id: attempt.attempt_id.clone(),
        test_run_id: attempt.test_run_id.clone(),
        ended: attempt.ended_at.is_some(),
        cleanup_verified: cleanup
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            == Some("verified"),
        remaining_keys: cleanup
            .and_then(|c| c.get("remaining_state_keys"))
            .and_then(Value::as_u64),
        final_state: Some(Value::Object(final_state)),
        has_gap,
        unreadable: false,
        items,
    }
}

/// One result per contract the attempt pinned (in id order), evaluated over its evidence.
/// A pinned contract this build cannot read is `inconclusive`, never skipped.
pub fn contract_results(inputs: &Inputs<'_>) -> Vec<ContractResult> {
    if inputs.attempt.contracts.is_empty() {
        return Vec::new();
    }
    let evidence = verify_evidence(inputs);
    inputs
        .attempt
        .contracts
        .iter()
        .map(|(id, pin)| {
            match serde_json::from_value::<verify::ToolCallContract>(pin.contract.clone()) {
                Ok(c) => verify::evaluate(&c, &pin.contract_hash, &evidence),
                Err(e) => unreadable_contract(id, &pin.contract_hash, &e.to_string()),
            }
        })
        .collect()
}

/// Evaluates contracts given by the caller (`understudy verify --contract`, `POST
/// /attempts/{id}/verify`) over the attempt's evidence: `(contract, hash)` pairs.
pub fn evaluate_contracts(
    inputs: &Inputs<'_>,
    contracts: &[(verify::ToolCallContract, String)],
) -> Vec<ContractResult> {
    let evidence = verify_evidence(inputs);
    contracts
        .iter()
        .map(|(c, h)| verify::evaluate(c, h, &evidence))
        .collect()
}

fn unreadable_contract(id: &str, hash: &str, why: &str) -> ContractResult {
    ContractResult {
        contract_id: id.to_string(),
        contract_hash: hash.to_string(),
        policy_version: None,
        risk: verify::Risk::Blocking,
        status: verify::Status::Inconclusive,
        checks: vec![verify::CheckResult {
            id: "contract".into(),
            status: verify::Status::Inconclusive,
            evidence: format!("the pinned contract cannot be read by this version: {why}"),
        }],
    }
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
#[path = "envelope_tests.rs"]
mod tests;
