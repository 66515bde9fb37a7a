//! The file model of a version-1 mock definition (docs/src/reference/mock-definition.md), mirrored with serde.
//! Unknown keys are rejected everywhere (`deny_unknown_fields`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A mock definition as written in the `mock` member of an operation file (version 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "MockDefinition")]
pub struct Definition {
    /// Present in operation files: the contract hash the mock was checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_hash: Option<String>,
    /// Always 1.
    #[schemars(range(min = 1, max = 1))]
    pub schema_version: u32,
    /// The variant answered when no rule of a pinned variant applies; names one of `variants`.
    pub default_variant: String,
    /// The state an attempt starts with (merged across the integration's operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_state: Option<Map<String, Value>>,
    /// Variant name → variant; 1 to 30.
    #[schemars(extend("minProperties" = 1, "maxProperties" = limits::MAX_VARIANTS))]
    pub variants: BTreeMap<String, Variant>,
    /// Inputs with the answer each variant must give; every variant needs one; at most 100.
    #[serde(default)]
    #[schemars(length(max = limits::MAX_EXAMPLES))]
    pub examples: Vec<Example>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// The answer (HTTP profiles: the envelope `{"status", "data", "headers"?}`); may use `$input`, `$state` and expressions.
    pub result: Value,
    /// State members written when this variant answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_state: Option<Map<String, Value>>,
    /// Milliseconds before the answer, at most 30000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = limits::MAX_DELAY_MS))]
    pub delay_ms: Option<u64>,
    /// Tried in order; the first whose `when` all hold answers instead of the variant; at most 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = limits::MAX_RULES))]
    pub rules: Vec<Rule>,
    /// A deliberate failure of the answer (see [`Fault`]); rules without one inherit it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(description = "A deliberate failure of the answer; rules without one inherit it.")]
    pub fault: Option<Fault>,
    /// MCP (docs/src/reference/mcp.md): log and progress notifications sent before the result, data only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(description = "MCP: log and progress notifications sent before the result.")]
    pub notifications: Option<Vec<Value>>,
    /// MCP (docs/src/reference/mcp.md): a request to the client before answering,
    /// `{"method": "elicitation/create" | "sampling/createMessage" | "roots/list", "params": {...},
    /// "key"?: "name"}` (params may use `$input` and `$state`); the answer is then readable as
    /// `$response`. Or a list of such requests, each with a `key` and an optional `round`
    /// (1, 2, …): `$response` is then an object of the answers by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        description = "MCP: a request to the client before answering, `{\"method\": \"elicitation/create\" | \"sampling/createMessage\" | \"roots/list\", \"params\": {...}, \"key\"?: \"name\"}` (params may use `$input` and `$state`); the answer is then readable as `$response`. Or a list of such requests, each with a `key` and an optional `round` (1, 2, …): `$response` is then an object of the answers by key."
    )]
    pub ask_client: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Conditions that must all hold.
    pub when: Vec<Condition>,
    /// The answer when the rule wins (default: the variant's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_state: Option<Map<String, Value>>,
    /// Milliseconds before the answer, at most 30000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = limits::MAX_DELAY_MS))]
    pub delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    /// MCP (docs/src/reference/mcp.md): replaces the variant's `notifications` when this rule wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(description = "MCP: replaces the variant's `notifications` when this rule wins.")]
    pub notifications: Option<Vec<Value>>,
}

/// A deliberate failure of one call's answer (issue 15), written in a variant or a rule:
/// `{"kind": …, "after_effect": true|false, …kind-specific fields}`. Data only: what each
/// kind means on the wire, which fields it takes and their limits are [`crate::operation::fault`]'s
/// (`check` reports every problem with its path). A rule that omits `fault` falls back to
/// its variant's, like `result`, `set_state` and `delay_ms` (docs/src/reference/mock-definition.md#selection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = fault_kind_rules)]
#[schemars(
    description = "A deliberate failure of the answer: its `kind`, whether it happened `after_effect`, and the fields the kind takes (`timeout`: `ms`; `slow_body`: `ms`, `chunks`; `status`: `status`, `headers`; `jsonrpc_error`: `code`, `message`). A rule without `fault` inherits its variant's."
)]
pub struct Fault {
    pub kind: FaultKind,
    /// `true`: the call took effect (`set_state` committed, idempotency key remembered) and
    /// only the answer is lost; `false`: nothing changed. Required: a fault must say which.
    pub after_effect: bool,
    /// `timeout`: how long the answer is held before the connection closes (default 30000);
    /// `slow_body`: the time over which the body dribbles in. At most 30000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = limits::MAX_FAULT_MS))]
    pub ms: Option<u64>,
    /// `slow_body`: in how many chunks (default 10, 2 to 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = limits::MAX_FAULT_CHUNKS))]
    pub chunks: Option<u64>,
    /// `status`: the bare HTTP status (400–599) sent in the profile's native error shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 400, max = 599))]
    pub status: Option<u16>,
    /// `status`: extra response headers, e.g. `{"Retry-After": "2"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("propertyNames" = {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"}))]
    pub headers: Option<BTreeMap<String, String>>,
    /// `jsonrpc_error`: the JSON-RPC error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// `jsonrpc_error`: the JSON-RPC error message (default `fault injected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Which fields each fault kind takes (`ms` and `chunks` for `slow_body`, …), and the ones it
/// needs, in the fault's JSON Schema (the same rule as `crate::fault`'s checks).
fn fault_kind_rules(schema: &mut schemars::Schema) {
    const FIELDS: [&str; 6] = ["ms", "chunks", "status", "headers", "code", "message"];
    let rule = |kinds: &[&str], takes: &[&str], needs: &[&str]| {
        let forbidden: Map<String, Value> = FIELDS
            .iter()
            .filter(|f| !takes.contains(f))
            .map(|f| (f.to_string(), Value::Bool(false)))
            .collect();
        serde_json::json!({
            "if": {"properties": {"kind": {"enum": kinds}}},
            "then": {"properties": forbidden, "required": needs},
        })
    };
    schema.insert(
        "allOf".into(),
        Value::Array(vec![
            rule(
                &["reset", "close", "malformed_body", "stream_cut"],
                &[],
                &[],
            ),
            rule(&["timeout"], &["ms"], &[]),
            rule(&["slow_body"], &["ms", "chunks"], &["ms"]),
            rule(&["status"], &["status", "headers"], &["status"]),
            rule(&["jsonrpc_error"], &["code", "message"], &[]),
        ]),
    );
}

/// The kinds of [`Fault`]. The last two exist only on `mcp` integrations.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[schemars(
    description = "The kind of fault; `jsonrpc_error` and `stream_cut` exist only on `mcp` integrations."
)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Input,
    State,
    /// MCP (docs/src/reference/mcp.md): the client's answer to the variant's `ask_client` request, read from
    /// the input's reserved member [`RESPONSE_MEMBER`].
    #[schemars(description = "MCP: the client's answer to the variant's `ask_client` request.")]
    Response,
}

/// One server-to-client request of a variant's `ask_client` (docs/src/reference/mcp.md), rendered for a call.
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
/// (`ask_client`, docs/src/reference/mcp.md): what `{"$response": path}` and `source: "response"` read.
pub const RESPONSE_MEMBER: &str = "$response";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Eq,
    Ne,
    In,
    Exists,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// What the path reads: the call's input, the attempt's state, or (MCP) the client's answer.
    pub source: Source,
    /// A dot path (`contact.id`, `items.0.sku`).
    pub path: String,
    pub op: Op,
    /// The value compared with (`eq`, `ne`; a list for `in`; none for `exists`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// The variant this example exercises.
    pub variant: String,
    /// A call's input; it must satisfy the input schema.
    pub input: Value,
    /// The result the variant must give for this input (compared after evaluation).
    pub expected: Value,
    /// The state before the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Map<String, Value>>,
}

/// Limits of docs/src/reference/mock-definition.md#checks-and-limits.
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
