//! The spans understudy exports (docs/src/guides/traces.md#traces-out) — pure: a served
//! call's evidence event in, an OTLP span out; an ended attempt's verdict in, its attempt
//! span out.
//!
//! A call span follows the OpenTelemetry GenAI conventions for a tool execution
//! (`execute_tool {tool}`, `gen_ai.operation.name = execute_tool`, `gen_ai.tool.name`,
//! `gen_ai.tool.call.id`, `gen_ai.tool.type`; opt-in `gen_ai.tool.call.arguments` /
//! `gen_ai.tool.call.result`), the MCP conventions on MCP calls (`mcp.method.name`,
//! `mcp.session.id`, `mcp.protocol.version`), OpenInference's attributes so Arize Phoenix
//! shows it as a tool (`openinference.span.kind = TOOL`, `tool.name`, opt-in
//! `input.value` / `output.value`), and understudy's own (`understudy.*`). Its parent is the
//! caller's `traceparent` span; a caller that did not sample its trace gets no span.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
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
/// span (`traceparent`) and, on MCP, its session and protocol version headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallContext {
    pub caller: Option<Caller>,
    pub mcp_session_id: Option<String>,
    pub mcp_protocol_version: Option<String>,
}

impl CallContext {
    /// From a request's headers (`header(name)`: its single value, `None` when absent or
    /// repeated).
    pub fn of<'a>(header: impl Fn(&str) -> Option<&'a str>) -> CallContext {
        CallContext {
            caller: header("traceparent").and_then(Caller::parse),
            mcp_session_id: header("mcp-session-id").map(str::to_string),
            mcp_protocol_version: header("mcp-protocol-version").map(str::to_string),
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

/// The span of one served call. `result`: its result when `ev.result` does not hold it (a
/// static answer's is stored pre-encoded); `attempt_id`: the attempt it belongs to; `mcp`:
/// the call came over MCP; `content`: the scrubber arguments and results go through before
/// they are put on the span (`None`: they are left off); `end`: when its answer was
/// decided. `None` when the caller's trace is not sampled.
pub fn call_span(
    ev: &ToolEvent,
    result: Option<&Value>,
    attempt_id: &str,
    cx: &CallContext,
    mcp: bool,
    content: Option<&dyn Fn(&mut Value)>,
    end: SystemTime,
) -> Option<SpanData> {
    if cx.caller.is_some_and(|c| !c.sampled) {
        return None;
    }
    let tool = ev
        .operation_id
        .clone()
        .unwrap_or_else(|| "unmatched".into());
    let mut a = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", tool.clone()),
        KeyValue::new("gen_ai.tool.call.id", ev.execution_attempt_id.clone()),
        KeyValue::new("gen_ai.tool.type", "extension"),
        KeyValue::new("openinference.span.kind", "TOOL"),
        KeyValue::new("tool.name", tool.clone()),
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
    ];
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
    if mcp {
        let method = if ev.operation_id.is_some() {
            "tools/call".to_string()
        } else {
            ev.arguments
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_string()
        };
        a.push(KeyValue::new("mcp.method.name", method));
        if let Some(s) = &cx.mcp_session_id {
            a.push(KeyValue::new("mcp.session.id", s.clone()));
        }
        if let Some(v) = &cx.mcp_protocol_version {
            a.push(KeyValue::new("mcp.protocol.version", v.clone()));
        }
    }
    let error_code = ev
        .error
        .as_ref()
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let status = if failed(ev) {
        let kind = error_code
            .clone()
            .or_else(|| ev.fault.as_ref().map(|f| f.kind.clone()))
            .unwrap_or_else(|| ev.result_status.as_str().to_string());
        a.push(KeyValue::new("error.type", kind.clone()));
        let message = ev
            .error
            .as_ref()
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .map(|m| format!("{kind}: {m}"))
            .unwrap_or(kind);
        Status::error(message)
    } else {
        Status::Unset
    };
    if let Some(scrub) = content {
        let mut args = ev.arguments.clone();
        scrub(&mut args);
        let args = cut(args.to_string());
        let mut result = result.unwrap_or(&ev.result).clone();
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
    let start = end
        .checked_sub(Duration::from_secs_f64(ev.latency_ms.max(0.0) / 1000.0))
        .unwrap_or(end);
    let (trace_id, parent) = match cx.caller {
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
        parent_span_is_remote: cx.caller.is_some(),
        span_kind: SpanKind::Server,
        name: Cow::Owned(format!("execute_tool {tool}")),
        start_time: start,
        end_time: end,
        attributes: a,
        dropped_attributes_count: 0,
        events: span_events(events),
        links: SpanLinks::default(),
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
