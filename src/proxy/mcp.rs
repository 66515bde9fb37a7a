//! The MCP endpoint of `mcp` integrations, wired into the server (SPEC 5.1.1): the bridge
//! between the MCP dialect ([`crate::profile::mcp`], which owns the wire) and the call
//! pipeline ([`super::pipeline`], which owns attempts, pins, state and evidence).
//!
//! - **Outside `replay`** an integration with an `upstream` is proxied to the real MCP server
//!   ([`super::forward::mcp`]) while the attempt's lease is active; without one, or after the
//!   lease, it is answered here as in `replay`.
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
//!   [`pipeline::run_mocked_with_faults`] (evaluate under the attempt's state lock, shared with HTTP calls
//!   of every integration of the attempt → [`pipeline::commit`] → the delay after the lock is
//!   released). The event's `operation_id` is the tool name, `arguments` the
//!   arguments, `result` the mock's result (for an input error, the `isError: true` tool result
//!   the agent saw; for a harness error, the JSON-RPC `error` object), `http_status` 200 (MCP
//!   answers are JSON-RPC over HTTP 200), `is_write` the operation's `write` or the MCP rule
//!   ([`tool_is_write`]). An unknown tool is recorded as the harness error `unknown_tool`.
//! - **Before the dialect**: a POST carrying a JSON-RPC request after the attempt's lease is
//!   recorded as the harness error `lease_expired` and answered with [`harness_reply`]
//!   (HTTP 200, JSON-RPC error -32603, `Understudy-Error: lease_expired`). A store failure
//!   while recording a tool call answers HTTP 500 `store_error` instead of any MCP answer: an
//!   unrecorded call is never answered.
//! - **Asking the client** (SPEC 18, a variant's `ask_client`): a `tools/call`, `prompts/get`
//!   or `resources/read` POST runs in its own task; when its variant asks, in the session era
//!   the endpoint sends the head of a streaming SSE answer early
//!   (`McpEndpoint::handle_streaming`) and [`Backend`] waits for the client's answers before
//!   evaluating: they are the input's `$response` member and the event's
//!   `arguments["$response"]`; a client that cannot or does not answer makes the call an
//!   input error. Once the head is out, a store failure can no longer be a 500: the stream
//!   ends with the JSON-RPC error instead. In 2026-07-28 the asker answers `input_required`
//!   until a retry carries every answer ([`ToolCallOutcome::InputRequired`]: not a call,
//!   nothing recorded); the retry is then the one call.
//! - **Resource updates**: when the integration serves resources, the state before and after
//!   each call is compared, and [`McpBackend::updated_resources`] names the subscribed
//!   resources whose mock reads a state path that changed.
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

use super::decision::Decision;
use super::pipeline::{self, CallInfo, StoreFailed};
use super::route;
use crate::app::attempt::Attempt;
use crate::app::{App, Integration};
use crate::config::Mode;
use crate::contract::ResultForm;
use crate::error::{CallError, HarnessCode, HarnessError, InputError};
use crate::http::{full, to_http, HttpResponse, Request};
use crate::mock::model::RESPONSE_MEMBER;
use crate::operation::fault::{FaultAnswer, FaultPlan};
use crate::operation::Operation;
use crate::profile::mcp::ask::{Asked, Asker};
use crate::profile::mcp::jsonrpc::{self, classify, Message, INTERNAL_ERROR, INVALID_PARAMS};
use crate::profile::mcp::{
    harness_reply, tool_is_write, McpBackend, McpBody, McpEndpoint, McpResponse, ToolCallOutcome,
    ToolInfo,
};
use crate::profile::NativeResponse;
use crate::profile::Wire;
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
            .is_some_and(|g| matches!(g.wire, Wire::Mcp))
}

/// Answer one request to an MCP endpoint (see the module doc). Outside `replay`, an
/// integration with an `upstream` whose attempt's lease is active is the transparent proxy's
/// ([`super::forward::mcp`]).
pub async fn handle(app: Arc<App>, req: Request) -> HttpResponse {
    let (attempt, consumed) = match route::attempt(&app, &req) {
        Ok(x) => x,
        Err(r) => return to_http(r.response()),
    };
    let Some(integ) = req
        .segments
        .get(consumed)
        .and_then(|n| app.integration_for(&attempt, n))
    else {
        // Not an endpoint after all (the path named no integration): the pipeline says so.
        return pipeline::handle(app.clone(), req).await;
    };
    let method = Method::from_bytes(req.method.as_bytes()).unwrap_or(Method::GET);
    let lease = pipeline::check_lease(&app, &attempt.read_record());
    if app.mode != Mode::Replay && integ.config.upstream.is_some() && lease.is_ok() {
        let integ = integ.clone();
        return super::forward::mcp::handle(app.clone(), attempt, consumed, integ, req).await;
    }
    let active = lease.is_ok();
    if let Err(decision) = lease {
        app.mcp.forget_attempt(&attempt.id);
        if method == Method::POST {
            if let Some(message) = request_message(&req.body) {
                return after_lease(&app, &attempt, integ, &req, message, *decision).await;
            }
        }
    }
    if !(active && method == Method::POST && may_ask(&req.body)) {
        return serve(&app, &attempt, integ, &req, &method, active, None).await;
    }
    // A call may ask the client something first (SPEC 18): it runs in its own task, so
    // that the head of a streaming answer can go out while the call waits for the answer.
    let name = integ.name().to_string();
    let (early_tx, early_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let Some(integ) = app.integration_for(&attempt, &name) else {
            return pipeline::handle(app.clone(), req).await;
        };
        serve(&app, &attempt, integ, &req, &method, true, Some(early_tx)).await
    });
    match early_rx.await {
        Ok(head) => mcp_response(head),
        Err(_) => task.await.unwrap_or_else(|_| {
            Response::builder()
                .status(StatusCode::INTERNAL_SERVER_ERROR)
                .body(full(Bytes::new()))
                .expect("static response")
        }),
    }
}

/// Whether a POST body is a single request that may ask the client something first
/// (`tools/call`, `prompts/get`, `resources/read`).
fn may_ask(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).ok().is_some_and(|v| {
        v.get("method")
            .and_then(Value::as_str)
            .is_some_and(|m| crate::profile::mcp::mrtr::SUPPORTED.contains(&m))
    })
}

/// Answer one request from the replay endpoint of (attempt, integration); `early` as in
/// [`McpEndpoint::handle_streaming`].
async fn serve(
    app: &Arc<App>,
    attempt: &Arc<Attempt>,
    integ: &Integration,
    req: &Request,
    method: &Method,
    active: bool,
    early: Option<crate::profile::mcp::ask::Early>,
) -> HttpResponse {
    let record = attempt.record();
    let endpoint = if active {
        app.mcp.get(&attempt.id, integ)
    } else {
        // Notifications, DELETE, GET… of an attempt that is over: answered by a throwaway
        // endpoint that knows no session.
        Arc::new(McpEndpoint::new(integ.config.mcp_sse))
    };
    let backend = Backend {
        app,
        attempt,
        record: &record,
        integ,
        req,
        store_failure: Mutex::new(None),
        notifications: Mutex::new(Vec::new()),
        fault: Mutex::new(None),
        state_change: Mutex::new(None),
    };
    let answer = endpoint
        .handle_streaming(method, &req.headers, &req.body, &backend, early)
        .await;
    let failed = backend
        .store_failure
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    let fault = backend
        .fault
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    match (failed, fault) {
        (Some(f), _) => to_http(f.response),
        (None, Some(plan)) => faulted(&plan, answer, &req.body),
        (None, None) => mcp_response(answer),
    }
}

/// What goes on the wire for a faulted `tools/call` instead of the dialect's `answer`
/// ([`FaultAnswer`]): `jsonrpc_error` answers a JSON-RPC error with the request's `id` (as
/// JSON, or as the last SSE event); `stream_cut` drops the result (a JSON body is empty, an
/// SSE answer ends before its last event); the aborts are the HTTP path's
/// (`crate::http::fault`); `status` is that bare status with the fault's headers and no
/// JSON-RPC body; `slow_body` and `malformed_body` act on the answer's bytes (an SSE answer's
/// events as one body). A streaming answer (one whose head went out early, SPEC 18) is sent
/// as it is: its head has left already.
fn faulted(plan: &FaultPlan, answer: McpResponse, request: &[u8]) -> HttpResponse {
    use crate::http::fault::{self as wire, Abort};
    if matches!(answer.body, McpBody::Stream(_)) {
        return mcp_response(answer);
    }
    let bytes = |body: &McpBody| -> Bytes {
        match body {
            McpBody::Json(b) => Bytes::from(b.clone()),
            McpBody::Sse(events) => Bytes::from(events.concat()),
            _ => Bytes::new(),
        }
    };
    match &plan.answer {
        FaultAnswer::Reset => wire::aborted(Abort::Reset),
        FaultAnswer::Close => wire::aborted(Abort::Close),
        FaultAnswer::Hold { ms } => wire::aborted(Abort::Hold { ms: *ms }),
        FaultAnswer::Status { status, headers } => mcp_response(McpResponse {
            status: *status,
            headers: headers.clone(),
            body: McpBody::Empty,
        }),
        FaultAnswer::SlowBody { chunks, ms } => {
            let b = bytes(&answer.body);
            let (chunks, ms) = (*chunks, *ms);
            mcp_response(McpResponse {
                body: McpBody::Empty,
                ..answer
            })
            .map(|_| wire::slow(b, chunks, ms))
        }
        FaultAnswer::Truncated => {
            let b = bytes(&answer.body);
            mcp_response(McpResponse {
                body: McpBody::Empty,
                ..answer
            })
            .map(|_| wire::truncated(b))
        }
        FaultAnswer::JsonRpcError { code, message } => {
            let id = serde_json::from_slice::<Value>(request)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .unwrap_or(Value::Null);
            let error = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": { "code": code, "message": message },
            });
            let text = serde_json::to_vec(&error).unwrap_or_default();
            let body = match answer.body {
                McpBody::Sse(mut events) => {
                    let last = events.pop().unwrap_or_default();
                    events.push(sse_with_data(&last, &text));
                    McpBody::Sse(events)
                }
                _ => McpBody::Json(text),
            };
            mcp_response(McpResponse { body, ..answer })
        }
        FaultAnswer::StreamCut => {
            let body = match answer.body {
                McpBody::Sse(mut events) => {
                    events.pop();
                    McpBody::Sse(events)
                }
                _ => McpBody::Json(Vec::new()),
            };
            mcp_response(McpResponse { body, ..answer })
        }
    }
}

/// An SSE event like `event` (its `id:`/`event:` lines kept) whose data is `data`.
fn sse_with_data(event: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(event).lines() {
        if !line.is_empty() && !line.starts_with("data:") {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    out
}

/// The JSON-RPC message of a POST body that is neither a notification nor a response (a
/// request, a batch, or something the dialect would refuse): `None` for notifications and
/// responses, which an attempt that is over still acknowledges.
fn request_message(body: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match classify(&v) {
        Ok(Message::Notification { .. }) | Ok(Message::Response(_)) => None,
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
    let mut info = CallInfo::new(req, integ.name(), arguments);
    info.operation_id = operation_id;
    info.is_write = is_write;
    let d = Box::new(for_mcp(decision));
    if let Err(f) = pipeline::run_mocked(app, attempt, info, Err(d), |_| ()).await {
        return to_http(f.response);
    }
    mcp_response(harness_reply(&req.body, &err))
}

/// An operation's write flag: its `write`, else the MCP rule (a write unless
/// `readOnlyHint: true`).
pub(crate) fn write_flag(op: &Operation) -> bool {
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
        input_schema: o.input_schema.as_ref().clone(),
        output_schema: Some(o.output_schema.as_ref().clone()),
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
    store_failure: Mutex<Option<StoreFailed>>,
    /// What the last call's variant declares to send before its result (SPEC 18).
    notifications: Mutex<Vec<Value>>,
    /// The last call's fault ([`pipeline::plan_fault`]): `serve` puts it on the wire instead
    /// of the dialect's answer ([`faulted`]).
    fault: Mutex<Option<FaultPlan>>,
    /// The integration's state before and after the last call, when it changed and the
    /// integration serves resources (for `notifications/resources/updated`).
    state_change: Mutex<Option<(StateMap, StateMap)>>,
}

type StateMap = serde_json::Map<String, Value>;

impl McpBackend for Backend<'_> {
    fn tools(&self) -> Vec<ToolInfo> {
        self.integ
            .operations
            .iter()
            .filter(|op| super::mcp_extras::is_tool(op))
            .map(|op| tool_info(op))
            .collect()
    }

    fn catalog(&self) -> crate::profile::mcp::catalog::Catalog {
        super::mcp_extras::catalog(self.integ)
    }

    fn take_notifications(&self) -> Vec<Value> {
        std::mem::take(&mut *self.notifications.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn updated_resources(&self, subscribed: &[String]) -> Vec<String> {
        let Some((before, after)) = self
            .state_change
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return Vec::new();
        };
        let catalog = self.catalog();
        subscribed
            .iter()
            .filter(|uri| {
                crate::profile::mcp::catalog::resolve(&catalog, uri)
                    .and_then(|(name, _)| self.integ.operation(&name))
                    .is_some_and(|op| {
                        let paths = super::mcp_extras::state_paths(op);
                        super::mcp_extras::state_differs(&paths, &before, &after)
                    })
            })
            .cloned()
            .collect()
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
    ) -> Pin<Box<dyn Future<Output = ToolCallOutcome> + Send + 'a>> {
        Box::pin(self.call(name, arguments, None))
    }

    fn call_tool_asking<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        asker: &'a dyn Asker,
    ) -> Pin<Box<dyn Future<Output = ToolCallOutcome> + Send + 'a>> {
        Box::pin(self.call(name, arguments, Some(asker)))
    }

    fn server_name(&self) -> String {
        format!("understudy-{}", self.integ.name())
    }
}

impl Backend<'_> {
    /// One tool call through the pipeline stages (see the module doc); with `asker`, the
    /// variant's `ask_client` request is sent first ([`Backend::ask_first`]).
    async fn call(
        &self,
        name: &str,
        arguments: Value,
        asker: Option<&dyn Asker>,
    ) -> ToolCallOutcome {
        let op = self.integ.operation(name).cloned();
        let mut info = CallInfo::new(self.req, self.integ.name(), arguments.clone());
        info.operation_id = Some(name.to_string());
        info.is_write = op.as_deref().map(write_flag).unwrap_or(true);
        let prepared = match op {
            Some(op) => pipeline::prepare_operation(
                self.app,
                self.record,
                self.integ,
                op,
                arguments,
                self.req,
                &mut info,
            ),
            None => Err(Box::new(Decision::harness_on(
                &Wire::Mcp,
                HarnessError::new(HarnessCode::UnknownTool, self.unknown_tool_message(name)),
            ))),
        };
        let prepared = match prepared {
            Ok(p) => match self.ask_first(p, asker, &mut info).await {
                Ok(Ok(p)) => Ok(p),
                // 2026-07-28: the client answers on a retry; this round is not a call.
                Ok(Err(input_required)) => return ToolCallOutcome::InputRequired(input_required),
                Err(d) => Err(d),
            },
            Err(d) => Err(d),
        };
        let integ = self.integ;
        let notifications = &self.notifications;
        let seen = |d: &Decision| {
            if let (Some(op), None) = (integ.operation(name), &d.error) {
                *notifications.lock().unwrap_or_else(|p| p.into_inner()) =
                    super::mcp_extras::declared_notifications(op, d.variant.as_deref(), d.rule);
            }
            outcome_of(d)
        };
        let serves_resources = self
            .integ
            .operations
            .iter()
            .any(|op| !super::mcp_extras::is_tool(op));
        let before = match serves_resources {
            true => Some(self.integ_state().await),
            false => None,
        };
        let ran =
            pipeline::run_mocked_with_faults(self.app, self.attempt, info, prepared, true, seen)
                .await;
        if let Some(before) = before {
            let after = self.integ_state().await;
            if before != after {
                *self.state_change.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((before, after));
            }
        }
        match ran {
            Ok((_, plan, outcome)) => {
                if plan.is_some() {
                    *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = plan;
                }
                outcome
            }
            Err(f) => {
                *self.store_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
                // The dialect's rendering of this outcome is discarded: `handle` answers the 500.
                ToolCallOutcome::Harness(HarnessError::new(
                    HarnessCode::NoMock,
                    "the call could not be recorded, so it was not answered",
                ))
            }
        }
    }

    /// The server-to-client requests of the call's variant (`ask_client`, SPEC 18), sent
    /// before evaluation: their params render against the input and the pre-call state; the
    /// client's answers ([`Asked::evidence`]: the one answer, or an object by key) go into the
    /// input's reserved member `$response` (read by `{"$response": path}` and
    /// `source: "response"`) and into the event's `arguments` under the same member. A client
    /// that cannot be asked, answers a JSON-RPC error or does not answer within the bound
    /// makes the call an input error (the agent's side did not answer; the mock is fine). A
    /// `$response` member the client sent itself is dropped. `Ok(Err(result))`: a 2026-07-28
    /// `InputRequiredResult` to answer instead — nothing is evaluated or recorded.
    async fn ask_first(
        &self,
        mut p: pipeline::Prepared,
        asker: Option<&dyn Asker>,
        info: &mut CallInfo,
    ) -> Result<Result<pipeline::Prepared, Value>, Box<Decision>> {
        if let Value::Object(m) = &mut p.input {
            m.remove(RESPONSE_MEMBER);
        }
        let Some(asker) = asker else {
            return Ok(Ok(p));
        };
        let state = {
            let s = self.attempt.lock.lock().await;
            s.state.get(&p.op.integration).cloned().unwrap_or_default()
        };
        let requests = match p.engine.ask(p.variant.as_deref(), &p.input, &state) {
            None => return Ok(Ok(p)),
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                return Err(Box::new(
                    Decision::error_on(&p.wire, e).at(Some(p.revision), p.variant.clone()),
                ))
            }
        };
        let answers = match asker.ask(&requests).await {
            Asked::InputRequired(result) => return Ok(Err(result)),
            Asked::Answers(a) => a,
        };
        let recorded = Asked::evidence(&answers, requests.single);
        if let Value::Object(m) = &mut info.arguments {
            m.insert(RESPONSE_MEMBER.into(), recorded.clone());
        }
        match Asked::problem(&answers, &requests) {
            None => {
                if let Value::Object(m) = &mut p.input {
                    m.insert(RESPONSE_MEMBER.into(), recorded);
                }
                Ok(Ok(p))
            }
            Some(problem) => Err(Box::new(
                Decision::input_on(&p.wire, InputError::new(problem))
                    .at(Some(p.revision), p.variant.clone()),
            )),
        }
    }

    /// The integration's state now.
    async fn integ_state(&self) -> StateMap {
        let s = self.attempt.lock.lock().await;
        s.state.get(self.integ.name()).cloned().unwrap_or_default()
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
        McpBody::Stream(s) => StreamBody { rx: s.take() }.boxed(),
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

/// A streaming SSE answer: one frame per event as the endpoint sends them; the body ends when
/// the endpoint drops the sender.
struct StreamBody {
    rx: Option<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>>,
}

impl Body for StreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(None);
        };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(e)) => Poll::Ready(Some(Ok(Frame::data(Bytes::from(e))))),
            Poll::Ready(None) => {
                self.rx = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rx.is_none()
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
