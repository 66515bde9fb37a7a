//! The MCP endpoint of `mcp` integrations, wired into the server (SPEC 5.1.1): the bridge
//! between the MCP dialect ([`crate::profile::mcp`], which owns the wire) and the call
//! pipeline ([`super::pipeline`], which owns attempts, pins, state and evidence).
//!
//! - **Routing**: a request whose path is exactly an `mcp` integration's base — `/<integration>`
//!   or `/~<token>/<integration>`, with or without a trailing slash, or the upstream's own
//!   endpoint URL through the forward proxy — is this module's ([`is_endpoint`]); the attempt
//!   is resolved as for every call (path token, `Understudy-Attempt` header or proxy
//!   credentials, else the default attempt; an unknown token is the same 401 as elsewhere). Any other path under an `mcp` integration goes through the pipeline and
//!   is an `unmatched_request` harness error naming the endpoint.
//! - **One [`McpEndpoint`] per (attempt, integration)** (`crate::app::endpoints::Endpoints`), created on first use:
//!   sessions belong to one attempt (a session id of one attempt is unknown under another).
//!   The endpoints of an attempt whose lease is over are forgotten when it is next addressed,
//!   or by `Endpoints::forget_attempt` when the attempt ends.
//! - **Tools** ([`McpBackend::tools`]): every operation file of the integration, in file-name
//!   order, as [`ToolInfo`] (name = operation_id, title, description, input/output schema,
//!   annotations, result form). A tool without a pinned mock is still listed (SPEC 2.2: it is
//!   known); calling it is the harness error `no_mock`.
//! - **Calls** ([`McpBackend::call_tool`]) run the pipeline's own stages with
//!   [`Wire::Mcp`]: [`pipeline::prepare_operation`] (input = the `arguments`, input
//!   validation, the pin, `stale_contract`, the engine, the idempotency key) →
//!   [`pipeline::evaluate`] under the attempt's state lock (shared with HTTP calls of every
//!   integration of the attempt) → [`pipeline::record_evidence`] → [`pipeline::delay`] after the
//!   lock is released. The event's `operation_id` is the tool name, `arguments` the
//!   arguments, `result` the mock's result (for an input error, the `isError: true` tool result
//!   the agent saw; for a harness error, the JSON-RPC `error` object), `http_status` 200 (MCP
//!   answers are JSON-RPC over HTTP 200), `is_write` the operation's `write` or the MCP rule
//!   ([`tool_is_write`]). An unknown tool is recorded as the harness error `unknown_tool`.
//! - **Before the dialect**: a POST carrying a JSON-RPC request after the attempt's lease is
//!   recorded as the harness error `lease_expired` and answered with [`harness_reply`]
//!   (HTTP 200, JSON-RPC error -32603, `Understudy-Error: lease_expired`). A store failure
//!   while recording a tool call answers HTTP 500 `store_error` instead of any MCP answer: an
//!   unrecorded call is never answered.
//! - **SSE answers** are written one event per body frame; the body yields to the connection
//!   after each event, so each is flushed on its own (no `Content-Length`).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper::http::{HeaderValue, Method, Response, StatusCode};
use serde_json::{json, Value};

use super::pipeline::{self, CallInfo, Decision, Wire};
use super::route;
use crate::app::{App, Integration};
use crate::attempt::{self, Attempt};
use crate::config::ProfileKind;
use crate::contract::ResultForm;
use crate::error::{CallError, HarnessCode, HarnessError};
use crate::http::{full, to_http, HttpResponse, Request};
use crate::operation::Operation;
use crate::profile::mcp::jsonrpc::{self, classify, Message, INTERNAL_ERROR, INVALID_PARAMS};
use crate::profile::mcp::{
    harness_reply, tool_is_write, McpBackend, McpBody, McpEndpoint, McpResponse, ToolCallOutcome,
    ToolInfo,
};
use crate::profile::NativeResponse;
use crate::records::AttemptRecord;

/// Whether `req` addresses the endpoint of an `mcp` integration: its path, after an optional
/// `~<token>` segment, is exactly the integration's name.
pub fn is_endpoint(app: &App, req: &Request) -> bool {
    // As in `route::attempt`: no path token through the forward proxy.
    let token = req.via_proxy.is_none() && req.segments.first().is_some_and(|s| s.starts_with('~'));
    let i = usize::from(token);
    req.segments.len() == i + 1
        && app
            .integration(&req.segments[i])
            .is_some_and(|g| g.config.profile == ProfileKind::Mcp)
}

/// Answer one request to an MCP endpoint (see the module doc).
pub async fn handle(app: &App, req: Request) -> HttpResponse {
    let (attempt, consumed) = match route::attempt(app, &req) {
        Ok(x) => x,
        Err(r) => return to_http(pipeline::refusal(r)),
    };
    let Some(integ) = req
        .segments
        .get(consumed)
        .and_then(|n| app.integration_for(&attempt, n))
    else {
        // Not an endpoint after all (the path named no integration): the pipeline says so.
        return to_http(pipeline::handle(app, req).await);
    };
    let method = Method::from_bytes(req.method.as_bytes()).unwrap_or(Method::GET);
    let record = attempt.record();
    let lease = pipeline::check_lease(app, &attempt.read_record());
    let active = lease.is_ok();
    if let Err(decision) = lease {
        app.mcp.forget_attempt(&attempt.id);
        if method == Method::POST {
            if let Some(message) = request_message(&req.body) {
                return after_lease(app, &attempt, integ, &req, message, decision).await;
            }
        }
    }
    let endpoint = if active {
        app.mcp.get(&attempt.id, integ)
    } else {
        // Notifications, DELETE, GET… of an attempt that is over: answered by a throwaway
        // endpoint that knows no session.
        Arc::new(McpEndpoint::new(integ.config.mcp_sse))
    };
    let backend = Backend {
        app,
        attempt: &attempt,
        record: &record,
        integ,
        req: &req,
        store_failure: Mutex::new(None),
    };
    let answer = endpoint
        .handle(&method, &req.headers, &req.body, &backend)
        .await;
    let failed = backend
        .store_failure
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    match failed {
        Some(r) => to_http(r),
        None => mcp_response(answer),
    }
}

/// The JSON-RPC message of a POST body that is neither a notification nor a response (a
/// request, a batch, or something the dialect would refuse): `None` for notifications and
/// responses, which an attempt that is over still acknowledges.
fn request_message(body: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match classify(&v) {
        Ok(Message::Notification { .. }) | Ok(Message::Response) => None,
        _ => Some(v),
    }
}

/// A request after the attempt's lease: recorded as `lease_expired`, answered as MCP.
async fn after_lease(
    app: &App,
    attempt: &Attempt,
    integ: &Integration,
    req: &Request,
    message: Value,
    decision: Decision,
) -> HttpResponse {
    let err = match &decision.error {
        Some(CallError::Harness(e)) => e.clone(),
        _ => HarnessError::new(HarnessCode::LeaseExpired, "the attempt's lease is over"),
    };
    let (operation_id, arguments) = match message.get("method").and_then(Value::as_str) {
        Some("tools/call") => (
            message["params"]["name"].as_str().map(str::to_string),
            message["params"]
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| json!({})),
        ),
        _ => (
            None,
            json!({ "method": message.get("method"), "params": message.get("params") }),
        ),
    };
    let is_write = match operation_id.as_deref().and_then(|n| integ.operation(n)) {
        Some(op) => write_flag(op),
        None => operation_id.is_some() && tool_is_write(None),
    };
    let info = CallInfo {
        execution_attempt_id: attempt::new_uuid(),
        integration: integ.name().to_string(),
        operation_id,
        is_write,
        arguments,
        idempotency_key_ref: None,
        trace_id: pipeline::trace_id(req),
    };
    let guard = attempt.lock.lock().await;
    let (response, _) =
        pipeline::record_evidence(app, attempt, guard, req, info, for_mcp(decision)).await;
    if is_store_failure(&response) {
        return to_http(response);
    }
    mcp_response(harness_reply(&req.body, &err))
}

/// An operation's write flag: its `write`, else the MCP rule (a write unless
/// `readOnlyHint: true`).
fn write_flag(op: &Operation) -> bool {
    op.op
        .write
        .unwrap_or_else(|| tool_is_write(op.op.annotations.as_ref()))
}

/// A tool of the integration as `tools/list` shows it.
pub fn tool_info(op: &Operation) -> ToolInfo {
    let o = &op.op;
    ToolInfo {
        name: o.operation_id.clone(),
        title: o.title.clone(),
        description: o.description.clone(),
        input_schema: o.input_schema.clone(),
        output_schema: Some(o.output_schema.clone()),
        annotations: o.annotations.clone(),
        result_form: o.result_form.unwrap_or(ResultForm::Structured),
    }
}

/// The pipeline behind one MCP request: one attempt, one integration.
struct Backend<'a> {
    app: &'a App,
    attempt: &'a Attempt,
    record: &'a AttemptRecord,
    integ: &'a Integration,
    req: &'a Request,
    /// The 500 to answer instead of the MCP answer when a call could not be recorded.
    store_failure: Mutex<Option<NativeResponse>>,
}

impl McpBackend for Backend<'_> {
    fn tools(&self) -> Vec<ToolInfo> {
        self.integ
            .operations
            .iter()
            .map(|op| tool_info(op))
            .collect()
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
    ) -> Pin<Box<dyn Future<Output = ToolCallOutcome> + Send + 'a>> {
        Box::pin(self.call(name, arguments))
    }

    fn server_name(&self) -> String {
        format!("understudy-{}", self.integ.name())
    }
}

impl Backend<'_> {
    /// One tool call through the pipeline stages (see the module doc).
    async fn call(&self, name: &str, arguments: Value) -> ToolCallOutcome {
        let op = self.integ.operation(name).cloned();
        let mut info = CallInfo {
            execution_attempt_id: attempt::new_uuid(),
            integration: self.integ.name().to_string(),
            operation_id: Some(name.to_string()),
            is_write: op.as_deref().map(write_flag).unwrap_or(true),
            arguments: arguments.clone(),
            idempotency_key_ref: None,
            trace_id: pipeline::trace_id(self.req),
        };
        let prepared = match op {
            Some(op) => pipeline::prepare_operation(
                self.app,
                self.record,
                self.integ,
                op,
                Wire::Mcp,
                arguments,
                self.req,
                &mut info,
            ),
            None => Err(Decision::harness(HarnessError::new(
                HarnessCode::UnknownTool,
                self.unknown_tool_message(name),
            ))),
        };
        let mut guard = self.attempt.lock.lock().await;
        let _row =
            crate::attempt::lock_in_store(&self.app.store, &self.attempt.id, &mut guard).await;
        let decision = match prepared {
            Ok(p) => pipeline::evaluate(&mut guard, &p).at(Some(p.revision), p.variant.clone()),
            Err(d) => d,
        };
        let outcome = outcome_of(&decision);
        let (response, delay_ms) = pipeline::record_evidence(
            self.app,
            self.attempt,
            guard,
            self.req,
            info,
            for_mcp(decision),
        )
        .await;
        if is_store_failure(&response) {
            *self.store_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(response);
            // The dialect's rendering of this outcome is discarded: `handle` answers the 500.
            return ToolCallOutcome::Harness(HarnessError::new(
                HarnessCode::NoMock,
                "the call could not be recorded, so it was not answered",
            ));
        }
        pipeline::delay(delay_ms).await;
        outcome
    }

    fn unknown_tool_message(&self, name: &str) -> String {
        let known: Vec<&str> = self.integ.operations.iter().map(|o| o.id()).collect();
        if known.is_empty() {
            format!(
                "Unknown tool: {name} (`{}` has no tools: add operation files to {})",
                self.integ.name(),
                self.integ.config.operations.display()
            )
        } else {
            format!(
                "Unknown tool: {name} (the tools of `{}`: {})",
                self.integ.name(),
                known.join(", ")
            )
        }
    }
}

/// What the dialect is told about a decided call.
pub(crate) fn outcome_of(d: &Decision) -> ToolCallOutcome {
    match &d.error {
        None => ToolCallOutcome::Ok(d.result.clone()),
        Some(CallError::Input(e)) => ToolCallOutcome::InputError(e.clone()),
        Some(CallError::Harness(e)) if e.code == HarnessCode::UnknownTool => {
            ToolCallOutcome::UnknownTool
        }
        Some(CallError::Harness(e)) => ToolCallOutcome::Harness(e.clone()),
    }
}

/// A decision as an MCP call is recorded: a harness error travels as a JSON-RPC error over
/// HTTP 200, and that error object is the event's `result`.
pub(crate) fn for_mcp(mut d: Decision) -> Decision {
    if let Some(CallError::Harness(e)) = &d.error {
        let code = if e.code == HarnessCode::UnknownTool {
            INVALID_PARAMS
        } else {
            INTERNAL_ERROR
        };
        let data = crate::profile::mcp::tools::harness_data(e.code, &e.message);
        d.result = jsonrpc::error(&Value::Null, code, &e.message, Some(data))["error"].clone();
        d.response = NativeResponse {
            status: 200,
            headers: vec![("Understudy-Error".into(), e.code.as_str().into())],
            body: Some(d.result.clone()),
        };
    }
    d
}

/// `record_evidence` answered its own 500: the store refused the call.
pub(crate) fn is_store_failure(r: &NativeResponse) -> bool {
    r.status == 500
        && r.headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("understudy-error") && v == "store_error")
}

/// The dialect's answer as an HTTP response: its status and headers as given; a JSON body
/// buffered; SSE events one body frame each.
pub fn mcp_response(r: McpResponse) -> HttpResponse {
    let mut b =
        Response::builder().status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK));
    for (k, v) in &r.headers {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            b = b.header(name, value);
        }
    }
    let body = match r.body {
        McpBody::Empty => full(Bytes::new()),
        McpBody::Json(bytes) => full(bytes),
        McpBody::Sse(events) => SseBody {
            events: events.into_iter().map(Bytes::from).collect(),
            just_sent: false,
        }
        .boxed(),
    };
    b.body(body).unwrap_or_else(|_| {
        Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(full(Bytes::new()))
            .expect("static response")
    })
}

/// An SSE answer: one frame per event. After each event the body reports `Pending` once
/// (waking itself at once), so the connection flushes that event before the next.
struct SseBody {
    events: VecDeque<Bytes>,
    just_sent: bool,
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.just_sent && !self.events.is_empty() {
            self.just_sent = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        match self.events.pop_front() {
            Some(e) => {
                self.just_sent = true;
                Poll::Ready(Some(Ok(Frame::data(e))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sse_events_are_separate_frames() {
        let r = mcp_response(McpResponse {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            body: McpBody::Sse(vec![
                b"id: 1-0\ndata: \n\n".to_vec(),
                b"data: {}\n\n".to_vec(),
            ]),
        });
        assert_eq!(r.headers()["content-type"], "text/event-stream");
        let mut body = r.into_body();
        let mut frames = Vec::new();
        while let Some(f) = body.frame().await {
            frames.push(f.unwrap().into_data().unwrap());
        }
        assert_eq!(
            frames,
            vec![
                Bytes::from_static(b"id: 1-0\ndata: \n\n"),
                Bytes::from_static(b"data: {}\n\n")
            ]
        );
    }

    #[test]
    fn harness_decisions_travel_as_json_rpc_errors() {
        let d = for_mcp(Decision::harness(HarnessError::new(
            HarnessCode::UnknownTool,
            "Unknown tool: x",
        )));
        assert_eq!(d.response.status, 200);
        assert_eq!(d.result["code"], INVALID_PARAMS);
        assert_eq!(
            d.result["data"]["understudy_error"]["code"],
            json!("unknown_tool")
        );
        assert!(matches!(outcome_of(&d), ToolCallOutcome::UnknownTool));
        let d = for_mcp(Decision::harness(HarnessError::new(
            HarnessCode::NoMock,
            "m",
        )));
        assert_eq!(d.result["code"], INTERNAL_ERROR);
        assert!(matches!(outcome_of(&d), ToolCallOutcome::Harness(_)));
    }
}
