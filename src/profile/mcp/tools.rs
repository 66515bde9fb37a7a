//! `tools/list` and `tools/call` content: the advertised tool objects, opaque pagination
//! cursors, rendering a [`ToolCallOutcome`] into a CallToolResult or a JSON-RPC error, the
//! write rule, and the `x-mcp-header` annotations of 2026-07-28 input schemas.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::http::{b64url_decode, b64url_encode};
use super::jsonrpc::{self, INTERNAL_ERROR, INVALID_PARAMS};
use super::profile::{fill, profile};
use super::{ToolCallOutcome, ToolInfo, META_SERVER_INFO};
use crate::contract::ResultForm;
use crate::error::{HarnessCode, HarnessError, InputError};

/// MCP's write rule (docs/src/reference/mcp.md, docs/src/reference/operation-files.md): a tool is a write unless its annotations say
/// `readOnlyHint: true` — annotation defaults make every other tool a possible write.
pub fn tool_is_write(annotations: Option<&Value>) -> bool {
    let key = profile().write.read_only_hint.as_str();
    annotations
        .and_then(|a| a.get(key))
        .and_then(Value::as_bool)
        != Some(true)
}

fn is_object_schema(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("object")
}

/// The `outputSchema` to advertise, or `None`.
///
/// Session-era clients require an object-rooted output schema (the official TypeScript SDK
/// refuses the whole `tools/list` otherwise) and then require `structuredContent` on every
/// success, so the schema is advertised only when it is `type: "object"`; 2026-07-28 allows
/// any non-empty schema. For `result_form: call_tool_result` the contract's output schema
/// describes the whole CallToolResult, so what is advertised is its
/// `properties.structuredContent`, and only when `structuredContent` is `required`.
pub fn advertised_output_schema(t: &ToolInfo, stateless: bool) -> Option<Value> {
    let schema = t.output_schema.as_ref()?;
    let candidate = match t.result_form {
        ResultForm::Structured => schema,
        ResultForm::CallToolResult => {
            let required = schema
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|v| v == "structuredContent"));
            if !required {
                return None;
            }
            schema.get("properties")?.get("structuredContent")?
        }
    };
    let usable = if stateless {
        candidate.as_object().is_some_and(|o| !o.is_empty())
    } else {
        is_object_schema(candidate)
    };
    usable.then(|| candidate.clone())
}

/// One entry of `tools/list`: `name`, then `title`, `description`, `inputSchema`,
/// `outputSchema`, `annotations` when present. `inputSchema` is never null: a missing or
/// non-object schema becomes `{"type":"object"}`, and an object schema without `type` gets
/// `"type":"object"` (tool arguments are always an object; clients refuse other roots).
pub fn tool_json(t: &ToolInfo, stateless: bool) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(t.name));
    if let Some(title) = &t.title {
        m.insert("title".into(), json!(title));
    }
    if let Some(d) = &t.description {
        m.insert("description".into(), json!(d));
    }
    let input = match &t.input_schema {
        Value::Object(o) => {
            let mut o = o.clone();
            o.entry("type").or_insert_with(|| json!("object"));
            Value::Object(o)
        }
        _ => json!({"type": "object"}),
    };
    m.insert("inputSchema".into(), input);
    if let Some(o) = advertised_output_schema(t, stateless) {
        m.insert("outputSchema".into(), o);
    }
    if let Some(a) = &t.annotations {
        m.insert("annotations".into(), a.clone());
    }
    Value::Object(m)
}

fn names_digest(tools: &[ToolInfo]) -> [u8; 8] {
    let mut h = Sha256::new();
    for t in tools {
        h.update(t.name.as_bytes());
        h.update(b"\n");
    }
    let d = h.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&d[..8]);
    out
}

/// An opaque cursor: base64url of the next offset (8 bytes, big-endian) and the first 8
/// bytes of the SHA-256 of the tool-name list, so a cursor from another list is refused.
pub fn encode_cursor(offset: usize, tools: &[ToolInfo]) -> String {
    let mut bytes = Vec::with_capacity(16);
    bytes.extend_from_slice(&(offset as u64).to_be_bytes());
    bytes.extend_from_slice(&names_digest(tools));
    b64url_encode(&bytes)
}

/// The offset a cursor stands for, if it is one of ours for this list.
pub fn decode_cursor(cursor: &str, tools: &[ToolInfo]) -> Option<usize> {
    let bytes = b64url_decode(cursor)?;
    if bytes.len() != 16 || bytes[8..] != names_digest(tools) {
        return None;
    }
    let offset = u64::from_be_bytes(bytes[..8].try_into().ok()?);
    let offset = usize::try_from(offset).ok()?;
    (offset > 0 && offset < tools.len()).then_some(offset)
}

/// The `tools/list` result for one page (without era-specific members), or the message of
/// an invalid cursor.
pub fn list_page(
    tools: &[ToolInfo],
    cursor: Option<&str>,
    page_size: usize,
    stateless: bool,
) -> Result<Value, String> {
    let start = match cursor {
        None => 0,
        Some(c) => decode_cursor(c, tools).ok_or_else(|| format!("Invalid cursor: {c:?}"))?,
    };
    let end = start.saturating_add(page_size.max(1)).min(tools.len());
    let page: Vec<Value> = tools[start..end]
        .iter()
        .map(|t| tool_json(t, stateless))
        .collect();
    let mut m = Map::new();
    m.insert("tools".into(), Value::Array(page));
    if end < tools.len() {
        m.insert("nextCursor".into(), json!(encode_cursor(end, tools)));
    }
    Ok(Value::Object(m))
}

/// How one `tools/call` is answered.
#[derive(Debug, Clone, PartialEq)]
pub enum CallAnswer {
    /// A CallToolResult (success, or `isError: true` for a tool-level failure).
    Result(Value),
    /// A JSON-RPC error; `harness` is the understudy harness code when it is one.
    Error {
        code: i64,
        message: String,
        data: Option<Value>,
        harness: Option<HarnessCode>,
    },
}

/// The text of an input error: its message, the input path when the message does not
/// already name it, then one line per detail.
pub fn input_error_text(e: &InputError) -> String {
    let mut text = e.message.clone();
    if let Some(p) = e.path.as_deref().filter(|p| !p.is_empty()) {
        if !text.contains(p) {
            text.push_str(&format!(" (at `{p}`)"));
        }
    }
    for d in &e.details {
        text.push_str("\n- ");
        text.push_str(d);
    }
    text
}

/// The CallToolResult of an input error (docs/src/concepts/errors.md): `isError: true` and a text block
/// naming the problem ([`input_error_text`]).
pub fn input_error_result(e: &InputError) -> Value {
    fill(&profile().errors.input_error.result, &input_error_text(e))
}

/// `{"understudy_error":{"kind":"harness_error","code","message"}}` (docs/src/concepts/errors.md).
pub fn harness_data(code: HarnessCode, message: &str) -> Value {
    json!({"understudy_error": {"kind": "harness_error", "code": code.as_str(), "message": message}})
}

fn harness_answer(e: &HarnessError) -> CallAnswer {
    let code = if e.code == HarnessCode::UnknownTool {
        INVALID_PARAMS
    } else {
        INTERNAL_ERROR
    };
    CallAnswer::Error {
        code,
        message: e.message.clone(),
        data: Some(harness_data(e.code, &e.message)),
        harness: Some(e.code),
    }
}

/// Render the backend's outcome (docs/src/reference/mock-definition.md#the-envelope-rule, docs/src/concepts/errors.md). Session-era clients require
/// `structuredContent` to be an object, so a non-object structured result is sent as the
/// text block alone there; 2026-07-28 carries any JSON value.
pub fn render_outcome(
    name: &str,
    outcome: ToolCallOutcome,
    form: ResultForm,
    stateless: bool,
) -> CallAnswer {
    match outcome {
        ToolCallOutcome::Ok(v) => match form {
            ResultForm::Structured => {
                let mut m = Map::new();
                m.insert(
                    "content".into(),
                    json!([{"type": "text", "text": v.to_string()}]),
                );
                if stateless || v.is_object() {
                    m.insert("structuredContent".into(), v);
                }
                m.insert("isError".into(), json!(false));
                CallAnswer::Result(Value::Object(m))
            }
            ResultForm::CallToolResult => {
                if v.is_object() {
                    CallAnswer::Result(v)
                } else {
                    harness_answer(&HarnessError::new(
                        HarnessCode::OutputSchemaViolation,
                        format!(
                            "tool `{name}` has result_form call_tool_result but its mock \
                             rendered a {}, not a CallToolResult object",
                            crate::util::json::bare_type_name(&v)
                        ),
                    ))
                }
            }
        },
        ToolCallOutcome::InputError(e) => CallAnswer::Result(input_error_result(&e)),
        ToolCallOutcome::InputRequired(r) => CallAnswer::Result(r),
        ToolCallOutcome::Harness(e) => harness_answer(&e),
        ToolCallOutcome::UnknownTool => {
            let message = format!("Unknown tool: {name}");
            CallAnswer::Error {
                code: INVALID_PARAMS,
                data: Some(harness_data(HarnessCode::UnknownTool, &message)),
                message,
                harness: Some(HarnessCode::UnknownTool),
            }
        }
    }
}

/// The answer for a blocked write (dry-run, `unmatched_writes: block`): a tool result with
/// `isError: true` naming why, in the profile's shape. The backend returns it as
/// `ToolCallOutcome::Ok` of a tool whose form is `call_tool_result`, or — simpler — as
/// `ToolCallOutcome::InputError` with the same message, which renders identically.
pub fn blocked_result(message: &str) -> Value {
    fill(&profile().errors.blocked_write.result, message)
}

/// The synthetic success of a simulated write for a tool of this result form (dry-run,
/// `unmatched_writes: simulate`), to return as `ToolCallOutcome::Ok`. A tool that advertises
/// an `outputSchema` will usually not match it: simulated answers are not fixtures.
pub fn simulated_result(form: ResultForm, message: &str) -> Value {
    let s = &profile().simulate;
    match form {
        ResultForm::Structured => fill(&s.structured, message),
        ResultForm::CallToolResult => fill(&s.call_tool_result, message),
    }
}

/// The `x-mcp-header` annotations of an input schema: (property path, header suffix), for
/// properties reachable from the root through `properties` only.
pub fn param_headers(schema: &Value) -> Vec<(Vec<String>, String)> {
    fn walk(s: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        let Some(props) = s.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (k, sub) in props {
            path.push(k.clone());
            if let Some(h) = sub.get("x-mcp-header").and_then(Value::as_str) {
                if !h.is_empty() {
                    out.push((path.clone(), h.to_string()));
                }
            }
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(schema, &mut Vec::new(), &mut out);
    out
}

/// The header form of a primitive argument (`None` for null, objects and arrays).
pub fn primitive_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Add what every 2026-07-28 result carries: `resultType` and the server's identity.
pub fn finish_stateless(result: &mut Value, server_name: &str) {
    if let Value::Object(m) = result {
        m.entry("resultType").or_insert_with(|| json!("complete"));
        let meta = m.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.entry(META_SERVER_INFO).or_insert_with(
                || json!({"name": server_name, "version": env!("CARGO_PKG_VERSION")}),
            );
        }
    }
}

/// One `tools/call` answer as a whole HTTP answer, for a call answered outside the session
/// machinery (a mocked, blocked or simulated call of a forwarded MCP endpoint): the JSON-RPC
/// result or error echoing `id` — a 2026-07-28 (`stateless`) result finished as every one is
/// ([`finish_stateless`], `server_name`) —, as JSON, or as one SSE event when the client
/// accepts only SSE or `prefer_sse` (the integration's `mcp_sse`) and it accepts SSE; a
/// harness error names its code in `Understudy-Error`, and `Understudy-Source: mock` says
/// understudy answered.
pub fn tool_call_answer(
    id: &Value,
    answer: CallAnswer,
    stateless: bool,
    server_name: &str,
    headers: &hyper::HeaderMap,
    prefer_sse: bool,
) -> super::McpResponse {
    let (msg, harness) = match answer {
        CallAnswer::Result(mut r) => {
            if stateless {
                finish_stateless(&mut r, server_name);
            }
            (jsonrpc::result(id, r), None)
        }
        CallAnswer::Error {
            code,
            message,
            data,
            harness,
        } => (jsonrpc::error(id, code, &message, data), harness),
    };
    let acc = super::http::accepts(headers);
    let as_sse = acc.sse && (!acc.json || prefer_sse);
    let mut headers = if as_sse {
        super::sse::headers()
    } else {
        vec![("Content-Type".to_string(), "application/json".to_string())]
    };
    if let Some(code) = harness {
        headers.push(("Understudy-Error".into(), code.as_str().into()));
    }
    headers.push(("Understudy-Source".into(), "mock".into()));
    let body = if as_sse {
        super::McpBody::Sse(vec![super::sse::event(None, &msg)])
    } else {
        super::McpBody::Json(msg.to_string().into_bytes())
    };
    super::McpResponse {
        status: 200,
        headers,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            title: None,
            description: None,
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: None,
            result_form: ResultForm::Structured,
        }
    }

    #[test]
    fn write_rule() {
        assert!(tool_is_write(None));
        assert!(tool_is_write(Some(&json!({}))));
        assert!(tool_is_write(Some(&json!({"readOnlyHint": false}))));
        assert!(tool_is_write(Some(&json!({"readOnlyHint": "true"}))));
        assert!(tool_is_write(Some(&json!({"destructiveHint": false}))));
        assert!(!tool_is_write(Some(&json!({"readOnlyHint": true}))));
    }

    #[test]
    fn cursors_are_opaque_and_bound_to_the_list() {
        let tools: Vec<ToolInfo> = ["a", "b", "c"].iter().map(|n| tool(n)).collect();
        let c = encode_cursor(2, &tools);
        assert_eq!(decode_cursor(&c, &tools), Some(2));
        let other: Vec<ToolInfo> = ["a", "b", "d"].iter().map(|n| tool(n)).collect();
        assert_eq!(decode_cursor(&c, &other), None);
        assert_eq!(decode_cursor(&encode_cursor(0, &tools), &tools), None);
        assert_eq!(decode_cursor(&encode_cursor(3, &tools), &tools), None);
        assert_eq!(decode_cursor("garbage!", &tools), None);
        assert_eq!(decode_cursor("", &tools), None);
    }

    #[test]
    fn input_schema_is_always_an_object_schema() {
        let mut t = tool("x");
        t.input_schema = json!({});
        assert_eq!(
            tool_json(&t, false)["inputSchema"],
            json!({"type": "object"})
        );
        t.input_schema = Value::Null;
        assert_eq!(
            tool_json(&t, false)["inputSchema"],
            json!({"type": "object"})
        );
        t.input_schema = json!({"type": "object", "required": ["a"]});
        assert_eq!(tool_json(&t, false)["inputSchema"], t.input_schema);
    }

    #[test]
    fn output_schema_advertisement() {
        let mut t = tool("x");
        t.output_schema = Some(json!({}));
        assert!(advertised_output_schema(&t, false).is_none());
        assert!(advertised_output_schema(&t, true).is_none());
        t.output_schema = Some(json!({"type": "array"}));
        assert!(advertised_output_schema(&t, false).is_none());
        assert!(advertised_output_schema(&t, true).is_some());
        t.output_schema = Some(json!({"type": "object"}));
        assert!(advertised_output_schema(&t, false).is_some());
        t.result_form = ResultForm::CallToolResult;
        assert!(advertised_output_schema(&t, false).is_none());
        t.output_schema = Some(
            json!({"type": "object", "required": ["content", "structuredContent"],
            "properties": {"structuredContent": {"type": "object", "properties": {"n": {}}}}}),
        );
        assert_eq!(
            advertised_output_schema(&t, false).unwrap(),
            json!({"type": "object", "properties": {"n": {}}})
        );
    }

    #[test]
    fn param_header_annotations() {
        let s = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "q": {"type": "string"},
            "nested": {"type": "object", "properties": {"tenant": {"type": "integer", "x-mcp-header": "Tenant"}}}
        }});
        let mut got = param_headers(&s);
        got.sort();
        assert_eq!(
            got,
            vec![
                (
                    vec!["nested".to_string(), "tenant".to_string()],
                    "Tenant".to_string()
                ),
                (vec!["region".to_string()], "Region".to_string()),
            ]
        );
    }

    #[test]
    fn input_error_text_names_path_and_details() {
        let mut e = InputError::new("amount must be a number").at("amount");
        assert_eq!(input_error_text(&e), "amount must be a number");
        e = InputError::new("input does not match the schema").at("slot/id");
        e.details = vec!["slot/id: expected string".into()];
        assert_eq!(
            input_error_text(&e),
            "input does not match the schema (at `slot/id`)\n- slot/id: expected string"
        );
    }

    #[test]
    fn simulated_and_blocked_shapes() {
        assert_eq!(
            blocked_result("blocked")["isError"],
            json!(true),
            "a blocked write is a tool error the agent sees"
        );
        assert_eq!(
            simulated_result(ResultForm::CallToolResult, "ok")["isError"],
            json!(false)
        );
        assert_eq!(
            simulated_result(ResultForm::Structured, "ok"),
            json!({"simulated": true, "message": "ok"})
        );
    }
}
