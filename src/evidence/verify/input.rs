//! What the evaluator reads: the verifier's own small view of one attempt's evidence, so that
//! it depends on nothing else in the crate. An adapter from the store's attempt record,
//! `ToolEvent`s and agent-side events fills it (one field per field; see each doc).
//!
//! The evaluator reads the evidence **as exported**: values already redacted are the string
//! `"[redacted]"`, which is never echoed in a check's evidence and never proves anything.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One attempt's evidence.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Evidence {
    pub attempt_id: String,
    /// The attempt's `test_run_id` (docs/src/reference/evidence-envelope.md).
    pub test_run_id: Option<String>,
    /// The attempt was ended (`ended_at` is set).
    pub ended: bool,
    /// The attempt's cleanup record says `status: verified`.
    pub cleanup_verified: bool,
    /// `remaining_state_keys` of the cleanup record, when there is one.
    pub remaining_keys: Option<u64>,
    /// integration → state object: the end snapshot, or the live state while it runs.
    pub final_state: Option<Value>,
    /// The sequences are not 1..n without gaps or repeats: an event is missing.
    pub has_gap: bool,
    /// The store could not be read: nothing here can be trusted.
    pub unreadable: bool,
    /// Tool calls and agent-side events, sharing one sequence (any order; sorted here).
    pub items: Vec<Item>,
}

/// One entry of the attempt's shared sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item {
    Call(Call),
    Event(AgentEvent),
}

impl Item {
    pub fn sequence(&self) -> u64 {
        match self {
            Item::Call(c) => c.sequence,
            Item::Event(e) => e.sequence,
        }
    }
}

/// One tool call (from a `ToolEvent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub sequence: u64,
    pub integration: String,
    /// `None` for a request that matched no operation.
    pub operation_id: Option<String>,
    /// `ok`, `input_error`, `harness_error`, `blocked`, `simulated`, `forwarded`, `replayed`
    /// (anything else counts as not effective).
    pub result_status: String,
    pub http_status: Option<u16>,
    pub arguments: Value,
    /// The native result (`{"status", "data"}`), as recorded.
    pub result: Value,
    /// `mock`, `upstream` or `tool_test`.
    pub source: String,
    pub is_write: bool,
    pub trace_id: Option<String>,
    pub idempotency_key_ref: Option<String>,
    /// A fault injected after the effect: the call took effect whatever its status says,
    /// and its answer was lost. From an event: [`crate::operation::fault::fault_after_effect`] (true
    /// only for an `ok` event whose `fault` member says `after_effect`).
    #[serde(default)]
    pub fault_after_effect: bool,
}

impl Call {
    /// A mock's read call of `crm/{operation}` with `status` and `http_status`, for tests
    /// (vary the rest with `Call { is_write: true, ..Call::for_test(…) }`).
    #[cfg(test)]
    pub fn for_test(
        sequence: u64,
        operation: &str,
        status: &str,
        http_status: Option<u16>,
    ) -> Call {
        Call {
            sequence,
            integration: "crm".into(),
            operation_id: Some(operation.into()),
            result_status: status.into(),
            http_status,
            arguments: Value::Null,
            result: Value::Null,
            source: "mock".into(),
            is_write: false,
            trace_id: None,
            idempotency_key_ref: None,
            fault_after_effect: false,
        }
    }

    /// `integration/operation_id` (`integration/?` when no operation matched).
    pub fn tool(&self) -> String {
        format!(
            "{}/{}",
            self.integration,
            self.operation_id.as_deref().unwrap_or("?")
        )
    }

    /// Is this call `integration/operation_id`?
    pub fn is(&self, tool: &str) -> bool {
        match (tool.split_once('/'), &self.operation_id) {
            (Some((i, o)), Some(op)) => i == self.integration && o == op,
            _ => false,
        }
    }

    /// Took or pretended to take effect (docs/src/reference/contracts.md): `ok`, `forwarded`, `simulated`, or a fault
    /// after the effect.
    pub fn effective(&self) -> bool {
        self.fault_after_effect
            || matches!(
                self.result_status.as_str(),
                "ok" | "forwarded" | "simulated"
            )
    }

    /// A success the agent may report: `ok` with no HTTP error status (a mock may answer `ok`
    /// with a 409 or a 503 it was told to give), whose answer reached the agent (a fault
    /// after the effect took effect, but the agent never heard of it). A `replayed` repeat
    /// counts: it hands the agent the first call's answer — this only matters when that
    /// first call's answer was lost to a fault (otherwise the `ok` call comes first).
    pub fn succeeded(&self) -> bool {
        matches!(self.result_status.as_str(), "ok" | "replayed")
            && !self.fault_after_effect
            && self.http_status.is_none_or(|s| s < 400)
    }

    /// `sequence 3 (ok)`.
    pub fn label(&self) -> String {
        format!("sequence {} ({})", self.sequence, self.result_status)
    }
}

/// One agent-side event (docs/src/reference/events.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentEvent {
    pub sequence: u64,
    pub name: String,
    /// `agent_message`, `caller_message`, `checkpoint` or `final_state`.
    pub kind: String,
    pub test_run_id: Option<String>,
    pub text: Option<String>,
    #[serde(default)]
    pub data: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_is_ok_or_replayed_below_http_400_and_heard_by_the_agent() {
        let call = |status: &str, http: Option<u16>, after_effect: bool| Call {
            is_write: true,
            fault_after_effect: after_effect,
            ..Call::for_test(1, "book", status, http)
        };
        assert!(call("ok", Some(200), false).succeeded());
        assert!(call("ok", Some(399), false).succeeded());
        assert!(call("ok", None, false).succeeded());
        assert!(call("replayed", Some(201), false).succeeded());
        assert!(!call("ok", Some(400), false).succeeded());
        assert!(!call("ok", Some(503), false).succeeded());
        assert!(!call("ok", Some(200), true).succeeded());
        assert!(!call("input_error", Some(200), false).succeeded());
        assert!(!call("forwarded", Some(200), false).succeeded());
        // Effective is another question: a fault after the effect took effect.
        assert!(call("ok", Some(200), true).effective());
        assert!(call("forwarded", Some(200), false).effective());
        assert!(!call("blocked", Some(200), false).effective());
    }
}
