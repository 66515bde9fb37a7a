//! The serde types the data dir keeps (SPEC 6, 8, 12): revisions, attempts and their pins,
//! and the one [`ToolEvent`] recorded per call. The store encodes them as JSON and knows
//! nothing else about them; the evidence module reads them to build the envelope and verdict.
//!
//! Field names are the SPEC's: they are the stored form and the exported form at once, so a
//! rename here is a format change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An immutable, numbered copy of a mock definition (SPEC 1, 12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionRecord {
    pub revision: u64,
    pub contract_hash: String,
    /// `sha256:` + hex SHA-256 of the RFC 8785 canonical JSON of `definition`.
    pub definition_hash: String,
    pub definition: Value,
    /// RFC 3339.
    pub saved_at: String,
    /// `file`, `api` or `record`.
    pub source: String,
}

/// The revision an attempt pinned for one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub revision: u64,
    pub contract_hash: String,
}

/// One attempt (SPEC 6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Must not contain a NUL character.
    pub attempt_id: String,
    /// Lowercase hex SHA-256 of the capability token.
    pub token_hash: String,
    /// Hex, 32 bytes: the HMAC key of idempotency key refs.
    pub secret: String,
    pub test_run_id: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub expires_at: Option<String>,
    /// `"<integration>/<operation_id>"` → pin.
    pub pins: BTreeMap<String, Pin>,
    pub variants: BTreeMap<String, String>,
    pub is_default: bool,
    /// `{"status":"verified","remaining_state_keys":0}` once cleanup ran.
    pub cleanup: Option<Value>,
}

/// One call as the attempt saw it. One record per call, whatever its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolEvent {
    /// 1, 2, 3… per attempt; assigned by the store.
    pub sequence: u64,
    pub execution_attempt_id: String,
    pub integration: String,
    pub operation_id: Option<String>,
    pub revision: Option<u64>,
    pub variant: Option<String>,
    pub rule: Option<usize>,
    pub is_write: bool,
    pub arguments: Value,
    pub result: Value,
    /// `ok`, `input_error`, `harness_error`, `blocked`, `simulated`, `forwarded`, `replayed`.
    pub result_status: String,
    pub http_status: u16,
    pub latency_ms: f64,
    pub delay_ms: u64,
    pub idempotency_key_ref: Option<String>,
    pub trace_id: Option<String>,
    /// `mock`, `upstream` or `tool_test`.
    pub source: String,
    /// `{"code","message","path"}` for input and harness errors.
    pub error: Option<Value>,
    /// RFC 3339.
    pub timestamp: String,
}
