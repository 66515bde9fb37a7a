//! MCP endpoints outside `replay` (SPEC 4, 5.1.1; PROTOCOLS 1.7): understudy stands between
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
use hyper::http::{HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};

use super::capture::{http_result, keep_exchange, scrub, secret_values, Capture};
use super::relay::{relay, BodyEnd, Finisher};
use super::send::{buffer, rest_of, send_upstream, Buffered};
use super::{policy, MCP_TAG_KEY, SOURCE_HEADER};
use crate::app::attempt::Attempt;
use crate::app::{App, Integration};
use crate::author::record::{self, Ask, Call, Exchange, McpCall, ToolCall, ToolOutcome};
use crate::contract::ResultForm;
use crate::error::{HarnessCode, HarnessError, InputError};
use crate::http::{full, is_sse, to_http, HttpResponse, Request};
use crate::operation::Operation;
use crate::profile::mcp::jsonrpc::{self, INVALID_REQUEST};
use crate::profile::mcp::tools::{render_outcome, CallAnswer};
use crate::profile::mcp::{
    blocked_result, harness_reply, simulated_result, sse, tool_is_write, McpBody, McpResponse,
    ToolCallOutcome, META_SERVER_INFO,
};
use crate::profile::NativeResponse;
use crate::proxy::decision::{Decision, Plan};
use crate::proxy::mcp::{for_mcp, mcp_response, outcome_of, write_flag};
use crate::proxy::pipeline::{self, CallInfo, StoreFailed};
use crate::records::{EventSource, ResultStatus};

/// Answer one request to an MCP endpoint outside `replay` (module doc).
/// `crate::proxy::mcp` hands it an integration with an `upstream` and an attempt whose lease
/// is active.
pub async fn handle(
    app: Arc<App>,
    attempt: Arc<Attempt>,
    consumed: usize,
    integ: Integration,
    req: Request,
) -> HttpResponse {
    let rest = &rest_of(&req, consumed);
    // The one parse of the JSON-RPC message (not `Request::json`: the dialect's bound on
    // nesting is not applied to what only passes through).
    let message: Option<Value> = if req.method == "POST" {
        serde_json::from_slice(&req.body).ok()
    } else {
        None
    };
    // The DNS-rebinding defence of the replay endpoint holds here too: understudy is the
    // local server the agent talks to, and the real server only ever sees its own Host.
    if !crate::profile::mcp::http::origin_allowed(&req.headers, &[]) {
        let body = jsonrpc::error(
            &Value::Null,
            jsonrpc::TRANSPORT_ERROR,
            "Forbidden: Origin is not allowed",
            None,
        );
        return Response::builder()
            .status(StatusCode::FORBIDDEN)
            .header("content-type", "application/json")
            .body(full(body.to_string()))
            .expect("static response");
    }
    let sent = Sent {
        rest,
        message: message.as_ref(),
    };
    let capturing = policy::captures(&app);
    let method_of = |v: &Value| v.get("method").and_then(Value::as_str).map(str::to_string);
    match &message {
        Some(m @ Value::Object(o)) if o.contains_key("id") => match method_of(m).as_deref() {
            Some("tools/call") => tools_call(app.clone(), attempt, &integ, req, sent, o).await,
            Some(method) => {
                let capture =
                    (capturing && record::MCP_CAPTURED.contains(&method)).then(|| PlainCapture {
                        capture: Capture::new(&app, &integ, None, String::new()),
                        method: method.to_string(),
                        params: record::stable_params(o.get("params")),
                        id: o.get("id").cloned().unwrap_or(Value::Null),
                    });
                let keep = Keep {
                    learn: method == "tools/list",
                    capture,
                    ..Keep::default()
                };
                forward_plain(app.clone(), attempt, &integ, req, sent, keep).await
            }
            None => {
                // The client's answer to a request of the server (elicitation, sampling): kept
                // for the capture of the tool call that asked, before the server can see it.
                if let (true, Some(mut answer)) = (capturing, ToolOutcome::of_response(m)) {
                    app.store.scrubber().json(answer.value_mut());
                    app.forwarding.recorder.keep_answer(
                        integ.name(),
                        &session_of(&req),
                        &o["id"],
                        answer,
                    );
                }
                forward_plain(app.clone(), attempt, &integ, req, sent, Keep::default()).await
            }
        },
        Some(Value::Array(items))
            if items
                .iter()
                .any(|i| method_of(i).as_deref() == Some("tools/call")) =>
        {
            let msg = format!(
                "understudy does not forward a batch holding tools/call in {} mode: send each tools/call as its own request",
                app.mode
            );
            let body = jsonrpc::error(&Value::Null, INVALID_REQUEST, &msg, None);
            Response::builder()
                .status(StatusCode::BAD_REQUEST)
                .header("content-type", "application/json")
                .body(full(body.to_string()))
                .expect("static response")
        }
        _ => {
            // A `GET` stream of a session: the server may ask the client things on it.
            let keep = Keep {
                watch: (capturing && req.method == "GET").then(|| session_of(&req)),
                ..Keep::default()
            };
            forward_plain(app.clone(), attempt, &integ, req, sent, keep).await
        }
    }
}

/// What a forwarded message that is not a tool call leaves behind.
#[derive(Default)]
struct Keep {
    /// Learn the tools' write flags (a `tools/list`).
    learn: bool,
    /// Keep the answer for the drafts.
    capture: Option<PlainCapture>,
    /// A `GET` stream of this session: keep the requests the server sends on it.
    watch: Option<String>,
}

/// The request's `Mcp-Session-Id` (`""` without one): answers are matched within a session.
fn session_of(req: &Request) -> String {
    req.headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// What a forwarded MCP request other than `tools/call` is captured as ([`McpCall`]).
struct PlainCapture {
    capture: Capture,
    method: String,
    params: Value,
    id: Value,
}

/// What a request to the endpoint is sent as: the path and query joined to `upstream`, and
/// its JSON-RPC message (a POST body that is JSON).
#[derive(Clone, Copy)]
struct Sent<'a> {
    rest: &'a str,
    message: Option<&'a Value>,
}

/// A call of `integ` recorded from here: its secret set computed once (every forwarded,
/// blocked or simulated call's evidence is scrubbed).
fn call_info(app: &App, integ: &Integration, req: &Request, arguments: Value) -> CallInfo {
    let mut info = CallInfo::new(req, integ.name(), arguments);
    info.secrets = Some(secret_values(app, req).into());
    info
}

/// Forward a message that is not a tool call; learn the real tools' write flags from a
/// `tools/list` answer.
async fn forward_plain(
    app: Arc<App>,
    attempt: Arc<Attempt>,
    integ: &Integration,
    req: Request,
    sent: Sent<'_>,
    keep: Keep,
) -> HttpResponse {
    let resp = match send_upstream(&app, integ, &req, sent.rest, false, req.body.clone()).await {
        Ok(r) => r,
        Err(e) => {
            // Recorded: a harness error fails the attempt whatever the agent does next.
            let m = sent.message.unwrap_or(&Value::Null);
            let arguments = json!({ "method": m.get("method"), "params": m.get("params") });
            let info = call_info(&app, integ, &req, arguments);
            let d = for_mcp(Decision::harness(e.clone())).from(EventSource::Upstream);
            if let Err(f) = pipeline::record(&app, &attempt, info, d).await {
                return to_http(f.response);
            }
            return mcp_response(harness_reply(&req.body, &e));
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
                return mcp_response(harness_reply(&req.body, &h));
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
            if m.get("method").is_some() && m.get("id").is_some() {
                let order = self.app.forwarding.next_order();
                let recorder = &self.app.forwarding.recorder;
                recorder.keep_ask(&self.integration, session, order, &m);
            }
        }
        *read += end + 2;
    }

    /// Keep the answer to the captured request (its JSON-RPC `result` or `error`).
    fn capture_from(&self, bytes: &[u8]) {
        let Some(c) = &self.capture else { return };
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
fn messages(headers: &HeaderMap, bytes: &[u8]) -> Vec<Value> {
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

/// One `tools/call` (module doc).
async fn tools_call(
    app: Arc<App>,
    attempt: Arc<Attempt>,
    integ: &Integration,
    req: Request,
    sent: Sent<'_>,
    msg: &Map<String, Value>,
) -> HttpResponse {
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let params = msg
        .get("params")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(name) = params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        // Malformed: the real server answers it.
        return forward_plain(app, attempt, integ, req, sent, Keep::default()).await;
    };
    let arguments = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let stateless =
        crate::profile::mcp::is_stateless_era(Some("tools/call"), Some(&params), &req.headers);
    let op = integ.operation(&name).cloned();
    let is_write = op
        .as_deref()
        .map(write_flag)
        .or_else(|| app.forwarding.learned_write(integ.name(), &name))
        .unwrap_or(true);
    let pinned = op
        .as_ref()
        .is_some_and(|op| attempt.read_record().pins.contains_key(&op.key()));
    let call = LocalCall {
        app: &app,
        attempt: &attempt,
        integ,
        req: &req,
        id: &id,
        name: &name,
        stateless,
    };
    let plan = policy::plan_for(&app, pinned, is_write, integ);
    if let (Plan::Mock, Some(op)) = (&plan, &op) {
        return call.mocked(op.clone(), arguments).await;
    }
    let form = match &op {
        Some(o) => o.op.result_form.unwrap_or(ResultForm::Structured),
        None => ResultForm::CallToolResult,
    };
    let mut info = call_info(&app, integ, &req, arguments.clone());
    info.operation_id = Some(name.clone());
    info.is_write = is_write;
    match plan {
        Plan::Forward { tag, capture } => {
            let capture = capture.then(|| {
                let matched = op.as_ref().map(|o| o.id().to_string());
                Capture::new(&app, integ, matched, String::new())
            });
            let done = ToolDone {
                app: app.clone(),
                attempt: attempt.clone(),
                source: if tag {
                    EventSource::ToolTest
                } else {
                    EventSource::Upstream
                },
                capture,
                status: 0,
                headers: HeaderMap::new(),
                id: id.clone(),
                name: name.clone(),
                arguments,
                session: session_of(&req),
            };
            let body = if tag {
                tagged_body(msg)
            } else {
                req.body.clone()
            };
            forward_call(&app, integ, &req, sent, info, done, body).await
        }
        Plan::Simulate => {
            let msg = format!(
                "understudy simulated this write (dry-run): tools/call `{name}` was not sent to the real system"
            );
            let result = simulated_result(form, &msg);
            let outcome = ToolCallOutcome::Ok(result.clone());
            call.answer(info, result, ResultStatus::Simulated, outcome, form)
                .await
        }
        // `Block` (and `Mock` of a tool without an operation file, which `plan_for` never
        // gives: a pin names an operation file).
        _ => {
            let what = format!("tools/call `{name}`");
            let msg = policy::blocked_message(&app, integ.name(), &what);
            tracing::info!(integration = %integ.name(), operation = %name, "write blocked: {what}");
            let result = blocked_result(&msg);
            let outcome = ToolCallOutcome::InputError(InputError::new(msg));
            call.answer(info, result, ResultStatus::Blocked, outcome, form)
                .await
        }
    }
}

/// Forward one `tools/call` (`body`, tagged or not) and relay the real answer; `done` is
/// finished with its status and headers once the answer's body is read or relayed.
async fn forward_call(
    app: &Arc<App>,
    integ: &Integration,
    req: &Request,
    sent: Sent<'_>,
    info: CallInfo,
    mut done: ToolDone,
    body: Bytes,
) -> HttpResponse {
    let tag = done.source == EventSource::ToolTest;
    let resp = match send_upstream(app, integ, req, sent.rest, tag, body).await {
        Ok(r) => r,
        Err(e) => return done.failed(info, &req.body, e).await,
    };
    let (mut parts, body) = resp.into_parts();
    crate::upstream::strip_response_headers(&mut parts.headers);
    done.status = parts.status.as_u16();
    done.headers = parts.headers.clone();
    let done = Arc::new(done);
    let out_body = if is_sse(&parts.headers) {
        relay(done, info, Bytes::new(), body)
    } else {
        match buffer(body, app.limits.max_body, app.limits.body_read_timeout).await {
            Buffered::Complete(bytes) => {
                let end = BodyEnd::complete(bytes.clone());
                if let Err(f) = done.clone().finish(info, end).await {
                    return to_http(f.response);
                }
                full(bytes)
            }
            Buffered::Partial { prefix, rest } => relay(done, info, prefix, rest),
            Buffered::Failed(e) => {
                let h = HarnessError::new(
                    HarnessCode::UpstreamUnavailable,
                    format!(
                        "the MCP server of `{}` failed while sending its answer: {e}",
                        integ.name()
                    ),
                );
                return done.failed(info, &req.body, h).await;
            }
        }
    };
    let mut out = Response::new(out_body);
    *out.status_mut() = parts.status;
    *out.headers_mut() = parts.headers;
    out.headers_mut().insert(
        SOURCE_HEADER,
        HeaderValue::from_static(if tag { "tool_test" } else { "upstream" }),
    );
    out
}

/// The request body with the MCP body tag of a tagged write (module doc).
fn tagged_body(msg: &Map<String, Value>) -> Bytes {
    let mut m = Value::Object(msg.clone());
    if let Some(params) = m.get_mut("params").and_then(Value::as_object_mut) {
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(MCP_TAG_KEY.into(), json!("tool_test"));
        }
    }
    Bytes::from(m.to_string())
}

/// A tool call answered by understudy itself.
struct LocalCall<'a> {
    app: &'a App,
    attempt: &'a Attempt,
    integ: &'a Integration,
    req: &'a Request,
    id: &'a Value,
    name: &'a str,
    stateless: bool,
}

impl LocalCall<'_> {
    /// The mock answers (the pipeline's stages, as `crate::proxy::mcp` runs them).
    async fn mocked(&self, op: Arc<Operation>, arguments: Value) -> HttpResponse {
        let mut info = CallInfo::new(self.req, self.integ.name(), arguments.clone());
        info.operation_id = Some(self.name.to_string());
        info.is_write = write_flag(&op);
        let form = op.op.result_form.unwrap_or(ResultForm::Structured);
        let prepared = pipeline::prepare_operation(
            self.app,
            &self.attempt.read_record(),
            self.integ,
            op,
            arguments,
            self.req,
            &mut info,
        );
        match pipeline::run_mocked(self.app, self.attempt, info, prepared, outcome_of).await {
            Ok((_, outcome)) => {
                self.render(render_outcome(self.name, outcome, form, self.stateless))
            }
            Err(f) => to_http(f.response),
        }
    }

    /// Record a blocked or simulated call (`source: "mock"`) and answer it.
    async fn answer(
        &self,
        info: CallInfo,
        result: Value,
        status: ResultStatus,
        outcome: ToolCallOutcome,
        form: ResultForm,
    ) -> HttpResponse {
        let mut d = Decision::answered(
            NativeResponse {
                status: 200,
                headers: Vec::new(),
                body: Some(result.clone()),
            },
            status,
        );
        d.result = result;
        if let Err(f) = pipeline::record(self.app, self.attempt, info, d).await {
            return to_http(f.response);
        }
        // A blocked call renders as a tool error; a simulated one in the tool's form (a tool
        // the project does not know is answered as a whole CallToolResult).
        self.render(render_outcome(self.name, outcome, form, self.stateless))
    }

    /// The JSON-RPC answer, as JSON or as one SSE event (module doc).
    fn render(&self, answer: CallAnswer) -> HttpResponse {
        let (msg, harness) = match answer {
            CallAnswer::Result(mut r) => {
                if self.stateless {
                    finish_stateless(&mut r, &format!("understudy-{}", self.integ.name()));
                }
                (jsonrpc::result(self.id, r), None)
            }
            CallAnswer::Error {
                code,
                message,
                data,
                harness,
            } => (jsonrpc::error(self.id, code, &message, data), harness),
        };
        let acc = crate::profile::mcp::http::accepts(&self.req.headers);
        let as_sse = acc.sse && (!acc.json || self.integ.config.mcp_sse);
        let mut headers = if as_sse {
            sse::headers()
        } else {
            vec![("Content-Type".to_string(), "application/json".to_string())]
        };
        if let Some(code) = harness {
            headers.push(("Understudy-Error".into(), code.as_str().into()));
        }
        headers.push(("Understudy-Source".into(), "mock".into()));
        let body = if as_sse {
            McpBody::Sse(vec![sse::event(None, &msg)])
        } else {
            McpBody::Json(msg.to_string().into_bytes())
        };
        mcp_response(McpResponse {
            status: 200,
            headers,
            body,
        })
    }
}

/// What every 2026-07-28 result carries (as the replay endpoint adds it).
fn finish_stateless(result: &mut Value, server_name: &str) {
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

impl ToolDone {
    /// The call got no answer from the real server: recorded as the harness error, answered
    /// as MCP answers it.
    async fn failed(&self, info: CallInfo, body: &[u8], e: HarnessError) -> HttpResponse {
        let d = for_mcp(Decision::harness(e.clone())).from(self.source.clone());
        if let Err(f) = pipeline::record(&self.app, &self.attempt, info, d).await {
            return to_http(f.response);
        }
        mcp_response(harness_reply(body, &e))
    }
}

/// The finishing of a forwarded `tools/call`: evidence and capture.
struct ToolDone {
    app: Arc<App>,
    attempt: Arc<Attempt>,
    source: EventSource,
    capture: Option<Capture>,
    status: u16,
    headers: HeaderMap,
    id: Value,
    name: String,
    arguments: Value,
    /// The call's `Mcp-Session-Id` (`""` without one), to find the client's answers.
    session: String,
}

impl Finisher for ToolDone {
    fn finish(
        self: Arc<Self>,
        info: CallInfo,
        end: BodyEnd,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreFailed>> + Send>> {
        Box::pin(async move {
            // The answer may be whole although the stream was not read to its end (the agent
            // left once it had the result): only complete messages parse.
            let all = if end.truncated {
                Vec::new()
            } else {
                messages(&self.headers, &end.bytes)
            };
            let outcome = all
                .iter()
                .filter(|m| m.get("id") == Some(&self.id))
                .find_map(ToolOutcome::of_response);
            let mut result = match &outcome {
                Some(ToolOutcome::Result(r)) | Some(ToolOutcome::Error(r)) => r.clone(),
                None => http_result(self.status, &self.headers, &end),
            };
            if let Some(secrets) = &info.secrets {
                scrub(&self.app, secrets, &mut result);
            }
            let d = Decision::forwarded(self.status, result, self.source.clone());
            pipeline::record(&self.app, &self.attempt, info, d).await?;
            if let (Some(c), None) = (&self.capture, &outcome) {
                let why = if end.complete {
                    "its response stream ended before the result (a server that closes the stream for the client to resume it with GET and Last-Event-ID: resumed streams are not recorded)"
                } else {
                    "its answer was not read to the end"
                };
                self.app.forwarding.recorder.note(
                    &c.integration,
                    format!(
                        "{}/{}: a tools/call was not recorded: {why}",
                        c.integration, self.name
                    ),
                );
            }
            if let (Some(c), Some(outcome)) = (&self.capture, outcome) {
                keep_exchange(
                    &self.app,
                    Exchange {
                        integration: c.integration.clone(),
                        profile: c.profile,
                        matched_operation: c.matched_operation.clone(),
                        at_ms: c.order,
                        call: Call::Tool(self.tool_call(&all, outcome)),
                    },
                );
            }
            Ok(())
        })
    }
}

impl ToolDone {
    /// The captured call: the notifications and the server-to-client requests sent on its
    /// stream before the result (each with the client's answer, kept when it arrived).
    fn tool_call(&self, stream: &[Value], outcome: ToolOutcome) -> ToolCall {
        let mut notifications = Vec::new();
        let mut asked: Vec<(Value, String, Value)> = Vec::new();
        for m in stream {
            let Some(method) = m.get("method").and_then(Value::as_str) else {
                continue;
            };
            let params = record::stable_params(m.get("params"));
            match m.get("id") {
                None => notifications.push(json!({"method": method, "params": params})),
                Some(id) => asked.push((id.clone(), method.to_string(), params)),
            }
        }
        // Requests sent on the session's GET stream while this call was in flight.
        let recorder = &self.app.forwarding.recorder;
        let integration = self.integration();
        let since = self.capture.as_ref().map_or(0, |c| c.order);
        asked.extend(recorder.take_asks(&integration, &self.session, since));
        let asks = asked
            .into_iter()
            .map(|(id, method, params)| Ask {
                answer: recorder.take_answer(&integration, &self.session, &id),
                method,
                params,
            })
            .collect();
        ToolCall {
            name: self.name.clone(),
            arguments: self.arguments.clone(),
            outcome,
            notifications,
            asks,
        }
    }

    fn integration(&self) -> String {
        self.capture
            .as_ref()
            .map(|c| c.integration.clone())
            .unwrap_or_default()
    }
}
