//! The backend side of MCP beyond tools (docs/src/reference/mcp.md): which operations of an `mcp` integration
//! are resources or prompts (their input schema carries the metadata of
//! [`crate::operation::mcp_files`]), and the [`Catalog`] the endpoint serves from them.
//! Reads and gets run as ordinary calls of the pipeline under the resource's or prompt's
//! name (operation id), so they are pinned, evaluated and recorded like tool calls.

use crate::app::Integration;
use crate::operation::mcp_files::{PROMPT_KEY, RESOURCE_KEY};
use crate::operation::Operation;
use crate::profile::mcp::catalog::Catalog;

/// Whether `op` is a tool (not a resource or prompt file).
pub fn is_tool(op: &Operation) -> bool {
    let s = &op.op.input_schema;
    s.get(RESOURCE_KEY).is_none() && s.get(PROMPT_KEY).is_none()
}

/// The resources and prompts of an integration, in file-name order.
pub fn catalog(integ: &Integration) -> Catalog {
    let mut c = Catalog::default();
    for op in &integ.operations {
        let s = &op.op.input_schema;
        if let Some(r) = s
            .get(RESOURCE_KEY)
            .and_then(|m| serde_json::from_value(m.clone()).ok())
        {
            c.resources.push(r);
        } else if let Some(p) = s
            .get(PROMPT_KEY)
            .and_then(|m| serde_json::from_value(m.clone()).ok())
        {
            c.prompts.push(p);
        }
    }
    c
}

/// The `notifications` a decided call's variant (or winning rule, when it declares its own)
/// lists in the operation file's mock: data only, sent as written (docs/src/reference/mcp.md;
/// `crate::profile::mcp::notify`). Read from the file's definition, which is the pinned one
/// unless the file changed after the attempt started (then the file's list is used).
pub fn declared_notifications(
    op: &Operation,
    variant: Option<&str>,
    rule: Option<usize>,
) -> Vec<serde_json::Value> {
    let Some(mock) = op.op.mock.as_ref().map(|m| m.value()) else {
        return Vec::new();
    };
    let variant = variant
        .or_else(|| mock.get("default_variant").and_then(|v| v.as_str()))
        .unwrap_or_default();
    let v = &mock["variants"][variant];
    let from_rule = rule.and_then(|r| v["rules"][r].get("notifications"));
    from_rule
        .or_else(|| v.get("notifications"))
        .and_then(|n| n.as_array())
        .cloned()
        .unwrap_or_default()
}

/// The state paths an operation's mock reads: every `{"$state": path}` and every condition
/// with `source: "state"`, in any variant or rule (docs/src/reference/mcp.md: a resource is updated when a call
/// changes state it reads). Unparsable paths are skipped (`check` reports them).
pub fn state_paths(op: &Operation) -> Vec<crate::mock::path::DotPath> {
    fn walk(v: &serde_json::Value, out: &mut Vec<crate::mock::path::DotPath>) {
        match v {
            serde_json::Value::Object(m) => {
                let path = match (m.get("$state"), m.get("source"), m.get("path")) {
                    (Some(serde_json::Value::String(p)), _, _) if m.len() == 1 => Some(p),
                    (_, Some(s), Some(serde_json::Value::String(p))) if s == "state" => Some(p),
                    _ => None,
                };
                if let Some(p) = path.and_then(|p| crate::mock::path::DotPath::parse(p).ok()) {
                    out.push(p);
                }
                m.values().for_each(|v| walk(v, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(mock) = op.op.mock.as_ref() {
        walk(mock.value(), &mut out);
    }
    out
}

/// Whether `before` and `after` differ at any of `paths` (a path missing on one side only
/// counts as a change).
pub fn state_differs(
    paths: &[crate::mock::path::DotPath],
    before: &serde_json::Map<String, serde_json::Value>,
    after: &serde_json::Map<String, serde_json::Value>,
) -> bool {
    paths
        .iter()
        .any(|p| p.resolve_in(before).ok() != p.resolve_in(after).ok())
}
