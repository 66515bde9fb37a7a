//! The tool-call contract file (docs/src/reference/contracts.md): one serde model for YAML and JSON, unknown keys
//! rejected at every level, and the validation that serde cannot express.
//!
//! Errors are [`Problem`]s naming the file, the key path inside it
//! (`arguments.sources.Contact__c.result_of`, `preconditions.required_before[0]`) and what was
//! expected; parse errors also carry the line and column the parser reported.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::path::VPath;

/// One finding about a contract file (`file: path: message`, the path a key path such as
/// `arguments.sources.Contact__c.result_of`): the crate's one [`Problem`].
pub use crate::error::Problem;

/// `blocking` (the default): a contract that is not `passed` fails the attempt's verdict.
/// `advisory`: reported only.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    #[default]
    Blocking,
    Advisory,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Blocking => "blocking",
            Risk::Advisory => "advisory",
        }
    }
}

/// A tool-call contract file (`<contracts dir>/<id>.yaml|.yml|.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "understudy tool-call contract")]
pub struct ToolCallContract {
    /// The file's JSON Schema, for editors (`understudy schema contract`); ignored.
    #[serde(default, rename = "$schema", skip_serializing)]
    pub schema: Option<String>,
    /// Always 1.
    #[schemars(range(min = 1, max = 1))]
    pub version: u32,
    /// `[a-z0-9_.-]{1,128}`, equal to the file stem.
    #[schemars(regex(pattern = r"^[a-z0-9_.-]{1,128}$"))]
    pub id: String,
    #[serde(default)]
    pub risk: Risk,
    /// Free text, reported with every result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<String>,
    /// `<integration>/<operation_id>` the contract is about.
    #[schemars(regex(pattern = TOOL_PATTERN))]
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Arguments>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Calls>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Order>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<SideEffects>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Expected>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<Cleanup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<EvidenceRules>,
    /// The agent's own account (its OpenTelemetry spans) against what arrived
    /// (docs/src/guides/traces.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_trace: Option<AgentTrace>,
}

/// `agent_trace`: checks of the agent's spans (recorded as `otel.*` agent-side events)
/// against the calls that reached understudy. Each check is on when `true`; with no agent
/// span for the attempt they are inconclusive.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentTrace {
    /// Every tool call in the agent's spans reached understudy (name, arguments, order).
    #[serde(default)]
    pub reported_calls_arrived: bool,
    /// Every call that reached understudy is in the agent's spans.
    #[serde(default)]
    pub arrived_calls_reported: bool,
    /// No tool-result span or final message states success after a call that failed, was
    /// blocked, faulted or never arrived.
    #[serde(default)]
    pub claims_match_results: bool,
    /// Every tool the agent's spans name is a tool of the project (or in `local_tools`).
    #[serde(default)]
    pub no_unknown_tools: bool,
    /// Tools the agent runs itself, never through understudy: left out of every check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_tools: Vec<String>,
    /// Regular expressions (case-insensitive) of a final message that states success; the
    /// default list when empty (booked, confirmed, scheduled, created, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub success_claims: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Preconditions {
    /// Each needs an effective call earlier than the first effective call of `tool`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = TOOL_PATTERN)))]
    pub required_before: Vec<String>,
    /// None of these may have an effective call earlier.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = TOOL_PATTERN)))]
    pub forbidden_before: Vec<String>,
    /// Agent-side events (docs/src/reference/events.md) that must come earlier.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(description = "Agent-side events that must come earlier.")]
    #[schemars(inner(length(min = 1)))]
    pub events_before: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, Source>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, ValueRule>,
}

/// Where an argument's value must have come from: exactly one of `result_of` / `event`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [{"required": ["result_of"]}, {"required": ["event"]}]))]
pub struct Source {
    /// `<integration>/<operation_id>` whose result the value came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = TOOL_PATTERN))]
    pub result_of: Option<String>,
    /// An agent-side event whose `data` the value came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub event: Option<String>,
    /// Into the call's result, or the event's `data`; `*` allowed.
    pub path: String,
}

/// At least one of `pattern`, `equals`, `one_of`; every one given must hold.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1))]
pub struct ValueRule {
    /// A regular expression the value (a string) must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub one_of: Option<Vec<Value>>,
}

/// `exactly_once`, or `min` and/or `max` (effective calls of `tool`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    {"required": ["exactly_once"], "not": {"anyOf": [{"required": ["min"]}, {"required": ["max"]}]}},
    {"anyOf": [{"required": ["min"]}, {"required": ["max"]}], "not": {"required": ["exactly_once"]}},
]))]
pub struct Calls {
    /// `true`: exactly one effective call (`false` says nothing and is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("const" = true))]
    pub exactly_once: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OrderMode {
    Exact,
    InOrder,
    Unordered,
    Subset,
    Superset,
}

impl OrderMode {
    pub fn as_str(self) -> &'static str {
        match self {
            OrderMode::Exact => "exact",
            OrderMode::InOrder => "in_order",
            OrderMode::Unordered => "unordered",
            OrderMode::Subset => "subset",
            OrderMode::Superset => "superset",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Order {
    pub mode: OrderMode,
    /// `integration/operation_id`, or `integration/*` for any operation of the integration.
    #[schemars(length(min = 1), inner(regex(pattern = TOOL_PATTERN)))]
    pub tools: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SideEffects {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_upstream_writes: Option<bool>,
    /// Integration → most effective writes allowed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = {"pattern": "^[^/]+$"}))]
    pub max_writes: BTreeMap<String, u64>,
    /// Tools that must have no effective call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = TOOL_PATTERN)))]
    pub forbidden: Vec<String>,
}

/// About the last effective call of `tool` (the last call when none was effective).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = RESULT_STATUSES))]
    pub result_status: Option<String>,
    /// The HTTP statuses (100–599) the call may have answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), inner(range(min = 100, max = 599)))]
    pub http_status: Option<Vec<u16>>,
    /// Dot path into the result → JSON value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub result: BTreeMap<String, Value>,
    /// Dot path into the final state (`crm.booked`) → JSON value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub final_state: BTreeMap<String, Value>,
    /// Agent-side events that may only come after the call succeeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(min = 1)))]
    pub after_success_only: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cleanup {
    #[serde(default)]
    pub required: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Correlation {
    TestRunId,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id_required: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation: Option<Correlation>,
}

/// `<integration>/<operation_id>`: both parts non-empty (what [`split_tool`] accepts).
const TOOL_PATTERN: &str = "^[^/]+/.+$";

/// Every `result_status` of docs/src/reference/evidence-envelope.md.
pub const RESULT_STATUSES: [&str; 7] = [
    "ok",
    "input_error",
    "harness_error",
    "blocked",
    "simulated",
    "forwarded",
    "replayed",
];

/// Parses and validates one contract file. `file_name` decides the format (`.json` → JSON,
/// anything else → YAML) and the stem the `id` must equal.
pub fn parse(file_name: &str, text: &str) -> Result<ToolCallContract, Vec<Problem>> {
    let is_json = Path::new(file_name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if text.len() > MAX_CONTRACT_BYTES {
        return Err(vec![Problem::new(
            file_name,
            "",
            format!(
                "the file is {} bytes: a contract file may be at most {MAX_CONTRACT_BYTES} bytes (1 MiB)",
                text.len()
            ),
        )]);
    }
    if !is_json {
        if let Some((line, what)) = yaml_alias(text) {
            return Err(vec![Problem::new(
                file_name,
                "",
                format!("line {line}: YAML {what} are refused in contract files (an alias can expand a small file into a huge value): write the value out"),
            )]);
        }
    }
    let parsed: Result<ToolCallContract, (String, String)> = if is_json {
        let mut de = serde_json::Deserializer::from_str(text);
        match serde_path_to_error::deserialize(&mut de) {
            Err(e) => Err((path_text(e.path()), e.into_inner().to_string())),
            // Trailing characters after the document.
            Ok(c) => de
                .end()
                .map(|()| c)
                .map_err(|e| (String::new(), e.to_string())),
        }
    } else {
        let de = yaml_serde::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = path_text(e.path());
            let msg = e.into_inner().to_string();
            // The YAML error already starts with the path it knows; say it once.
            let msg = match msg.strip_prefix(&format!("{path}: ")) {
                Some(rest) => rest.to_string(),
                None => msg,
            };
            (path, msg)
        })
    };
    let contract = parsed.map_err(|(path, msg)| vec![Problem::new(file_name, path, msg)])?;
    let problems = validate(&contract, file_name);
    if problems.is_empty() {
        Ok(contract)
    } else {
        Err(problems)
    }
}

/// The largest contract file read.
pub const MAX_CONTRACT_BYTES: usize = 1 << 20;

/// The first YAML anchor (`&name`) or alias (`*name`) outside quotes and comments: its line
/// (1-based) and what it is.
fn yaml_alias(text: &str) -> Option<(usize, &'static str)> {
    for (n, line) in text.lines().enumerate() {
        let b = line.as_bytes();
        // `prev` starts as a space: the line's start counts as one.
        let (mut quote, mut prev) = (0u8, b' ');
        for (i, &c) in b.iter().enumerate() {
            if quote != 0 {
                if c == quote {
                    quote = 0;
                }
                continue;
            }
            match c {
                b'#' if prev == b' ' => break,
                b'"' | b'\'' if matches!(prev, b' ' | b':' | b'[' | b'{' | b',' | b'-') => {
                    quote = c
                }
                b'&' | b'*'
                    if b.get(i + 1)
                        .is_some_and(|x| x.is_ascii_alphanumeric() || *x == b'_') =>
                {
                    // Only at the start of a node: what precedes it, after any blanks (a tab
                    // too), is an indicator or nothing.
                    let before = line[..i].trim_end();
                    if before.is_empty() || before.ends_with([':', '-', '[', '{', ',']) {
                        return Some((n + 1, if c == b'&' { "anchors" } else { "aliases" }));
                    }
                }
                _ => {}
            }
            prev = c;
        }
    }
    None
}

fn path_text(p: &serde_path_to_error::Path) -> String {
    let s = p.to_string();
    if s == "." {
        String::new()
    } else {
        s
    }
}

fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-'))
}

/// `integration/operation_id`: both parts non-empty (the operation id may itself hold `/`).
pub fn split_tool(tool: &str) -> Option<(&str, &str)> {
    let (i, o) = tool.split_once('/')?;
    (!i.is_empty() && !o.is_empty()).then_some((i, o))
}

/// The rules serde cannot express. Empty when the contract is valid.
pub fn validate(c: &ToolCallContract, file: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut p = |path: String, msg: String| out.push(Problem::new(file, path, msg));

    if c.version != 1 {
        p("version".into(), format!("expected 1, found {}", c.version));
    }
    if !valid_id(&c.id) {
        p(
            "id".into(),
            format!("`{}` does not match [a-z0-9_.-]{{1,128}}", c.id),
        );
    }
    let stem = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    if c.id != stem {
        p(
            "id".into(),
            format!("`{}` must equal the file stem `{stem}`", c.id),
        );
    }
    let tool_name = |p: &mut dyn FnMut(String, String), path: String, t: &str| {
        if split_tool(t).is_none() {
            p(
                path,
                format!("expected `<integration>/<operation_id>`, found `{t}`"),
            );
        }
    };
    tool_name(&mut p, "tool".into(), &c.tool);
    if let Some(t) = &c.agent_trace {
        for (i, pat) in t.success_claims.iter().enumerate() {
            if let Err(e) = regex::Regex::new(pat) {
                p(
                    format!("agent_trace.success_claims[{i}]"),
                    format!("not a regular expression: {e}"),
                );
            }
        }
    }
    let path_ok = |p: &mut dyn FnMut(String, String), at: String, text: &str, wildcard: bool| {
        if let Err(e) = VPath::parse(text, wildcard) {
            p(at, e);
        }
    };

    if let Some(pre) = &c.preconditions {
        for (key, list) in [
            ("required_before", &pre.required_before),
            ("forbidden_before", &pre.forbidden_before),
        ] {
            for (i, t) in list.iter().enumerate() {
                tool_name(&mut p, format!("preconditions.{key}[{i}]"), t);
            }
        }
        for (i, e) in pre.events_before.iter().enumerate() {
            if e.is_empty() {
                p(
                    format!("preconditions.events_before[{i}]"),
                    "an event name cannot be empty".into(),
                );
            }
        }
    }
    if let Some(a) = &c.arguments {
        for (key, list) in [("required", &a.required), ("forbidden", &a.forbidden)] {
            for (i, t) in list.iter().enumerate() {
                path_ok(&mut p, format!("arguments.{key}[{i}]"), t, false);
            }
        }
        for (arg, s) in &a.sources {
            let at = format!("arguments.sources.{arg}");
            path_ok(&mut p, at.clone(), arg, false);
            match (&s.result_of, &s.event) {
                (Some(t), None) => tool_name(&mut p, format!("{at}.result_of"), t),
                (None, Some(e)) if e.is_empty() => p(
                    format!("{at}.event"),
                    "an event name cannot be empty".into(),
                ),
                (None, Some(_)) => {}
                _ => p(
                    at.clone(),
                    "expected exactly one of `result_of` and `event`".into(),
                ),
            }
            path_ok(&mut p, format!("{at}.path"), &s.path, true);
        }
        for (arg, v) in &a.values {
            let at = format!("arguments.values.{arg}");
            path_ok(&mut p, at.clone(), arg, false);
            if v.pattern.is_none() && v.equals.is_none() && v.one_of.is_none() {
                p(
                    at.clone(),
                    "expected at least one of `pattern`, `equals`, `one_of`".into(),
                );
            }
            if let Some(pat) = &v.pattern {
                if let Err(e) = regex::Regex::new(pat) {
                    p(
                        format!("{at}.pattern"),
                        format!("does not compile: {}", one_line(&e.to_string())),
                    );
                }
            }
            if v.one_of.as_ref().is_some_and(Vec::is_empty) {
                p(format!("{at}.one_of"), "expected at least one value".into());
            }
        }
    }
    if let Some(calls) = &c.calls {
        match (calls.exactly_once, calls.min, calls.max) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => p(
                "calls".into(),
                "`exactly_once` excludes `min` and `max`".into(),
            ),
            (None, None, None) => p(
                "calls".into(),
                "expected `exactly_once`, or `min` and/or `max`".into(),
            ),
            (Some(false), None, None) => p(
                "calls.exactly_once".into(),
                "`exactly_once: false` says nothing; use `min`/`max` or leave `calls` out".into(),
            ),
            (None, Some(lo), Some(hi)) if lo > hi => p(
                "calls".into(),
                format!("`min` ({lo}) is greater than `max` ({hi})"),
            ),
            _ => {}
        }
    }
    if let Some(o) = &c.order {
        if o.tools.is_empty() {
            p("order.tools".into(), "expected at least one tool".into());
        }
        for (i, t) in o.tools.iter().enumerate() {
            tool_name(&mut p, format!("order.tools[{i}]"), t);
        }
    }
    if let Some(s) = &c.side_effects {
        for (i, t) in s.forbidden.iter().enumerate() {
            tool_name(&mut p, format!("side_effects.forbidden[{i}]"), t);
        }
        for k in s.max_writes.keys() {
            if k.is_empty() || k.contains('/') {
                p(
                    format!("side_effects.max_writes.{k}"),
                    "expected an integration name".into(),
                );
            }
        }
    }
    if let Some(e) = &c.expected {
        if let Some(s) = &e.result_status {
            if !RESULT_STATUSES.contains(&s.as_str()) {
                p(
                    "expected.result_status".into(),
                    format!(
                        "expected one of {}, found `{s}`",
                        RESULT_STATUSES.join(", ")
                    ),
                );
            }
        }
        if e.http_status.as_ref().is_some_and(Vec::is_empty) {
            p(
                "expected.http_status".into(),
                "expected at least one status".into(),
            );
        }
        for (i, s) in e.http_status.iter().flatten().enumerate() {
            if !(100..=599).contains(s) {
                p(
                    format!("expected.http_status[{i}]"),
                    format!("expected an HTTP status 100-599, found {s}"),
                );
            }
        }
        for k in e.result.keys() {
            path_ok(&mut p, format!("expected.result.{k}"), k, false);
        }
        for k in e.final_state.keys() {
            path_ok(&mut p, format!("expected.final_state.{k}"), k, false);
        }
        for (i, ev) in e.after_success_only.iter().enumerate() {
            if ev.is_empty() {
                p(
                    format!("expected.after_success_only[{i}]"),
                    "an event name cannot be empty".into(),
                );
            }
        }
    }
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `sha256:` + lowercase hex SHA-256 of the RFC 8785 canonical JSON of the contract as
/// parsed (defaults filled in: `risk`), so the same contract written in YAML or JSON, with
/// other key order, comments or spacing, has one hash.
pub fn contract_hash(c: &ToolCallContract) -> String {
    let v = serde_json::to_value(c).expect("a contract always serializes");
    json_hash(&v)
}

/// The same hash over any JSON value (a contract already in JSON form).
pub fn json_hash(v: &Value) -> String {
    let canonical = serde_jcs::to_string(v).expect("serde_json values always canonicalize");
    let digest = Sha256::digest(canonical.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest.iter() {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests_support {
    /// The example of docs/src/reference/contracts.md, verbatim but for comments.
    pub(crate) const SPEC_YAML: &str = r#"
version: 1
id: book_appointment_contract        # [a-z0-9_.-]{1,128}; equals the file stem
risk: blocking
policy_version: booking_v3
tool: crm/book_appointment
preconditions:
  required_before: [crm/lookup_contact_by_phone]
  forbidden_before: [crm/delete_contact]
  events_before: [caller_confirmed]
arguments:
  required: [Contact__c, Requested_Date__c]
  forbidden: [Phone, payment.card_number]
  sources:
    Contact__c: { result_of: crm/lookup_contact_by_phone, path: "data.records.*.Id" }
    Requested_Date__c: { event: caller_asked_for_date, path: "date" }
  values:
    Requested_Date__c: { pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" }
calls:
  exactly_once: true
order:
  mode: in_order
  tools: [crm/lookup_contact_by_phone, crm/book_appointment]
side_effects:
  no_upstream_writes: true
  max_writes: { crm: 1 }
  forbidden: [crm/delete_contact]
expected:
  result_status: ok
  http_status: [201]
  result: { data.success: true }
  final_state: { crm.booked: true }
  after_success_only: [told_caller_booked]
cleanup:
  required: true
evidence:
  trace_id_required: true
  correlation: test_run_id
"#;
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
