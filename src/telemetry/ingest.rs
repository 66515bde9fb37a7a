//! The agent's spans in: an OTLP/HTTP `ExportTraceServiceRequest` (protobuf,
//! `application/x-protobuf`, or OTLP/JSON, `application/json`: ids as hex, enums as integers)
//! decoded within bounds, and each span that says what the agent did read as one agent-side
//! event (docs/src/guides/traces.md):
//!
//! | the span | becomes the event | kind |
//! |---|---|---|
//! | a tool call: `gen_ai.operation.name = execute_tool`, or OpenInference `openinference.span.kind = TOOL`, or an MCP `tools/call` client span | `otel.tool_call`, `data`: `tool` (`gen_ai.tool.name`, `tool.name`, or the span name after `execute_tool `), `call_id`, `arguments` (`gen_ai.tool.call.arguments` / `input.value`, JSON when it parses), `result` (`gen_ai.tool.call.result` / `output.value`), `status` (`error` when the span's status is ERROR or it has `error.type`, else `ok`), `error` | `checkpoint` |
//! | a model turn: `gen_ai.operation.name` `chat`, `text_completion` or `generate_content`, or OpenInference `LLM` | `otel.model_turn`, `text` the output message, `data`: `model`, `input_tokens`, `output_tokens` | `agent_message` |
//! | the agent's run: `gen_ai.operation.name = invoke_agent` or OpenInference `AGENT`, with an output | `otel.final_message`, `text` the output message | `agent_message` |
//!
//! Every event's `data` also has `source: "otlp"`, `trace_id`, `span_id`, `parent_span_id`
//! and `start_unix_nano` (the agent's own order of its steps; the shared sequence is the
//! order understudy received them). Other spans are accepted and not kept.
//!
//! Output text is read from `gen_ai.output.messages` (the conventions' JSON list of messages
//! with `parts`: the text parts joined), `gen_ai.completion`, or `output.value`.
//!
//! Bounds: a body of at most [`MAX_BODY`] bytes, at most [`MAX_SPANS`] spans, a string
//! attribute of at most [`MAX_STRING`] bytes (cut beyond), JSON arguments and results nested at
//! most [`crate::util::json::MAX_BODY_DEPTH`] levels (kept as the string otherwise); protobuf
//! nesting is bounded by prost's recursion limit.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Map, Value};

use crate::records::{AgentEvent, AgentEventKind};
use crate::util::json::{text_deeper_than, MAX_BODY_DEPTH};

/// Largest body taken.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// Most spans in one body.
pub const MAX_SPANS: usize = 10_000;
/// Longest string attribute kept.
pub const MAX_STRING: usize = 64 * 1024;

/// The resource attribute that names the attempt a process reports for.
pub const ATTEMPT_ATTRIBUTE: &str = "understudy.attempt_id";

/// What a span says the agent did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    ToolCall,
    ModelTurn,
    FinalMessage,
    Other,
}

/// One span, read.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpan {
    /// The resource's `understudy.attempt_id`, when it has one.
    pub attempt_id: Option<String>,
    /// 32 lower-case hex digits.
    pub trace_id: String,
    /// 16 lower-case hex digits.
    pub span_id: String,
    pub kind: SpanKind,
    pub start_unix_nano: u64,
    /// The event the span becomes (`None` for [`SpanKind::Other`]); sequence and timestamp
    /// are the store's.
    pub event: Option<AgentEvent>,
}

/// A decoded body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceBatch {
    /// Every span, in the body's order.
    pub spans: Vec<AgentSpan>,
}

impl TraceBatch {
    /// The spans that say something about the agent, in the agent's own order (start time,
    /// then the body's order).
    pub fn agent_spans(&self) -> Vec<&AgentSpan> {
        let mut v: Vec<&AgentSpan> = self.spans.iter().filter(|s| s.event.is_some()).collect();
        v.sort_by_key(|s| s.start_unix_nano);
        v
    }
}

/// Whether a `Content-Type` is OTLP's protobuf (else it must be JSON).
pub fn is_protobuf(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/x-protobuf")
        || media.eq_ignore_ascii_case("application/protobuf")
}

/// Decodes an OTLP/HTTP trace body: protobuf when `content_type` says so, else OTLP/JSON.
/// The error says what was wrong, for a 400.
pub fn decode(body: &[u8], content_type: &str) -> Result<TraceBatch, String> {
    if body.len() > MAX_BODY {
        return Err(format!(
            "the OTLP body has {} bytes, more than the {MAX_BODY} taken: export smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)",
            body.len()
        ));
    }
    let req = if is_protobuf(content_type) {
        ExportTraceServiceRequest::decode(body).map_err(|e| {
            format!("the body is not an OTLP ExportTraceServiceRequest (protobuf): {e}")
        })?
    } else {
        if text_deeper_than(body, MAX_BODY_DEPTH) {
            return Err(format!(
                "the OTLP/JSON body nests more than {MAX_BODY_DEPTH} levels"
            ));
        }
        let mut de = serde_json::Deserializer::from_slice(body);
        serde_path_to_error::deserialize::<_, ExportTraceServiceRequest>(&mut de).map_err(|e| {
            format!(
                "the body is not an OTLP/JSON ExportTraceServiceRequest: {}: {}",
                e.path(),
                e.inner()
            )
        })?
    };
    read(req)
}

fn read(req: ExportTraceServiceRequest) -> Result<TraceBatch, String> {
    let n: usize = req
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len())
        .sum();
    if n > MAX_SPANS {
        return Err(format!(
            "the body has {n} spans, more than the {MAX_SPANS} taken in one export"
        ));
    }
    let mut spans = Vec::with_capacity(n);
    for rs in &req.resource_spans {
        let attempt_id = rs
            .resource
            .as_ref()
            .and_then(|r| attr(&r.attributes, ATTEMPT_ATTRIBUTE))
            .and_then(|v| v.as_str().map(str::to_string))
            .filter(|s| !s.is_empty());
        for ss in &rs.scope_spans {
            for s in &ss.spans {
                spans.push(span(s, attempt_id.clone()));
            }
        }
    }
    Ok(TraceBatch { spans })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A string cut to [`MAX_STRING`] bytes (at a character boundary).
fn bounded(s: &str) -> String {
    if s.len() <= MAX_STRING {
        return s.to_string();
    }
    let mut end = MAX_STRING;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// An attribute value as JSON (strings bounded; nesting follows prost's bound).
fn any_json(v: &AnyValue) -> Value {
    match &v.value {
        None => Value::Null,
        Some(any_value::Value::StringValue(s)) => Value::String(bounded(s)),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        Some(any_value::Value::ArrayValue(a)) => {
            Value::Array(a.values.iter().take(1000).map(any_json).collect())
        }
        Some(any_value::Value::KvlistValue(l)) => {
            let mut m = Map::new();
            for kv in l.values.iter().take(1000) {
                m.insert(
                    kv.key.clone(),
                    kv.value.as_ref().map(any_json).unwrap_or(Value::Null),
                );
            }
            Value::Object(m)
        }
        Some(any_value::Value::BytesValue(b)) => Value::String(hex(&b[..b.len().min(4096)])),
        Some(any_value::Value::StringValueStrindex(_)) => Value::Null,
    }
}

fn attr(attrs: &[KeyValue], key: &str) -> Option<Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .map(any_json)
        .filter(|v| !v.is_null())
}

fn attr_str(attrs: &[KeyValue], key: &str) -> Option<String> {
    match attr(attrs, key)? {
        Value::String(s) => Some(s),
        other => Some(other.to_string()),
    }
}

/// A value that may hold JSON text: parsed when it does (and is not too deep), else kept.
fn maybe_json(v: Value) -> Value {
    if let Value::String(s) = &v {
        let t = s.trim_start();
        if (t.starts_with('{') || t.starts_with('['))
            && !text_deeper_than(s.as_bytes(), MAX_BODY_DEPTH)
        {
            if let Ok(parsed) = serde_json::from_str::<Value>(s) {
                return parsed;
            }
        }
    }
    v
}

/// The text of an output: the conventions' messages (`[{"role","parts":[{"type":"text",
/// "content"}]}]`, also OpenAI's `content` string), or the string itself.
fn output_text(v: Value) -> Option<String> {
    fn of_message(m: &Value, out: &mut Vec<String>) {
        if let Some(parts) = m.get("parts").and_then(Value::as_array) {
            for p in parts {
                if p.get("type").and_then(Value::as_str).unwrap_or("text") == "text" {
                    if let Some(c) = p.get("content").and_then(Value::as_str) {
                        out.push(c.to_string());
                    }
                }
            }
        } else if let Some(c) = m.get("content").and_then(Value::as_str) {
            out.push(c.to_string());
        }
    }
    match maybe_json(v) {
        Value::String(s) => Some(s),
        Value::Array(msgs) => {
            let mut out = Vec::new();
            for m in &msgs {
                of_message(m, &mut out);
            }
            (!out.is_empty()).then(|| out.join("\n"))
        }
        m @ Value::Object(_) => {
            let mut out = Vec::new();
            of_message(&m, &mut out);
            (!out.is_empty()).then(|| out.join("\n"))
        }
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn kind_of(s: &Span) -> SpanKind {
    let op = attr_str(&s.attributes, "gen_ai.operation.name").unwrap_or_default();
    let oi = attr_str(&s.attributes, "openinference.span.kind")
        .unwrap_or_default()
        .to_ascii_uppercase();
    let mcp = attr_str(&s.attributes, "mcp.method.name").unwrap_or_default();
    // SpanKind::Client is 3 in OTLP.
    if op == "execute_tool" || oi == "TOOL" || (mcp == "tools/call" && s.kind == 3) {
        SpanKind::ToolCall
    } else if matches!(op.as_str(), "chat" | "text_completion" | "generate_content") || oi == "LLM"
    {
        SpanKind::ModelTurn
    } else if op == "invoke_agent" || oi == "AGENT" {
        SpanKind::FinalMessage
    } else {
        SpanKind::Other
    }
}

fn first(attrs: &[KeyValue], keys: &[&str]) -> Option<Value> {
    keys.iter().find_map(|k| attr(attrs, k))
}

fn span(s: &Span, attempt_id: Option<String>) -> AgentSpan {
    let kind = kind_of(s);
    let a = &s.attributes;
    let mut data = Map::new();
    data.insert("source".into(), json!("otlp"));
    data.insert("trace_id".into(), json!(hex(&s.trace_id)));
    data.insert("span_id".into(), json!(hex(&s.span_id)));
    if !s.parent_span_id.is_empty() {
        data.insert("parent_span_id".into(), json!(hex(&s.parent_span_id)));
    }
    data.insert("start_unix_nano".into(), json!(s.start_time_unix_nano));
    let errored = s.status.as_ref().is_some_and(|st| st.code == 2);
    let error_type = attr_str(a, "error.type");
    let event = match kind {
        SpanKind::ToolCall => {
            let tool = attr_str(a, "gen_ai.tool.name")
                .or_else(|| attr_str(a, "tool.name"))
                .unwrap_or_else(|| {
                    s.name
                        .strip_prefix("execute_tool ")
                        .unwrap_or(&s.name)
                        .trim()
                        .to_string()
                });
            data.insert("tool".into(), json!(bounded(&tool)));
            if let Some(id) = attr_str(a, "gen_ai.tool.call.id") {
                data.insert("call_id".into(), json!(id));
            }
            if let Some(v) = first(a, &["gen_ai.tool.call.arguments", "input.value"]) {
                data.insert("arguments".into(), maybe_json(v));
            }
            if let Some(v) = first(a, &["gen_ai.tool.call.result", "output.value"]) {
                data.insert("result".into(), maybe_json(v));
            }
            let failed = errored || error_type.is_some();
            data.insert("status".into(), json!(if failed { "error" } else { "ok" }));
            if failed {
                let msg = error_type
                    .clone()
                    .or_else(|| s.status.as_ref().map(|st| st.message.clone()))
                    .unwrap_or_default();
                data.insert("error".into(), json!(bounded(&msg)));
            }
            Some(("otel.tool_call", AgentEventKind::Checkpoint, None))
        }
        SpanKind::ModelTurn => {
            if let Some(m) = first(a, &["gen_ai.response.model", "gen_ai.request.model"]) {
                data.insert("model".into(), m);
            }
            for (k, attr_key) in [
                ("input_tokens", "gen_ai.usage.input_tokens"),
                ("output_tokens", "gen_ai.usage.output_tokens"),
            ] {
                if let Some(v) = attr(a, attr_key) {
                    data.insert(k.into(), v);
                }
            }
            let text = first(
                a,
                &[
                    "gen_ai.output.messages",
                    "gen_ai.completion",
                    "output.value",
                ],
            )
            .and_then(output_text);
            Some(("otel.model_turn", AgentEventKind::AgentMessage, text))
        }
        SpanKind::FinalMessage => first(a, &["gen_ai.output.messages", "output.value"])
            .and_then(output_text)
            .map(|t| ("otel.final_message", AgentEventKind::AgentMessage, Some(t))),
        SpanKind::Other => None,
    };
    let event = event.map(|(name, kind, text)| AgentEvent {
        sequence: 0,
        name: name.to_string(),
        kind,
        test_run_id: None,
        text: text.map(|t| bounded(&t)),
        data: Some(Value::Object(data)),
        timestamp: String::new(),
    });
    AgentSpan {
        attempt_id,
        trace_id: hex(&s.trace_id),
        span_id: hex(&s.span_id),
        kind: if event.is_none() && kind == SpanKind::FinalMessage {
            SpanKind::Other
        } else {
            kind
        },
        start_unix_nano: s.start_time_unix_nano,
        event,
    }
}

/// The answer to an export: `ExportTraceServiceResponse`, with `partialSuccess` when some
/// spans were not taken, in the request's encoding (body, content type).
pub fn response(protobuf: bool, rejected: i64, message: &str) -> (Vec<u8>, &'static str) {
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTracePartialSuccess, ExportTraceServiceResponse,
    };
    let r = ExportTraceServiceResponse {
        partial_success: (rejected > 0 || !message.is_empty()).then(|| ExportTracePartialSuccess {
            rejected_spans: rejected,
            error_message: message.to_string(),
        }),
    };
    if protobuf {
        (r.encode_to_vec(), "application/x-protobuf")
    } else {
        let v = match &r.partial_success {
            Some(p) => {
                json!({"partialSuccess": {"rejectedSpans": p.rejected_spans.to_string(), "errorMessage": p.error_message}})
            }
            None => json!({}),
        };
        (v.to_string().into_bytes(), "application/json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status};

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.into())),
            }),
            ..Default::default()
        }
    }

    fn body(spans: Vec<Span>, attempt: Option<&str>) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: attempt
                        .map(|a| vec![kv(ATTEMPT_ATTRIBUTE, a)])
                        .unwrap_or_default(),
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    fn tool_span(start: u64, name: &str, args: &str, error: bool) -> Span {
        Span {
            trace_id: vec![0xab; 16],
            span_id: vec![start as u8; 8],
            name: format!("execute_tool {name}"),
            start_time_unix_nano: start,
            attributes: vec![
                kv("gen_ai.operation.name", "execute_tool"),
                kv("gen_ai.tool.name", name),
                kv("gen_ai.tool.call.arguments", args),
            ],
            status: error.then(|| Status {
                code: 2,
                message: "503 from the tool".into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn protobuf_tool_spans_become_tool_call_events_in_the_agents_order() {
        let mut final_span = Span {
            trace_id: vec![0xab; 16],
            span_id: vec![9; 8],
            name: "invoke_agent booker".into(),
            start_time_unix_nano: 1,
            attributes: vec![
                kv("gen_ai.operation.name", "invoke_agent"),
                kv(
                    "gen_ai.output.messages",
                    r#"[{"role":"assistant","parts":[{"type":"text","content":"You are booked."}]}]"#,
                ),
            ],
            ..Default::default()
        };
        final_span.start_time_unix_nano = 1;
        let req = body(
            vec![
                tool_span(30, "book", r#"{"date":"2026-01-02"}"#, true),
                tool_span(20, "lookup", r#"{"phone":"+1"}"#, false),
                final_span,
            ],
            Some("att-1"),
        );
        let b = decode(&req.encode_to_vec(), "application/x-protobuf").unwrap();
        assert_eq!(b.spans.len(), 3);
        assert!(b
            .spans
            .iter()
            .all(|s| s.attempt_id.as_deref() == Some("att-1")));
        let order: Vec<&str> = b
            .agent_spans()
            .iter()
            .map(|s| s.event.as_ref().unwrap().name.as_str())
            .collect();
        assert_eq!(
            order,
            ["otel.final_message", "otel.tool_call", "otel.tool_call"]
        );
        let lookup = b.agent_spans()[1].event.clone().unwrap();
        let d = lookup.data.unwrap();
        assert_eq!(d["tool"], "lookup");
        assert_eq!(d["arguments"], json!({"phone": "+1"}));
        assert_eq!(d["status"], "ok");
        assert_eq!(d["trace_id"], "ab".repeat(16));
        let book = b.agent_spans()[2].event.clone().unwrap().data.unwrap();
        assert_eq!(book["status"], "error");
        assert_eq!(book["error"], "503 from the tool");
        let fin = b.agent_spans()[0].event.clone().unwrap();
        assert_eq!(fin.text.as_deref(), Some("You are booked."));
        assert_eq!(fin.kind, AgentEventKind::AgentMessage);
    }

    #[test]
    fn otlp_json_with_hex_ids_and_string_integers_decodes() {
        let body = json!({"resourceSpans": [{
            "resource": {"attributes": [{"key": "understudy.attempt_id", "value": {"stringValue": "a2"}}]},
            "scopeSpans": [{"spans": [{
                "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
                "name": "tool", "kind": 1, "startTimeUnixNano": "1700000000000000000",
                "endTimeUnixNano": "1700000000000000001",
                "attributes": [
                    {"key": "openinference.span.kind", "value": {"stringValue": "TOOL"}},
                    {"key": "tool.name", "value": {"stringValue": "crm/lookup"}},
                    {"key": "input.value", "value": {"stringValue": "{\"q\":1}"}},
                    {"key": "retries", "value": {"intValue": "3"}}
                ],
                "status": {"code": 0}
            }]}]
        }]});
        let b = decode(body.to_string().as_bytes(), "application/json").unwrap();
        let s = &b.spans[0];
        assert_eq!(s.trace_id, "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(s.attempt_id.as_deref(), Some("a2"));
        assert_eq!(s.start_unix_nano, 1_700_000_000_000_000_000);
        let d = s.event.clone().unwrap().data.unwrap();
        assert_eq!(d["tool"], "crm/lookup");
        assert_eq!(d["arguments"], json!({"q": 1}));
    }

    #[test]
    fn bad_bodies_are_refused_with_a_reason() {
        let e = decode(b"\xff\xff\xff", "application/x-protobuf").unwrap_err();
        assert!(e.contains("protobuf"), "{e}");
        let e = decode(br#"{"resourceSpans": 3}"#, "application/json").unwrap_err();
        assert!(e.contains("resourceSpans"), "{e}");
        let big = vec![b' '; MAX_BODY + 1];
        assert!(decode(&big, "application/json")
            .unwrap_err()
            .contains("bytes"));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(decode(deep.as_bytes(), "application/json")
            .unwrap_err()
            .contains("nests"));
    }

    #[test]
    fn too_many_spans_are_refused_and_long_strings_cut() {
        let spans = (0..=MAX_SPANS as u64)
            .map(|i| Span {
                start_time_unix_nano: i,
                ..Default::default()
            })
            .collect();
        let e = read(body(spans, None)).unwrap_err();
        assert!(e.contains("spans"), "{e}");
        let long = "x".repeat(MAX_STRING + 10);
        let b = read(body(vec![tool_span(1, "t", &long, false)], None)).unwrap();
        let d = b.spans[0].event.clone().unwrap().data.unwrap();
        assert!(d["arguments"].as_str().unwrap().len() <= MAX_STRING + 3);
    }

    #[test]
    fn an_agent_span_without_output_and_other_spans_are_not_kept() {
        let b = read(body(
            vec![
                Span {
                    attributes: vec![kv("gen_ai.operation.name", "invoke_agent")],
                    ..Default::default()
                },
                Span {
                    name: "HTTP GET".into(),
                    ..Default::default()
                },
            ],
            None,
        ))
        .unwrap();
        assert!(b.agent_spans().is_empty());
        assert!(b.spans.iter().all(|s| s.kind == SpanKind::Other));
    }
}
