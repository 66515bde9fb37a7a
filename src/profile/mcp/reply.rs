//! The endpoint's answers on the wire: one JSON-RPC answer with the HTTP status it calls for
//! ([`Answer`]), and how answers are framed — JSON (one object, or an array for a batch) or
//! SSE (one event each) — plus the bare refusals (405, 202, a JSON-RPC error).

use std::sync::atomic::Ordering;

use serde_json::Value;

use super::http::Accepts;
use super::jsonrpc::{self, TRANSPORT_ERROR};
use super::{sse, McpBody, McpEndpoint, McpResponse, HEADER_UNDERSTUDY_ERROR};
use crate::error::HarnessCode;

/// One JSON-RPC answer and the HTTP status it calls for.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) message: Value,
    pub(super) status: u16,
    pub(super) harness: Option<HarnessCode>,
    /// Notifications sent before `message` on an SSE answer ([`notify`]).
    pub(super) before: Vec<Value>,
}

impl Answer {
    pub(super) fn ok(id: &Value, result: Value) -> Answer {
        Answer {
            message: jsonrpc::result(id, result),
            status: 200,
            harness: None,
            before: Vec::new(),
        }
    }
    pub(super) fn err(
        id: &Value,
        code: i64,
        message: &str,
        data: Option<Value>,
        status: u16,
    ) -> Answer {
        Answer {
            message: jsonrpc::error(id, code, message, data),
            status,
            harness: None,
            before: Vec::new(),
        }
    }
}

/// How a POST's answers are framed.
#[derive(Clone)]
pub(super) struct Framing {
    pub(super) accepts: Accepts,
    pub(super) session_id: Option<String>,
    /// Start an SSE answer with the priming event (2025-11-25).
    pub(super) priming: bool,
    /// Give SSE events ids (session era).
    pub(super) event_ids: bool,
}

pub(super) fn json_response(
    status: u16,
    mut headers: Vec<(String, String)>,
    body: &Value,
) -> McpResponse {
    headers.push(("Content-Type".into(), "application/json".into()));
    McpResponse {
        status,
        headers,
        body: McpBody::Json(body.to_string().into_bytes()),
    }
}

/// A transport-level refusal: the status and a JSON-RPC error body.
pub(super) fn refuse(status: u16, code: i64, message: &str, id: &Value) -> McpResponse {
    json_response(status, Vec::new(), &jsonrpc::error(id, code, message, None))
}

pub(super) fn accepted(session_id: Option<&str>) -> McpResponse {
    McpResponse {
        status: 202,
        headers: session_header(session_id),
        body: McpBody::Empty,
    }
}

pub(super) fn session_header(session_id: Option<&str>) -> Vec<(String, String)> {
    session_id
        .map(|s| vec![("Mcp-Session-Id".to_string(), s.to_string())])
        .unwrap_or_default()
}

pub(super) fn method_not_allowed(allow: &str) -> McpResponse {
    json_response(
        405,
        vec![("Allow".into(), allow.into())],
        &jsonrpc::error(
            &Value::Null,
            TRANSPORT_ERROR,
            "Method Not Allowed: this MCP endpoint accepts POST, and GET (the session's stream) and DELETE (ending a session) in the session era",
            None,
        ),
    )
}

impl McpEndpoint {
    /// Frame answers: JSON (one object, or an array for a batch) or SSE (one event each).
    pub(super) fn reply(&self, answers: Vec<Answer>, framing: Framing, batch: bool) -> McpResponse {
        let status = if batch {
            200
        } else {
            answers.first().map(|a| a.status).unwrap_or(200)
        };
        let mut headers = session_header(framing.session_id.as_deref());
        if let Some(code) = answers.iter().find_map(|a| a.harness) {
            headers.push((HEADER_UNDERSTUDY_ERROR.into(), code.as_str().into()));
        }
        let a = framing.accepts;
        let notifies = answers.iter().any(|a| !a.before.is_empty());
        let use_sse = status == 200 && a.sse && (!a.json || self.sse || notifies);
        if !use_sse {
            let body = if batch {
                Value::Array(answers.into_iter().map(|a| a.message).collect())
            } else {
                answers
                    .into_iter()
                    .next()
                    .map(|a| a.message)
                    .unwrap_or(Value::Null)
            };
            return json_response(status, headers, &body);
        }
        headers.extend(sse::headers());
        let stream = self.streams.fetch_add(1, Ordering::Relaxed) + 1;
        let mut events = Vec::with_capacity(answers.len() + 1);
        if framing.priming {
            events.push(sse::priming(&format!("{stream}-0")));
        }
        let mut n = 0;
        for a in &answers {
            for m in a.before.iter().chain(std::iter::once(&a.message)) {
                n += 1;
                let event_id = framing.event_ids.then(|| format!("{stream}-{n}"));
                events.push(sse::event(event_id.as_deref(), m));
            }
        }
        McpResponse {
            status,
            headers,
            body: McpBody::Sse(events),
        }
    }
}
