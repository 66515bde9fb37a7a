//! The file model of a version-1 mock definition (SPEC section 3), mirrored with serde.
//! Unknown keys are rejected everywhere (`deny_unknown_fields`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A mock definition as written in the `mock` member of an operation file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    /// Present in operation files: the contract hash the mock was checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_hash: Option<String>,
    pub schema_version: u32,
    pub default_variant: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_state: Option<Map<String, Value>>,
    pub variants: BTreeMap<String, Variant>,
    #[serde(default)]
    pub examples: Vec<Example>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub result: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_state: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// MCP (SPEC 18): log and progress notifications sent before the result, data only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<Vec<Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub when: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_state: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// MCP (SPEC 18): replaces the variant's `notifications` when this rule wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<Vec<Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Input,
    State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Eq,
    Ne,
    In,
    Exists,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    pub source: Source,
    pub path: String,
    pub op: Op,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub variant: String,
    pub input: Value,
    pub expected: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Map<String, Value>>,
}

/// Limits of SPEC 3.4.
pub mod limits {
    pub const MAX_BYTES: usize = 100 * 1000;
    pub const MAX_VARIANTS: usize = 30;
    pub const MAX_RULES: usize = 100;
    pub const MAX_EXAMPLES: usize = 100;
    pub const MAX_DELAY_MS: u64 = 30_000;
    pub const MAX_DATE_DAYS: i64 = 3660;
    pub const MAX_DATE_HOURS: i64 = 24;
}

impl Definition {
    /// Parse from JSON, with the JSON path of the first problem in the error message
    /// (e.g. `variants.found.rules[0].when[0].op: unknown variant `gt`…`).
    pub fn from_value(v: &Value) -> Result<Definition, String> {
        serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            if path == "." || path.is_empty() {
                e.inner().to_string()
            } else {
                format!("{}: {}", path, e.inner())
            }
        })
    }
}
