//! The spans understudy exports (docs/src/guides/traces.md#traces-out) — pure: a served
//! call's evidence event in, an OTLP span out; an ended attempt's verdict in, its attempt
//! span out.
//!
//! A call span follows the OpenTelemetry GenAI conventions for a tool execution
//! (`execute_tool {tool}`, `gen_ai.operation.name = execute_tool`, `gen_ai.tool.name`,
//! `gen_ai.tool.call.id`, `gen_ai.tool.type`; opt-in `gen_ai.tool.call.arguments` /
//! `gen_ai.tool.call.result`), the MCP conventions on MCP calls (below), OpenInference's
//! attributes so Arize Phoenix shows it as a tool (`openinference.span.kind = TOOL`,
//! `tool.name`, opt-in `input.value` / `output.value`), and understudy's own
//! (`understudy.*`). Its parent is the caller's `traceparent` span; a caller that did not
//! sample its trace gets no span.
//!
//! An MCP call's span carries what the MCP conventions require of a server span:
//! `mcp.method.name`, `jsonrpc.request.id` (the request's `id` as text; none for a
//! notification or a `null` id), `mcp.session.id` and `mcp.protocol.version` when the
//! request had them, `gen_ai.prompt.name` / `mcp.resource.uri` on prompt and resource
//! methods, and on failure `error.type` as they define it: the JSON-RPC error code of an
//! error answer (also in `rpc.response.status_code`), `tool_error` for a result with
//! `isError: true` (an input error, a blocked write), else the fault's kind; understudy's own
//! error code stays in `understudy.error.code`. Its parent is the `traceparent` the request
//! carries in `params._meta` (how MCP propagates a trace, on stdio as on HTTP), else the HTTP
//! header's; when both are there and differ the header's span is a link. Those come from the
//! request's JSON-RPC message ([`McpMessage::read`]), read once per MCP call by its commit,
//! whose evidence event takes its `trace_id` from the same caller ([`CallContext::caller_of`]:
//! what joins the agent's own spans to the attempt, over stdio too). The
//! span keeps the GenAI name `execute_tool {tool}` on `tools/call`; another method is named
//! after it (`resources/read`, `prompts/get {name}`) and carries no `gen_ai.operation.name`.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value as OtelValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value;

use crate::records::{ResultStatus, ToolEvent};

/// The span a call's `traceparent` names: its trace, its span, whether it was sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub sampled: bool,
}

impl Caller {
    /// A W3C `traceparent` value (version `00` layout; later versions by their first four
    /// fields); `None` when it is not a valid one (zero ids, `ff`, upper-case hex…).
    pub fn parse(traceparent: &str) -> Option<Caller> {
        let parts: Vec<&str> = traceparent.trim_matches([' ', '\t']).split('-').collect();
        if parts.len() < 4 {
            return None;
        }
        let (ver, tid, pid, flags) = (parts[0], parts[1], parts[2], parts[3]);
        let lhex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        };
        if !lhex(ver, 2) || ver == "ff" || !lhex(tid, 32) || !lhex(pid, 16) || !lhex(flags, 2) {
            return None;
        }
        if ver == "00" && parts.len() != 4 {
            return None;
        }
        let trace_id = TraceId::from_hex(tid).ok()?;
        let span_id = SpanId::from_hex(pid).ok()?;
        if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
            return None;
        }
        let sampled = u8::from_str_radix(flags, 16).ok()? & 1 == 1;
        Some(Caller {
            trace_id,
            span_id,
            sampled,
        })
    }
}

/// What the request of a call says for its span beyond its evidence event: the caller's
/// span (`traceparent`), on MCP its session and protocol version headers, and the body (a
/// handle, not a copy) an MCP call's JSON-RPC message is read from ([`McpMessage::read`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallContext {
    pub caller: Option<Caller>,
    pub mcp_session_id: Option<String>,
    pub mcp_protocol_version: Option<String>,
    pub body: RawBody,
}

impl CallContext {
    /// From a request's headers (`header(name)`: its single value, `None` when absent or
    /// repeated) and its body.
    pub fn of<'a>(header: impl Fn(&str) -> Option<&'a str>, body: &bytes::Bytes) -> CallContext {
        CallContext {
            caller: header("traceparent").and_then(Caller::parse),
            mcp_session_id: header("mcp-session-id").map(str::to_string),
            mcp_protocol_version: header("mcp-protocol-version").map(str::to_string),
            body: RawBody(body.clone()),
        }
    }

    /// The JSON-RPC message of an MCP call (`tool`: its tool, which picks the member of a
    /// batch), read from the body ([`McpMessage::read`]).
    pub fn mcp_message(&self, tool: Option<&str>) -> McpMessage {
        McpMessage::read(&self.body.0, tool)
    }

    /// The caller's span of a call — `msg`: its MCP message when it came over MCP: the
    /// `traceparent` of `params._meta` (MCP's own propagation, the only one over stdio) wins
    /// over the transport's header. The one answer for the call's span parent and its
    /// evidence event's `trace_id` (docs/src/guides/traces.md#traces-out).
    pub fn caller_of(&self, msg: Option<&McpMessage>) -> Option<Caller> {
        msg.and_then(|m| m.caller).or(self.caller)
    }
}

/// A request body kept for its span (a reference-counted handle). Its `Debug` shows only its
/// length: a body may hold secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RawBody(pub bytes::Bytes);

impl std::fmt::Debug for RawBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawBody({} bytes)", self.0.len())
    }
}

/// What an MCP call's JSON-RPC message says for its span.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpMessage {
    /// `jsonrpc.request.id`: a string id as it is, a number as its decimal text; `None` for
    /// a notification or a `null` id.
    pub request_id: Option<String>,
    pub method: Option<String>,
    /// `params.name` (a tool or a prompt).
    pub name: Option<String>,
    /// `params.uri` (a resource).
    pub uri: Option<String>,
    /// `params._meta.traceparent`, when valid.
    pub caller: Option<Caller>,
}

#[derive(serde::Deserialize)]
struct WireMessage {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default)]
    params: Option<WireParams>,
}

#[derive(serde::Deserialize)]
struct WireParams {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    uri: Option<Value>,
    #[serde(default, rename = "_meta")]
    meta: Option<WireMeta>,
}

#[derive(serde::Deserialize)]
struct WireMeta {
    #[serde(default)]
    traceparent: Option<Value>,
}

fn text(v: Option<Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

impl McpMessage {
    /// Read the message of `body` (one JSON-RPC message, or a batch: the first member whose
    /// `params.name` is `tool`, else the first request). Only the members named here are
    /// kept (the arguments are skipped, not built); a body that is not a JSON-RPC message
    /// says nothing.
    pub fn read(body: &[u8], tool: Option<&str>) -> McpMessage {
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        let msg = if first == Some(&b'[') {
            let Ok(batch) = serde_json::from_slice::<Vec<WireMessage>>(body) else {
                return McpMessage::default();
            };
            let named = |m: &WireMessage| {
                tool.is_some()
                    && m.params
                        .as_ref()
                        .and_then(|p| p.name.as_ref())
                        .and_then(Value::as_str)
                        == tool
            };
            let mut batch = batch;
            let i = batch
                .iter()
                .position(named)
                .or_else(|| batch.iter().position(|m| m.id.is_some()));
            match i {
                Some(i) => batch.swap_remove(i),
                None => return McpMessage::default(),
            }
        } else {
            match serde_json::from_slice::<WireMessage>(body) {
                Ok(m) => m,
                Err(_) => return McpMessage::default(),
            }
        };
        let request_id = match msg.id {
            Some(Value::String(s)) => Some(s),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let (name, uri, traceparent) = match msg.params {
            Some(p) => (
                text(p.name),
                text(p.uri),
                text(p.meta.and_then(|m| m.traceparent)),
            ),
            None => (None, None, None),
        };
        McpMessage {
            request_id,
            method: text(msg.method),
            name,
            uri,
            caller: traceparent.as_deref().and_then(Caller::parse),
        }
    }
}

/// Random non-zero ids.
fn random_span_id() -> SpanId {
    loop {
        let mut b = [0u8; 8];
        crate::util::ids::fill_random(&mut b);
        let id = SpanId::from_bytes(b);
        if id != SpanId::INVALID {
            return id;
        }
    }
}

fn random_trace_id() -> TraceId {
    loop {
        let mut b = [0u8; 16];
        crate::util::ids::fill_random(&mut b);
        let id = TraceId::from_bytes(b);
        if id != TraceId::INVALID {
            return id;
        }
    }
}

fn span_events(events: Vec<Event>) -> SpanEvents {
    let mut e = SpanEvents::default();
    e.events = events;
    e
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("understudy")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

/// Longest JSON text put on a span (arguments, results), in bytes; longer ones are cut at
/// a character boundary and end with `…`.
pub const MAX_CONTENT: usize = 16 * 1024;

fn cut(mut s: String) -> String {
    if s.len() > MAX_CONTENT {
        let mut i = MAX_CONTENT;
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        s.truncate(i);
        s.push('…');
    }
    s
}

/// Whether `status` means the call did not do what the agent asked.
fn failed(ev: &ToolEvent) -> bool {
    matches!(
        ev.result_status,
        ResultStatus::InputError
            | ResultStatus::HarnessError
            | ResultStatus::Blocked
            | ResultStatus::Unknown(_)
    ) || ev.fault.is_some()
        || ev.http_status >= 500
}

/// How an MCP call failed, as the MCP conventions' `error.type` says it: the JSON-RPC error
/// code of an error answer (`Some` second: `rpc.response.status_code`), `tool_error` for a
/// `CallToolResult` with `isError: true`, else the fault's kind; `None` when it did not fail.
fn mcp_error(ev: &ToolEvent, result: &Value) -> Option<(String, Option<String>)> {
    if let Some(f) = &ev.fault {
        return Some((f.kind.clone(), None));
    }
    if ev.result_status == ResultStatus::HarnessError {
        if let Some(code) = ev.result.get("code").and_then(Value::as_i64) {
            return Some((code.to_string(), Some(code.to_string())));
        }
    }
    let is_error = result.get("isError") == Some(&Value::Bool(true));
    if is_error
        || matches!(
            ev.result_status,
            ResultStatus::InputError | ResultStatus::Blocked
        )
    {
        return Some(("tool_error".into(), None));
    }
    failed(ev).then(|| {
        let code = ev
            .error
            .as_ref()
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str);
        (code.unwrap_or(ev.result_status.as_str()).to_string(), None)
    })
}

/// The span of one served call. `result`: its result when `ev.result` does not hold it (a
/// static answer's is stored pre-encoded); `attempt_id`: the attempt it belongs to; `mcp`:
/// the call came over MCP, and this is its JSON-RPC message ([`CallContext::mcp_message`]);
/// `content`: the scrubber arguments and results go through before they are put on the
/// span (`None`: they are left off); `end`: when its answer was decided. `None` when the
/// caller's trace is not sampled.
pub fn call_span(
    ev: &ToolEvent,
    result: Option<&Value>,
    attempt_id: &str,
    cx: &CallContext,
    mcp: Option<&McpMessage>,
    content: Option<&dyn Fn(&mut Value)>,
    end: SystemTime,
) -> Option<SpanData> {
    let caller = cx.caller_of(mcp);
    let none = McpMessage::default();
    let msg = mcp.unwrap_or(&none);
    let mcp = mcp.is_some();
    if caller.is_some_and(|c| !c.sampled) {
        return None;
    }
    let result = result.unwrap_or(&ev.result);
    let tool = ev
        .operation_id
        .clone()
        .unwrap_or_else(|| "unmatched".into());
    // An MCP message that is not a tool call (a refused `resources/read`…) is named after
    // its method, not as a tool execution.
    let method = mcp.then(|| {
        if ev.operation_id.is_some() {
            "tools/call".to_string()
        } else {
            msg.method
                .clone()
                .or_else(|| {
                    ev.arguments
                        .get("method")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_else(|| "unknown".to_string())
        }
    });
    let is_tool = method.as_deref().is_none_or(|m| m == "tools/call");
    let mut a = Vec::with_capacity(24);
    if is_tool {
        a.extend([
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.clone()),
            KeyValue::new("gen_ai.tool.call.id", ev.execution_attempt_id.clone()),
            KeyValue::new("gen_ai.tool.type", "extension"),
            KeyValue::new("openinference.span.kind", "TOOL"),
            KeyValue::new("tool.name", tool.clone()),
        ]);
    }
    a.extend([
        KeyValue::new("understudy.attempt_id", attempt_id.to_string()),
        KeyValue::new("understudy.integration", ev.integration.clone()),
        KeyValue::new("understudy.operation", tool.clone()),
        KeyValue::new(
            "understudy.result_status",
            ev.result_status.as_str().to_string(),
        ),
        KeyValue::new("understudy.source", ev.source.as_str().to_string()),
        KeyValue::new("understudy.is_write", ev.is_write),
        KeyValue::new("http.response.status_code", ev.http_status as i64),
    ]);
    if ev.sequence > 0 {
        a.push(KeyValue::new("understudy.sequence", ev.sequence as i64));
    }
    if let Some(r) = ev.revision {
        a.push(KeyValue::new("understudy.revision", r as i64));
    }
    if let Some(v) = &ev.variant {
        a.push(KeyValue::new("understudy.variant", v.clone()));
    }
    if let Some(f) = &ev.fault {
        a.push(KeyValue::new("understudy.fault", f.kind.clone()));
        if let Some(o) = &f.origin {
            a.push(KeyValue::new("understudy.fault.origin", o.clone()));
        }
    }
    let mut name = format!("execute_tool {tool}");
    if let Some(method) = &method {
        a.push(KeyValue::new("mcp.method.name", method.clone()));
        if let Some(id) = &msg.request_id {
            a.push(KeyValue::new("jsonrpc.request.id", id.clone()));
        }
        if let Some(s) = &cx.mcp_session_id {
            a.push(KeyValue::new("mcp.session.id", s.clone()));
        }
        if let Some(v) = &cx.mcp_protocol_version {
            a.push(KeyValue::new("mcp.protocol.version", v.clone()));
        }
        if !is_tool {
            name = method.clone();
            if method.starts_with("prompts/") {
                if let Some(p) = &msg.name {
                    a.push(KeyValue::new("gen_ai.prompt.name", p.clone()));
                    name = format!("{method} {p}");
                }
            }
            if method.starts_with("resources/") {
                if let Some(u) = &msg.uri {
                    a.push(KeyValue::new("mcp.resource.uri", u.clone()));
                }
            }
        }
    }
    let error_code = ev
        .error
        .as_ref()
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let kind = if mcp {
        mcp_error(ev, result).map(|(kind, rpc)| {
            if let Some(rpc) = rpc {
                a.push(KeyValue::new("rpc.response.status_code", rpc));
            }
            if let Some(c) = &error_code {
                a.push(KeyValue::new("understudy.error.code", c.clone()));
            }
            kind
        })
    } else {
        failed(ev).then(|| {
            error_code
                .clone()
                .or_else(|| ev.fault.as_ref().map(|f| f.kind.clone()))
                .unwrap_or_else(|| ev.result_status.as_str().to_string())
        })
    };
    let status = match kind {
        Some(kind) => {
            a.push(KeyValue::new("error.type", kind.clone()));
            let message = ev
                .error
                .as_ref()
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .map(|m| format!("{}: {m}", error_code.as_deref().unwrap_or(kind.as_str())))
                .unwrap_or(kind);
            Status::error(message)
        }
        None => Status::Unset,
    };
    if let Some(scrub) = content {
        let mut args = ev.arguments.clone();
        scrub(&mut args);
        let args = cut(args.to_string());
        let mut result = result.clone();
        scrub(&mut result);
        let result = cut(result.to_string());
        a.push(KeyValue::new("gen_ai.tool.call.arguments", args.clone()));
        a.push(KeyValue::new("gen_ai.tool.call.result", result.clone()));
        a.push(KeyValue::new("input.value", args));
        a.push(KeyValue::new("input.mime_type", "application/json"));
        a.push(KeyValue::new("output.value", result));
        a.push(KeyValue::new("output.mime_type", "application/json"));
    }
    let mut events = Vec::new();
    let guardrail = match ev.result_status {
        ResultStatus::Blocked => Some(("blocked", "deny")),
        ResultStatus::Simulated => Some(("simulated", "modify")),
        _ => None,
    };
    if let Some((action, decision)) = guardrail {
        events.push(Event::new(
            "apply_guardrail",
            end,
            vec![
                KeyValue::new("gen_ai.operation.name", "apply_guardrail"),
                KeyValue::new("gen_ai.guardrail.name", "understudy.write_policy"),
                KeyValue::new("gen_ai.guardrail.decision.type", decision),
                KeyValue::new("understudy.guardrail.action", action),
                KeyValue::new(
                    "gen_ai.guardrail.decision.reason",
                    if action == "blocked" {
                        "a write of this mode never reaches the real system: blocked"
                    } else {
                        "a write of this mode never reaches the real system: answered by a simulation"
                    },
                ),
            ],
            0,
        ));
    }
    // The transport's span, when MCP's own context named another parent.
    let mut links = SpanLinks::default();
    if let (Some(_), Some(h)) = (msg.caller, cx.caller) {
        if Some(h) != caller {
            links.links.push(Link::new(
                SpanContext::new(
                    h.trace_id,
                    h.span_id,
                    if h.sampled {
                        TraceFlags::SAMPLED
                    } else {
                        TraceFlags::default()
                    },
                    true,
                    TraceState::default(),
                ),
                Vec::new(),
                0,
            ));
        }
    }
    let start = end
        .checked_sub(Duration::from_secs_f64(ev.latency_ms.max(0.0) / 1000.0))
        .unwrap_or(end);
    let (trace_id, parent) = match caller {
        Some(c) => (c.trace_id, c.span_id),
        None => (random_trace_id(), SpanId::INVALID),
    };
    Some(SpanData {
        span_context: SpanContext::new(
            trace_id,
            random_span_id(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: parent,
        parent_span_is_remote: caller.is_some(),
        span_kind: SpanKind::Server,
        name: Cow::Owned(name),
        start_time: start,
        end_time: end,
        attributes: a,
        dropped_attributes_count: 0,
        events: span_events(events),
        links,
        status,
        instrumentation_scope: scope(),
    })
}

/// One contract check as the attempt span reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOutcome {
    /// `<contract id>:<check id>`.
    pub name: String,
    /// `passed`, `failed`, `inconclusive`.
    pub label: String,
    /// What was looked at (the check's evidence text).
    pub explanation: String,
}

/// An ended attempt as its span says it: the verdict and every contract check.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptOutcome {
    pub attempt_id: String,
    pub started: SystemTime,
    pub ended: SystemTime,
    /// `pass` or `fail`.
    pub verdict: String,
    /// The verdict's reasons, `code: message`.
    pub reasons: Vec<String>,
    pub checks: Vec<CheckOutcome>,
    pub calls: u64,
}

/// The attempt span: `understudy attempt`, in the trace of the first caller span its calls
/// carried (`parent`; else a trace of its own), with one `gen_ai.evaluation.result` event per
/// contract check and one for the verdict (`gen_ai.evaluation.name = understudy.verdict`).
pub fn attempt_span(o: &AttemptOutcome, parent: Option<(TraceId, SpanId)>) -> SpanData {
    let score = |label: &str| match label {
        "passed" | "pass" => 1.0,
        _ => 0.0,
    };
    let mut events: Vec<Event> = o
        .checks
        .iter()
        .map(|c| {
            Event::new(
                "gen_ai.evaluation.result",
                o.ended,
                vec![
                    KeyValue::new("gen_ai.evaluation.name", c.name.clone()),
                    KeyValue::new("gen_ai.evaluation.score.label", c.label.clone()),
                    KeyValue::new("gen_ai.evaluation.score.value", score(&c.label)),
                    KeyValue::new("gen_ai.evaluation.explanation", cut(c.explanation.clone())),
                ],
                0,
            )
        })
        .collect();
    events.push(Event::new(
        "gen_ai.evaluation.result",
        o.ended,
        vec![
            KeyValue::new("gen_ai.evaluation.name", "understudy.verdict"),
            KeyValue::new("gen_ai.evaluation.score.label", o.verdict.clone()),
            KeyValue::new("gen_ai.evaluation.score.value", score(&o.verdict)),
            KeyValue::new("gen_ai.evaluation.explanation", cut(o.reasons.join("\n"))),
        ],
        0,
    ));
    let reasons: Vec<opentelemetry::StringValue> =
        o.reasons.iter().map(|r| r.clone().into()).collect();
    let attributes = vec![
        KeyValue::new("openinference.span.kind", "EVALUATOR"),
        KeyValue::new("understudy.attempt_id", o.attempt_id.clone()),
        KeyValue::new("understudy.verdict", o.verdict.clone()),
        KeyValue::new("understudy.calls", o.calls as i64),
        KeyValue::new(
            "understudy.verdict_reasons",
            OtelValue::Array(reasons.into()),
        ),
    ];
    let status = if o.verdict == "pass" {
        Status::Ok
    } else {
        Status::error(cut(o.reasons.join("; ")))
    };
    let (trace_id, parent_id) = match parent {
        Some((t, s)) => (t, s),
        None => (random_trace_id(), SpanId::INVALID),
    };
    SpanData {
        span_context: SpanContext::new(
            trace_id,
            random_span_id(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: parent_id,
        parent_span_is_remote: parent.is_some(),
        span_kind: SpanKind::Internal,
        name: Cow::Borrowed("understudy attempt"),
        start_time: o.started.min(o.ended),
        end_time: o.ended,
        attributes,
        dropped_attributes_count: 0,
        events: span_events(events),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope(),
    }
}

#[cfg(test)]
#[path = "spans_tests.rs"]
mod tests;
