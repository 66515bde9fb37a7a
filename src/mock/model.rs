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
    /// A deliberate failure of the answer (see [`Fault`]); rules without one inherit it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    /// MCP (SPEC 18): log and progress notifications sent before the result, data only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<Vec<Value>>,
    /// MCP (SPEC 18): a request to the client before answering,
    /// `{"method": "elicitation/create" | "sampling/createMessage" | "roots/list", "params": {...},
    /// "key"?: "name"}` (params may use `$input` and `$state`); the answer is then readable as
    /// `$response`. Or a list of such requests, each with a `key` and an optional `round`
    /// (1, 2, …): `$response` is then an object of the answers by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_client: Option<Value>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    /// MCP (SPEC 18): replaces the variant's `notifications` when this rule wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<Vec<Value>>,
}

/// A deliberate failure of one call's answer (issue 15), written in a variant or a rule:
/// `{"kind": …, "after_effect": true|false, …kind-specific fields}`. Data only: what each
/// kind means on the wire, which fields it takes and their limits are [`crate::operation::fault`]'s
/// (`check` reports every problem with its path). A rule that omits `fault` falls back to
/// its variant's, like `result`, `set_state` and `delay_ms` (SPEC 3.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    pub kind: FaultKind,
    /// `true`: the call took effect (`set_state` committed, idempotency key remembered) and
    /// only the answer is lost; `false`: nothing changed. Required: a fault must say which.
    pub after_effect: bool,
    /// `timeout`: how long the answer is held before the connection closes (default 30000);
    /// `slow_body`: the time over which the body dribbles in. At most 30000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
    /// `slow_body`: in how many chunks (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<u64>,
    /// `status`: the bare HTTP status (400–599) sent in the profile's native error shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// `status`: extra response headers, e.g. `{"Retry-After": "2"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// `jsonrpc_error`: the JSON-RPC error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// `jsonrpc_error`: the JSON-RPC error message (default `fault injected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The kinds of [`Fault`]. The last two exist only on `mcp` integrations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A TCP reset (h2: `RST_STREAM`) instead of an answer.
    Reset,
    /// The connection closes with no response.
    Close,
    /// The answer is held until the client gives up (at most `ms`), then the connection closes.
    Timeout,
    /// The body dribbles in `chunks` over `ms`.
    SlowBody,
    /// The declared content type with a truncated body.
    MalformedBody,
    /// A bare status (e.g. 503 with `Retry-After`) in the native error shape.
    Status,
    /// MCP: a JSON-RPC error instead of the result.
    JsonrpcError,
    /// MCP: an SSE stream that ends before the result.
    StreamCut,
}

impl FaultKind {
    pub const ALL: [FaultKind; 8] = [
        FaultKind::Reset,
        FaultKind::Close,
        FaultKind::Timeout,
        FaultKind::SlowBody,
        FaultKind::MalformedBody,
        FaultKind::Status,
        FaultKind::JsonrpcError,
        FaultKind::StreamCut,
    ];

    /// The word as written (`slow_body`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Reset => "reset",
            FaultKind::Close => "close",
            FaultKind::Timeout => "timeout",
            FaultKind::SlowBody => "slow_body",
            FaultKind::MalformedBody => "malformed_body",
            FaultKind::Status => "status",
            FaultKind::JsonrpcError => "jsonrpc_error",
            FaultKind::StreamCut => "stream_cut",
        }
    }

    /// Only meaningful on an `mcp` integration.
    pub fn mcp_only(self) -> bool {
        matches!(self, FaultKind::JsonrpcError | FaultKind::StreamCut)
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Input,
    State,
    /// MCP (SPEC 18): the client's answer to the variant's `ask_client` request, read from
    /// the input's reserved member [`RESPONSE_MEMBER`].
    Response,
}

/// One server-to-client request of a variant's `ask_client` (SPEC 18), rendered for a call.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientRequest {
    /// The request's key: the `inputRequests` key in 2026-07-28 and, for the list form, the
    /// member of `$response` that holds its answer.
    pub key: String,
    /// Requests of a later round are asked once every earlier one is answered.
    pub round: u64,
    pub method: String,
    pub params: Value,
}

/// What a variant's `ask_client` asks, in asking order (by round, then as declared).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientRequests {
    /// The single form (one object): `$response` is its answer. The list form: `$response`
    /// is an object of the answers by key.
    pub single: bool,
    pub requests: Vec<ClientRequest>,
}

/// The key of a single-form `ask_client` that names none.
pub const DEFAULT_ASK_KEY: &str = "ask";

/// The input member that carries the client's answer to a server-to-client request
/// (`ask_client`, SPEC 18): what `{"$response": path}` and `source: "response"` read.
pub const RESPONSE_MEMBER: &str = "$response";

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
    /// A fault's `ms` (`timeout`, `slow_body`): the delay limit.
    pub const MAX_FAULT_MS: u64 = MAX_DELAY_MS;
    /// `slow_body` chunks.
    pub const MAX_FAULT_CHUNKS: u64 = 1000;
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
