//! The envelope rule (a mock's result as the profile's native answer): HTTP profiles take
//! `{"status": 100..=599, "data"?: any, "headers"?: {name: string}}` and no other member; MCP
//! takes a structured object or, with `"result_form": "call_tool_result"`, a CallToolResult.
//! Shared by `check`, the call core and rendering ([`super::render_envelope`]).

use serde_json::Value;

use crate::contract::{ProfileKind, ResultForm};
use crate::util::json::type_name;

pub const ENVELOPE_EXPECTED: &str =
    "expected the native envelope {\"status\": 100-599, \"data\"?: any, \"headers\"?: {name: string}} and no other member";
pub const CALL_TOOL_RESULT_EXPECTED: &str =
    "expected a CallToolResult {\"content\": [blocks], \"structuredContent\"?: {…}, \"isError\"?: bool}";

pub fn status_problem(s: &Value) -> Option<String> {
    match s.as_u64() {
        Some(n) if (100..=599).contains(&n) => None,
        _ => Some(format!(
            "has `status` {s}, expected an integer from 100 to 599"
        )),
    }
}

/// The profile's envelope rule for a rendered result (docs/src/reference/mock-definition.md#the-envelope-rule), or why it fails
/// (a phrase such as "has no `status`, expected the native envelope …").
/// HTTP profiles: `{"status": 100..=599, "data"?: any, "headers"?: {string: string}}` and no
/// other member. MCP structured: an object. MCP `call_tool_result`: an object with a
/// `content` array of blocks with a string `type`, optional `structuredContent` object,
/// optional boolean `isError`, optional `_meta`.
pub fn envelope_problem(
    profile: ProfileKind,
    result_form: Option<ResultForm>,
    result: &Value,
) -> Option<String> {
    match (profile.is_http(), result_form.unwrap_or(ResultForm::Structured)) {
        (true, _) => {
            let Some(m) = result.as_object() else {
                return Some(format!("is {}, {ENVELOPE_EXPECTED}", type_name(result)));
            };
            if let Some(k) = m.keys().find(|k| !matches!(k.as_str(), "status" | "data" | "headers")) {
                return Some(format!("has the member `{k}`, {ENVELOPE_EXPECTED} (a bare response body is not an envelope)"));
            }
            match m.get("status") {
                None => return Some(format!("has no `status`, {ENVELOPE_EXPECTED}")),
                Some(s) => {
                    if let Some(p) = status_problem(s) {
                        return Some(p);
                    }
                }
            }
            match m.get("headers") {
                None => None,
                Some(Value::Object(h)) => h
                    .iter()
                    .find(|(_, v)| !v.is_string())
                    .map(|(k, v)| format!("has header `{k}` {}, expected a string", type_name(v))),
                Some(h) => Some(format!("has `headers` {}, expected an object of strings", type_name(h))),
            }
        }
        (false, ResultForm::Structured) => (!result.is_object()).then(|| {
            format!(
                "is {}, expected an object (MCP structured content is a JSON object; use \"result_form\": \"call_tool_result\" for other results)",
                type_name(result)
            )
        }),
        (false, ResultForm::CallToolResult) => {
            let Some(m) = result.as_object() else {
                return Some(format!("is {}, {CALL_TOOL_RESULT_EXPECTED}", type_name(result)));
            };
            if let Some(k) = m
                .keys()
                .find(|k| !matches!(k.as_str(), "content" | "structuredContent" | "isError" | "_meta"))
            {
                return Some(format!("has the member `{k}`, {CALL_TOOL_RESULT_EXPECTED}"));
            }
            let Some(content) = m.get("content").and_then(Value::as_array) else {
                return Some(format!("has no `content` array, {CALL_TOOL_RESULT_EXPECTED}"));
            };
            if let Some(i) = content
                .iter()
                .position(|b| !b.get("type").is_some_and(Value::is_string))
            {
                return Some(format!(
                    "has content block {i} without a string `type` (text, image, audio, resource, resource_link)"
                ));
            }
            if m.get("isError").is_some_and(|e| !e.is_boolean()) {
                return Some("has a non-boolean `isError`".to_string());
            }
            if m.get("structuredContent").is_some_and(|s| !s.is_object()) {
                return Some("has a `structuredContent` that is not an object".to_string());
            }
            None
        }
    }
}
