//! MCP endpoints outside `replay` (docs/src/reference/modes.md, docs/src/reference/mcp.md#the-endpoint; docs/src/reference/mcp.md): understudy stands between
//! the agent and the real MCP server as a transparent proxy, and answers only the tool calls
//! the mode says it must.
//!
//! - **Forwarded as they are**: every request to the endpoint (`initialize`, notifications,
//!   `tools/list`, `GET` streams, `DELETE`…) goes to the integration's `upstream` with the
//!   agent's headers (`Mcp-Session-Id`, `MCP-Protocol-Version`, `Mcp-*`, `Authorization`,
//!   `Last-Event-ID`… — only `Understudy-*` and hop-by-hop headers are removed); the real
//!   status, headers and body come back, SSE event by event. The session is the real
//!   server's: understudy keeps none of its own here.
//! - **`tools/call`** (a single JSON-RPC request):
//!   - a tool with a pinned mock, in `dry-run` and `record-missing`: answered by the mock
//!     (the replay pipeline: input schema, state, evidence `source: "mock"`), as JSON, or as
//!     one SSE event when the agent accepts only SSE or the integration sets `mcp_sse`;
//!     2026-07-28 results carry `resultType` and the server info, as in replay;
//!   - any other tool: the rule of the mode ([`super::policy::plan_for`]): forwarded (evidence
//!     `forwarded`, `source: "upstream"`; `record` modes capture it for drafts), or — for a
//!     write — blocked (a tool result with `isError: true` naming why, `blocked`), simulated
//!     (the profile's synthetic success for the tool's result form, `simulated`) or tagged
//!     (forwarded with `Understudy-Source: tool_test` and
//!     `params._meta["dev.understudy/source"]: "tool_test"`).
//!
//!   Evidence of a forwarded call: `arguments` the call's arguments, `result` the real
//!   JSON-RPC `result` (the CallToolResult) or `error` object, both scrubbed; `http_status`
//!   the real status.
//! - **Write classification**: the operation file's `write`, else its annotations, else what
//!   the real server's `tools/list` said when understudy forwarded one (`readOnlyHint`),
//!   else a write (fail closed: a dry-run agent that calls a tool it never listed cannot
//!   change anything).
//! - **Refused**: a JSON-RPC batch (2025-03-26) holding a `tools/call` — it cannot be split
//!   into calls that are answered differently — gets HTTP 400 with a JSON-RPC error asking for
//!   one call per request.
//! - An integration without `upstream`, and any request after the attempt's lease, are
//!   answered by the replay endpoint (`crate::proxy::mcp`, which hands this module the rest).
//! - The real server unreachable: the harness error `upstream_unavailable` as MCP answers it
//!   (JSON-RPC -32603 with the `understudy_error` data, HTTP 200), recorded in evidence.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use hyper::http::{HeaderMap, HeaderValue, Response};
use serde_json::{json, Value};

use super::body::mcp_response;
use crate::app::attempt::Attempt;
use crate::app::{App, Integration};
use crate::author::record::{Call, Exchange, McpCall, ToolOutcome};
use crate::error::{HarnessCode, HarnessError};
use crate::http::{full, is_sse, to_http, HttpResponse, Request};
use crate::profile::mcp::jsonrpc::Posted;
use crate::profile::mcp::{harness_reply_to, sse, tool_is_write};
use crate::proxy::call::{self, secret_values, CallInfo};
use crate::proxy::decision::{Decision, StoreFailed};
use crate::proxy::forward::capture::{keep_exchange, Capture};
use crate::proxy::forward::relay::{relay, BodyEnd, Finisher};
use crate::proxy::forward::send::{buffer, send_upstream, Buffered};
use crate::proxy::forward::SOURCE_HEADER;
use crate::records::EventSource;
use crate::util::json::{json_depth, MAX_BODY_DEPTH};

/// What a forwarded message that is not a tool call leaves behind.
#[derive(Default)]
pub(super) struct Keep {
    /// Learn the tools' write flags (a `tools/list`).
    pub(super) learn: bool,
    /// Keep the answer for the drafts.
    pub(super) capture: Option<PlainCapture>,
    /// A `GET` stream of this session: keep the requests the server sends on it.
    pub(super) watch: Option<String>,
    /// A `GET` stream being opened: later requests of its session wait for its head
    /// ([`crate::app::forwarding::OpeningStreams`]).
    pub(super) opening: Option<crate::app::forwarding::OpeningGuard>,
}

/// The request's `Mcp-Session-Id` (`""` without one): answers are matched within a session.
pub(super) fn session_of(req: &Request) -> String {
    req.headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// What a forwarded MCP request other than `tools/call` is captured as ([`McpCall`]).
pub(super) struct PlainCapture {
    pub(super) capture: Capture,
    pub(super) method: String,
    pub(super) params: Value,
    pub(super) id: Value,
}

/// What a request to the endpoint is sent as: the path and query joined to `upstream`, and
/// its JSON-RPC message (a POST body that is JSON).
#[derive(Clone, Copy)]
pub(super) struct Sent<'a> {
    pub rest: &'a str,
    pub message: Option<&'a Value>,
    /// The body as parsed once by the endpoint (`message` is its value).
    pub posted: &'a Posted,
}

/// A call of `integ` recorded from here: its secret set computed once (every forwarded,
/// blocked or simulated call's evidence is scrubbed).
pub(super) fn call_info(
    app: &App,
    integ: &Integration,
    req: &Request,
    sent: Sent<'_>,
    arguments: Value,
) -> CallInfo {
    let mut info = CallInfo::new(req, integ.name(), arguments);
    // The body's secrets, from the one parse (within the nesting bound every request body
    // has, as `Request::json` applies it).
    let body = sent.message.filter(|m| json_depth(m) <= MAX_BODY_DEPTH);
    info.secrets = Some(secret_values(app, req, body).into());
    info
}

/// Forward a message that is not a tool call; learn the real tools' write flags from a
/// `tools/list` answer.
pub(super) async fn forward_plain(
    app: Arc<App>,
    attempt: Arc<Attempt>,
    integ: &Integration,
    req: Request,
    sent: Sent<'_>,
    mut keep: Keep,
) -> HttpResponse {
    let opening = keep.opening.take();
    let resp = send_upstream(&app, integ, &req, sent.rest, false, req.body.clone()).await;
    drop(opening);
    let resp = match resp {
        Ok(r) => r,
        Err(e) => {
            // Recorded: a harness error fails the attempt whatever the agent does next.
            let m = sent.message.unwrap_or(&Value::Null);
            let arguments = json!({ "method": m.get("method"), "params": m.get("params") });
            let info = call_info(&app, integ, &req, sent, arguments);
            let d = Decision::harness(e.clone())
                .for_mcp()
                .from(EventSource::Upstream);
            if let Err(f) = call::record(&app, &attempt, info, d).await {
                return to_http(f.response);
            }
            return mcp_response(harness_reply_to(sent.posted, &e));
        }
    };
    let (mut parts, body) = resp.into_parts();
    crate::upstream::strip_response_headers(&mut parts.headers);
    let done = Arc::new(Learn {
        app: app.clone(),
        integration: integ.name().to_string(),
        learn: keep.learn,
        headers: parts.headers.clone(),
        capture: keep.capture,
        watch: keep.watch,
        watched: std::sync::Mutex::new(0),
    });
    // No evidence for a message that is not a tool call: `Learn` ignores `info`.
    let dummy = CallInfo::new(&req, integ.name(), Value::Null);
    let out_body = if is_sse(&parts.headers) {
        relay(done, dummy, Bytes::new(), body)
    } else {
        match buffer(body, app.limits.max_body, app.limits.body_read_timeout).await {
            Buffered::Complete(bytes) => {
                done.learn_from(&bytes);
                done.capture_from(&bytes);
                full(bytes)
            }
            Buffered::Partial { prefix, rest } => relay(done, dummy, prefix, rest),
            Buffered::Failed(e) => {
                let h = HarnessError::new(
                    HarnessCode::UpstreamUnavailable,
                    format!(
                        "the MCP server of `{}` failed while sending its answer: {e}",
                        integ.name()
                    ),
                );
                return mcp_response(harness_reply_to(sent.posted, &h));
            }
        }
    };
    let mut out = Response::new(out_body);
    *out.status_mut() = parts.status;
    *out.headers_mut() = parts.headers;
    out.headers_mut()
        .insert(SOURCE_HEADER, HeaderValue::from_static("upstream"));
    out
}

/// Learns write flags from a forwarded `tools/list` answer, and keeps the answer of a
/// captured method for the drafts (no evidence).
struct Learn {
    app: Arc<App>,
    integration: String,
    learn: bool,
    headers: HeaderMap,
    capture: Option<PlainCapture>,
    /// The session of a watched `GET` stream, and how many bytes of it were read.
    watch: Option<String>,
    watched: std::sync::Mutex<usize>,
}

impl Learn {
    /// The server's requests among the complete events of a watched stream not read yet.
    fn watch_from(&self, captured: &[u8]) {
        let Some(session) = &self.watch else { return };
        let mut read = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = &captured[(*read).min(captured.len())..];
        let Some(end) = fresh.windows(2).rposition(|w| w == b"\n\n") else {
            return;
        };
        for (_, data) in sse::parse_events(&fresh[..end + 2]) {
            let Ok(m) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            let Some(method) = m.get("method").and_then(Value::as_str) else {
                continue;
            };
            if m.get("id").is_some() {
                let order = self.app.forwarding.next_order();
                let recorder = &self.app.forwarding.recorder;
                recorder.keep_ask(&self.integration, session, order, &m);
            } else {
                self.note_unsolicited(method);
            }
        }
        *read += end + 2;
    }

    /// A notification outside any tool call (a log, a list change, a resource update, on the
    /// session's stream or on the answer of a listing): relayed to the client, but no
    /// operation file holds it — a draft describes the answer to one call, and replay sends
    /// list changes and resource updates itself when its own state changes. Noted instead.
    fn note_unsolicited(&self, method: &str) {
        self.app.forwarding.recorder.note(
            &self.integration,
            format!(
                "{}: `{method}` sent by the server outside any tool call was relayed, not drafted: an operation file describes the answer to one call",
                self.integration
            ),
        );
    }

    /// Keep the answer to the captured request (its JSON-RPC `result` or `error`).
    fn capture_from(&self, bytes: &[u8]) {
        let Some(c) = &self.capture else { return };
        // A stdio server's message sent outside any request travels with whatever request
        // was waiting (`crate::server::stdio_child`): on a listing's answer it is no call's.
        for m in messages(&self.headers, bytes) {
            if let (Some(method), None) = (m.get("method").and_then(Value::as_str), m.get("id")) {
                self.note_unsolicited(method);
            }
        }
        let outcome = messages(&self.headers, bytes)
            .into_iter()
            .filter(|m| m.get("id") == Some(&c.id))
            .find_map(|m| ToolOutcome::of_response(&m));
        let Some(outcome) = outcome else { return };
        keep_exchange(
            &self.app,
            Exchange {
                integration: c.capture.integration.clone(),
                profile: c.capture.profile,
                matched_operation: None,
                at_ms: c.capture.order,
                call: Call::Mcp(McpCall {
                    method: c.method.clone(),
                    params: c.params.clone(),
                    outcome,
                }),
            },
        );
    }

    fn learn_from(&self, bytes: &[u8]) {
        if !self.learn {
            return;
        }
        for m in messages(&self.headers, bytes) {
            let Some(tools) = m.pointer("/result/tools").and_then(Value::as_array) else {
                continue;
            };
            for t in tools {
                if let Some(name) = t.get("name").and_then(Value::as_str) {
                    self.app.forwarding.learn_tool(
                        &self.integration,
                        name,
                        tool_is_write(t.get("annotations")),
                    );
                }
            }
        }
    }
}

impl Finisher for Learn {
    fn on_data(&self, captured: &[u8]) {
        self.learn_from(captured);
        self.watch_from(captured);
    }

    fn finish(
        self: Arc<Self>,
        _info: CallInfo,
        end: BodyEnd,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreFailed>> + Send>> {
        Box::pin(async move {
            // Whole messages count even when the agent left before the stream's end (it may
            // stop reading once it has its answer): only complete messages parse.
            if !end.truncated {
                self.learn_from(&end.bytes);
                self.capture_from(&end.bytes);
            }
            Ok(())
        })
    }
}

/// The JSON-RPC messages of an answer body: a JSON message or batch, or the data of every SSE
/// event (priming events and anything that is not JSON skipped).
pub(super) fn messages(headers: &HeaderMap, bytes: &[u8]) -> Vec<Value> {
    if is_sse(headers) {
        return sse::parse_events(bytes)
            .into_iter()
            .filter(|(_, d)| !d.is_empty())
            .filter_map(|(_, d)| serde_json::from_str(&d).ok())
            .collect();
    }
    match serde_json::from_slice(bytes) {
        Ok(Value::Array(a)) => a,
        Ok(v) => vec![v],
        Err(_) => Vec::new(),
    }
}
