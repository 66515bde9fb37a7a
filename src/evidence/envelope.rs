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
//! | `rolled_over` | the default attempt only, once entries rolled out of the store at its retention bound: `{"through","rolls","calls","events","findings":{code:{"count","first_sequence"?,"first_message"}}}` |
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

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::verdict::{self, Reason, Verdict};
use super::verify::{self, ContractResult};
use crate::records::{
    AgentEvent, AttemptEvidence, AttemptRecord, EventSource, EvidenceEntry, FaultRecord,
    ResultStatus, RolledOver, ToolEvent,
};

/// The `schema_version` of the exported envelope.
pub const SCHEMA_VERSION: &str = "understudy.evidence.v1";
/// What a redacted value becomes.
pub const REDACTED: &str = "[redacted]";

/// The evidence envelope of one attempt (docs/src/reference/evidence-envelope.md), as every
/// reader receives it. The members are written in this order, the verdict last: a stream
/// that breaks off never carries a verdict ([`super::stream`]). Reads are tolerant: members
/// missing in envelopes of earlier versions take their defaults (the schema, generated from
/// these types, is closed: it describes what this version writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Envelope {
    #[serde(flatten)]
    pub head: Head,
    /// Every call, in sequence order (of the page, with `?after=&limit=`).
    #[serde(default)]
    pub tool_events: Vec<ToolEvent>,
    /// Agent-side events (docs/src/reference/events.md), in sequence order.
    #[serde(default)]
    pub events: Vec<ExportedEvent>,
    /// Calls with `result_status: "input_error"`.
    #[serde(default)]
    pub tool_input_errors: Vec<InputError>,
    /// Calls with `result_status: "harness_error"`.
    #[serde(default)]
    pub harness_errors: Vec<HarnessError>,
    /// Writes held back or tagged as test traffic.
    #[serde(default)]
    pub blocked_side_effects: Vec<BlockedSideEffect>,
    /// One per contract the attempt pinned, evaluated over its whole evidence.
    #[serde(default)]
    pub contract_results: Vec<ContractResult>,
    /// Why the verdict is `fail` (empty when it passes), over the whole evidence.
    #[serde(default)]
    pub verdict_reasons: Vec<Reason>,
    /// With `?after=SEQ&limit=N`: which part of the timeline the lists above hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<Page>,
    /// Written by `understudy test` into its `evidence.json`: how the command ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_run: Option<Value>,
    /// `pass` or `fail`, always the last member.
    pub verdict: VerdictWord,
}

/// The members of the envelope before the timeline (they do not grow with it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Head {
    /// `understudy.evidence.v1`.
    pub schema_version: String,
    pub attempt_id: String,
    #[serde(default)]
    pub test_run_id: Option<String>,
    /// RFC 3339.
    #[serde(default)]
    pub started_at: String,
    /// RFC 3339; null while the attempt is open.
    #[serde(default)]
    pub ended_at: Option<String>,
    /// `"<integration>/<operation_id>"` → the pinned revision.
    #[serde(default)]
    pub pins: BTreeMap<String, PinOut>,
    /// Pinned tool-call contracts: id → hash.
    #[serde(default)]
    pub contracts: BTreeMap<String, ContractPin>,
    /// Integration → state: the end snapshot once ended, else the live state (redacted).
    #[serde(default)]
    pub final_state: BTreeMap<String, Map<String, Value>>,
    /// `{"status","remaining_state_keys"}` once the attempt ended.
    #[serde(default)]
    pub cleanup: Option<Value>,
    /// Calls answered 500 `store_error` (the attempt's durable counter).
    #[serde(default)]
    pub store_failures: u64,
    /// Calls that missed an exclusive attempt.
    #[serde(default)]
    pub outside_attempt: OutsideAttempt,
    /// The attempt's last sequence when the envelope was read: the timeline is 1..this
    /// (`rolled_over.through + 1`..this once entries rolled out).
    #[serde(default)]
    pub last_sequence: u64,
    /// The default attempt's entries that rolled out of the store at its retention bound,
    /// summarized: what the verdict found in them, per code (they still fail it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_over: Option<RolledOver>,
}

/// A pinned revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PinOut {
    pub revision: u64,
    pub contract_hash: String,
}

/// A pinned contract's hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ContractPin {
    pub contract_hash: String,
}

/// `{"calls": n, "listed": [...]}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct OutsideAttempt {
    #[serde(default)]
    pub calls: u64,
    /// The first ones, one line each.
    #[serde(default)]
    pub listed: Vec<String>,
}

/// An agent-side event as exported: `data` redacted like arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExportedEvent {
    pub sequence: u64,
    pub name: String,
    /// `agent_message`, `caller_message`, `checkpoint`, `final_state` (others kept as read).
    pub kind: String,
    #[serde(default)]
    pub test_run_id: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub data: Option<Value>,
    /// RFC 3339, when understudy received it.
    pub timestamp: String,
}

/// A call answered as an input error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct InputError {
    pub sequence: u64,
    pub integration: String,
    pub operation_id: Option<String>,
    pub arguments: Value,
    pub error: Value,
}

/// A call answered as a harness error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HarnessError {
    pub sequence: u64,
    pub integration: String,
    pub operation_id: Option<String>,
    pub code: Value,
    pub message: Value,
    pub path: Value,
}

/// What happened to a side effect: held back, simulated, or tagged as test traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SideEffectAction {
    Blocked,
    Simulated,
    Tagged,
}

/// A write held back (`blocked`, `simulated`) or tagged as test traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct BlockedSideEffect {
    pub sequence: u64,
    pub integration: String,
    pub operation_id: Option<String>,
    pub is_write: bool,
    pub arguments: Value,
    pub http_status: u16,
    pub action: SideEffectAction,
    /// A write held back by an `after_effect: false` fault says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultRecord>,
}

/// Which part of the timeline a page holds: entries with `after < sequence`, at most `limit`
/// of them; `next_after` is the `after` of the next page (null: this is the last one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Page {
    pub after: u64,
    pub limit: u64,
    pub next_after: Option<u64>,
}

/// `pass` or `fail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerdictWord {
    Pass,
    Fail,
}

impl VerdictWord {
    pub fn of(v: &Verdict) -> VerdictWord {
        if v.passed() {
            VerdictWord::Pass
        } else {
            VerdictWord::Fail
        }
    }
}

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

    /// The state the envelope and the contracts read: the end snapshot once the attempt
    /// ended, else the live state.
    pub fn final_state(&self) -> &'a BTreeMap<String, Map<String, Value>> {
        self.attempt.final_state.as_ref().unwrap_or(self.live_state)
    }

    /// Calls and events merged in sequence order (calls first within one sequence).
    pub fn timeline(&self) -> Vec<EvidenceEntry> {
        let mut out: Vec<EvidenceEntry> = self
            .calls
            .iter()
            .cloned()
            .map(EvidenceEntry::Call)
            .chain(self.events.iter().cloned().map(EvidenceEntry::Agent))
            .collect();
        out.sort_by_key(|e| (e.sequence(), matches!(e, EvidenceEntry::Agent(_))));
        out
    }
}

/// The members before the timeline.
pub fn head(
    attempt: &AttemptRecord,
    final_state: &BTreeMap<String, Map<String, Value>>,
    last_sequence: u64,
    redact: &[String],
) -> Head {
    Head {
        schema_version: SCHEMA_VERSION.to_string(),
        attempt_id: attempt.attempt_id.clone(),
        test_run_id: attempt.test_run_id.clone(),
        started_at: attempt.started_at.clone(),
        ended_at: attempt.ended_at.clone(),
        pins: attempt
            .pins
            .iter()
            .map(|(k, p)| {
                (
                    k.clone(),
                    PinOut {
                        revision: p.revision,
                        contract_hash: p.contract_hash.clone(),
                    },
                )
            })
            .collect(),
        contracts: attempt
            .contracts
            .iter()
            .map(|(k, p)| {
                (
                    k.clone(),
                    ContractPin {
                        contract_hash: p.contract_hash.clone(),
                    },
                )
            })
            .collect(),
        final_state: final_state
            .iter()
            .map(|(k, s)| {
                let mut v = Value::Object(s.clone());
                redact_in_place(&mut v, redact);
                let Value::Object(m) = v else { unreachable!() };
                (k.clone(), m)
            })
            .collect(),
        cleanup: attempt.cleanup.clone(),
        store_failures: attempt.store_failures,
        outside_attempt: OutsideAttempt {
            calls: attempt.outside_calls,
            listed: attempt.outside.clone(),
        },
        last_sequence,
        rolled_over: attempt.rolled_over.clone(),
    }
}

/// A call as exported: `arguments`, `result` and `error` redacted.
pub fn exported_call(e: &ToolEvent, redact: &[String]) -> ToolEvent {
    let mut c = e.clone();
    redact_in_place(&mut c.arguments, redact);
    redact_in_place(&mut c.result, redact);
    if let Some(er) = &mut c.error {
        redact_in_place(er, redact);
    }
    c
}

/// The input-error item of a call answered as one.
pub fn input_error(e: &ToolEvent, redact: &[String]) -> Option<InputError> {
    (e.result_status == ResultStatus::InputError).then(|| InputError {
        sequence: e.sequence,
        integration: e.integration.clone(),
        operation_id: e.operation_id.clone(),
        arguments: redacted(&e.arguments, redact),
        error: e
            .error
            .as_ref()
            .map(|v| redacted(v, redact))
            .unwrap_or(Value::Null),
    })
}

/// The harness-error item of a call answered as one.
pub fn harness_error(e: &ToolEvent, redact: &[String]) -> Option<HarnessError> {
    (e.result_status == ResultStatus::HarnessError).then(|| {
        let error = e
            .error
            .as_ref()
            .map(|v| redacted(v, redact))
            .unwrap_or(Value::Null);
        let field = |k: &str| error.get(k).cloned().unwrap_or(Value::Null);
        HarnessError {
            sequence: e.sequence,
            integration: e.integration.clone(),
            operation_id: e.operation_id.clone(),
            code: field("code"),
            message: field("message"),
            path: field("path"),
        }
    })
}

/// The side-effect item of a call held back or tagged.
pub fn blocked_side_effect(e: &ToolEvent, redact: &[String]) -> Option<BlockedSideEffect> {
    side_effect_action(e).map(|action| BlockedSideEffect {
        sequence: e.sequence,
        integration: e.integration.clone(),
        operation_id: e.operation_id.clone(),
        is_write: e.is_write,
        arguments: redacted(&e.arguments, redact),
        http_status: e.http_status,
        action,
        fault: e.fault.clone(),
    })
}

/// An agent-side event as exported: `data` redacted like arguments.
pub fn exported_event(e: &AgentEvent, redact: &[String]) -> ExportedEvent {
    ExportedEvent {
        sequence: e.sequence,
        name: e.name.clone(),
        kind: e.kind.as_str().to_string(),
        test_run_id: e.test_run_id.clone(),
        text: e.text.clone(),
        data: e.data.as_ref().map(|d| redacted(d, redact)),
        timestamp: e.timestamp.clone(),
    }
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
    let mut items: Vec<verify::Item> = inputs.calls.iter().map(|e| call_item(e, redact)).collect();
    items.extend(inputs.events.iter().map(|e| event_item(e, redact)));
    items.sort_by_key(|i| i.sequence());
    evaluator_evidence(inputs.attempt, inputs.final_state(), items, redact)
}

/// The evaluator's view of one call (values redacted).
pub fn call_item(e: &ToolEvent, redact: &[String]) -> verify::Item {
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
}

/// The evaluator's view of one agent-side event (`data` redacted).
pub fn event_item(e: &AgentEvent, redact: &[String]) -> verify::Item {
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
}

/// The evaluator's view of an attempt from its items in sequence order.
pub fn evaluator_evidence(
    attempt: &AttemptRecord,
    final_state: &BTreeMap<String, Map<String, Value>>,
    items: Vec<verify::Item>,
    redact: &[String],
) -> verify::Evidence {
    let has_gap = items
        .iter()
        .enumerate()
        .any(|(i, it)| it.sequence() != i as u64 + 1);
    let cleanup = attempt.cleanup.as_ref();
    let final_state: Map<String, Value> = final_state
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

/// One result per contract `attempt` pinned (in id order), evaluated over `evidence`. A
/// pinned contract this build cannot read is `inconclusive`, never skipped.
pub fn pinned_results(attempt: &AttemptRecord, evidence: &verify::Evidence) -> Vec<ContractResult> {
    attempt
        .contracts
        .iter()
        .map(|(id, pin)| {
            match serde_json::from_value::<verify::ToolCallContract>(pin.contract.clone()) {
                Ok(c) => verify::evaluate(&c, &pin.contract_hash, evidence),
                Err(e) => unreadable_contract(id, &pin.contract_hash, &e.to_string()),
            }
        })
        .collect()
}

/// One result per contract the attempt pinned (in id order), evaluated over its evidence.
/// A pinned contract this build cannot read is `inconclusive`, never skipped.
pub fn contract_results(inputs: &Inputs<'_>) -> Vec<ContractResult> {
    if inputs.attempt.contracts.is_empty() {
        return Vec::new();
    }
    pinned_results(inputs.attempt, &verify_evidence(inputs))
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
fn side_effect_action(e: &ToolEvent) -> Option<SideEffectAction> {
    match e.result_status {
        ResultStatus::Blocked => Some(SideEffectAction::Blocked),
        ResultStatus::Simulated => Some(SideEffectAction::Simulated),
        _ if e.source == EventSource::ToolTest => Some(SideEffectAction::Tagged),
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

pub(crate) fn redact_in_place(v: &mut Value, names: &[String]) {
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
