//! Operation files (SPEC 2.2): the file model, loading a directory, match templates, and the
//! contract hash (SPEC section 1).

pub mod hash;
pub mod load;
pub mod template;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One operation file, `<operations dir>/<operation_id>.json`, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationFile {
    pub operation_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MCP only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// HTTP profiles only.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_spec: Option<MatchSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<bool>,
    #[serde(default = "empty_schema")]
    pub input_schema: Value,
    #[serde(default = "empty_schema")]
    pub output_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<IdempotencySpec>,
    /// MCP only: as in `tools/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// MCP only (SPEC 5.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_form: Option<ResultForm>,
    /// The version-1 definition, kept raw here so `check` can report its problems with paths;
    /// parsed by [`crate::mock::model::Definition::from_value`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mock: Option<Value>,
}

fn empty_schema() -> Value {
    Value::Object(Default::default())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    pub method: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// Where the idempotency key of a write comes from (SPEC 5.4): exactly one of the two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdempotencySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// Dot path inside the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultForm {
    /// The mock's result is the tool's structured output (default).
    Structured,
    /// The mock's result is the whole CallToolResult, sent as it is.
    CallToolResult,
}

/// `operation_id`: `[a-z0-9_.-]{1,128}`. (Also refuses `.` and `..`, which are not file stems.)
pub fn valid_operation_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-')
        })
}
