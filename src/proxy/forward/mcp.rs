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
//!   - any other tool: the rule of the mode ([`super::action_for`]): forwarded (evidence
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
//!   answered by the replay endpoint (`super::super::mcp`).
//! - The real server unreachable: the harness error `upstream_unavailable` as MCP answers it
//!   (JSON-RPC -32603 with the `understudy_error` data, HTTP 200), recorded in evidence.

use std::sync::Arc;

use bytes::Bytes;
use hyper::http::{HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};

use super::{
    action_for, blocked_message, buffer, forwarded_decision, http_result, is_sse, keep_exchange,
    local_decision, record_event, relay, rest_of, scrub_value, send_upstream, Action, BodyEnd,
    Buffered, Capture, Finisher, MCP_TAG_KEY, SOURCE_HEADER,
};
use crate::app::{App, Integration};
use crate::attempt::{self, Attempt};
use crate::config::Mode;
use crate::contract::ResultForm;
use crate::error::{HarnessCode, HarnessError, InputError};
use crate::http::Request;
use crate::http::{full, to_http, HttpResponse};
use crate::operation::Operation;
use crate::profile::mcp::jsonrpc::{self, INVALID_REQUEST};
use crate::profile::mcp::tools::{render_outcome, CallAnswer};
use crate::profile::mcp::{
    blocked_result, harness_reply, simulated_result, sse, tool_is_write, McpBody, McpResponse,
    ToolCallOutcome, META_SERVER_INFO,
};
use crate::profile::NativeResponse;
use crate::proxy::mcp::mcp_response;
use crate::proxy::mcp::{for_mcp, is_store_failure, outcome_of};
use crate::proxy::pipeline::{self, CallInfo, Decision, Wire};
use crate::proxy::route;
use crate::record::{Call, Exchange, ToolCall, ToolOutcome};
use crate::records::{AttemptRecord, EventSource, ResultStatus};

/// Answer one request to an MCP endpoint outside `replay` (module doc).
pub async fn handle(app: Arc<App>, req: Request) -> HttpResponse {
    let (attempt, consumed) = match route::attempt(&app, &req) {
        Ok(x) => x,
        Err(r) => return to_http(pipeline::refusal(r)),
    };
    let integ = req
        .segments
        .get(consumed)
        .and_then(|n| app.integration_for(&attempt, n))
        .cloned();
    let record = attempt.record();
    let Some(integ) = integ.filter(|i| i.config.upstream.is_some()) else {
        return crate::proxy::mcp::handle(&app, req).await;
    };
    if pipeline::check_lease(&app, &attempt.read_record()).is_err() {
        return crate::proxy::mcp::handle(&app, req).await;
    }
    let rest = rest_of(&req, consumed);
    let message: Option<Value> = if req.method == "POST" {
        serde_json::from_slice(&req.body).ok()
    } else {
        None
    };
    let method_of = |v: &Value| v.get("method").and_then(Value::as_str).map(str::to_string);
    match &message {
        Some(m @ Value::Object(o)) if o.contains_key("id") => match method_of(m).as_deref() {
            Some("tools/call") => {
                tools_call(app.clone(), attempt, record, &integ, req, rest, o.clone()).await
            }
            Some("tools/list") => {
                forward_plain(app.clone(), attempt, &integ, req, rest, true).await
            }
            _ => forward_plain(app.clone(), attempt, &integ, req, rest, false).await,
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
        _ => forward_plain(app.clone(), attempt, &integ, req, rest, false).await,
    }
}

/// The write flag of an operation file: its `write`, else the MCP annotation rule.
fn write_flag(op: &Operation) -> bool {
    op.op
        .write
        .unwrap_or_else(|| tool_is_write(op.op.annotations.as_ref()))
}

/// Forward a message that is not a tool call; learn the real tools' write flags from a
/// `tools/list` answer.
async fn forward_plain(
    app: Arc<App>,
    attempt: Arc<Attempt>,
    integ: &Integration,
    req: Request,
    rest: String,
    learn: bool,
) -> HttpResponse {
    let resp = match send_upstream(&app, integ, &req, &rest, false, req.body.clone()).await {
        Ok(r) => r,
        Err(e) => {
            // Recorded: a harness error fails the attempt whatever the agent does next.
            let message: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            let info = CallInfo {
                execution_attempt_id: attempt::new_uuid(),
                integration: integ.name().to_string(),
                operation_id: None,
                is_write: false,
                arguments: json!({ "method": message.get("method"), "params": message.get("params") }),
                idempotency_key_ref: None,
                trace_id: pipeline::trace_id(&req),
            };
            let d = for_mcp(Decision::harness(e.clone()));
            if let Err(r) =
                record_event(&app, &attempt, &req, info, &d, 200, EventSource::Upstream).await
            {
                return to_http(r);
            }
            return mcp_response(harness_reply(&req.body, &e));
        }
    };
    let (mut parts, body) = resp.into_parts();
    crate::upstream::strip_response_headers(&mut parts.headers);
    let done = Arc::new(Learn {
        app: app.clone(),
        integration: integ.name().to_string(),
        learn,
        headers: parts.headers.clone(),
    });
    let dummy = CallInfo {
        execution_attempt_id: String::new(),
        integration: integ.name().to_string(),
        operation_id: None,
        is_write: false,
        arguments: Value::Null,
        idempotency_key_ref: None,
        trace_id: None,
    };
    let out_body = if is_sse(&parts.headers) {
        relay(done, dummy, Bytes::new(), body)
    } else {
        match buffer(body, app.limits.max_body, app.limits.body_read_timeout).await {
            Buffered::Complete(bytes) => {
                done.learn_from(&bytes);
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

/// Learns write flags from a forwarded `tools/list` answer (nothing else to finish).
struct Learn {
    app: Arc<App>,
    integration: String,
    learn: bool,
    headers: HeaderMap,
}

impl Learn {
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
    }

    fn finish(
        self: Arc<Self>,
        _info: CallInfo,
        end: BodyEnd,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), NativeResponse>> + Send>>
    {
        Box::pin(async move {
            if end.complete && !end.truncated {
                self.learn_from(&end.bytes);
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
    record: AttemptRecord,
    integ: &Integration,
    req: Request,
    rest: String,
    msg: Map<String, Value>,
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
        return forward_plain(app, attempt, integ, req, rest, false).await;
    };
    let arguments = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let stateless =
        crate::profile::mcp::is_stateless_era(Some("tools/call"), Some(&params), &req.headers);
    let op = integ.operation(&name).cloned();
    let uses_mocks = matches!(app.mode, Mode::DryRun | Mode::RecordMissing);
    if let Some(op) = &op {
        if uses_mocks && record.pins.contains_key(&op.key()) {
            let call = LocalCall {
                app: &app,
                attempt: &attempt,
                integ,
                req: &req,
                id: &id,
                name: &name,
                stateless,
            };
            return call.mocked(&record, op.clone(), arguments).await;
        }
    }
    let is_write = op
        .as_deref()
        .map(write_flag)
        .or_else(|| app.forwarding.learned_write(integ.name(), &name))
        .unwrap_or(true);
    let form = match &op {
        Some(o) => o.op.result_form.unwrap_or(ResultForm::Structured),
        None => ResultForm::CallToolResult,
    };
    let info = CallInfo {
        execution_attempt_id: attempt::new_uuid(),
        integration: integ.name().to_string(),
        operation_id: Some(name.clone()),
        is_write,
        arguments: arguments.clone(),
        idempotency_key_ref: None,
        trace_id: pipeline::trace_id(&req),
    };
    let call = LocalCall {
        app: &app,
        attempt: &attempt,
        integ,
        req: &req,
        id: &id,
        name: &name,
        stateless,
    };
    match action_for(&app, is_write, integ.config.unmatched_writes) {
        Action::Block => {
            let what = format!("tools/call `{name}`");
            let msg = blocked_message(&app, integ.name(), &what);
            tracing::info!(integration = %integ.name(), operation = %name, "write blocked: {what}");
            let result = blocked_result(&msg);
            call.answer(
                info,
                result,
                ResultStatus::Blocked,
                ToolCallOutcome::InputError(InputError::new(msg)),
                form,
            )
            .await
        }
        Action::Simulate => {
            let msg = format!(
                "understudy simulated this write (dry-run): tools/call `{name}` was not sent to the real system"
            );
            let result = simulated_result(form, &msg);
            call.answer(
                info,
                result.clone(),
                ResultStatus::Simulated,
                ToolCallOutcome::Ok(result),
                form,
            )
            .await
        }
        Action::Forward { tag, capture } => {
            let capture = capture.then(|| Capture {
                integration: integ.name().to_string(),
                profile: integ.config.profile,
                matched_operation: op.as_ref().map(|o| o.id().to_string()),
                order: app.forwarding.next_order(),
                path: String::new(),
            });
            let body = if tag {
                tagged_body(&msg)
            } else {
                req.body.clone()
            };
            let source = if tag {
                EventSource::ToolTest
            } else {
                EventSource::Upstream
            };
            let resp = match send_upstream(&app, integ, &req, &rest, tag, body).await {
                Ok(r) => r,
                Err(e) => {
                    let d = for_mcp(Decision::harness(e.clone()));
                    if let Err(r) =
                        record_event(&app, &attempt, &req, info, &d, 200, source.clone()).await
                    {
                        return to_http(r);
                    }
                    return mcp_response(harness_reply(&req.body, &e));
                }
            };
            let (mut parts, body) = resp.into_parts();
            crate::upstream::strip_response_headers(&mut parts.headers);
            let done = Arc::new(ToolDone {
                app: app.clone(),
                attempt: attempt.clone(),
                req: req.clone(),
                source: source.clone(),
                capture,
                status: parts.status.as_u16(),
                headers: parts.headers.clone(),
                id: id.clone(),
                name: name.clone(),
                arguments,
            });
            let out_body = if is_sse(&parts.headers) {
                relay(done, info, Bytes::new(), body)
            } else {
                match buffer(body, app.limits.max_body, app.limits.body_read_timeout).await {
                    Buffered::Complete(bytes) => {
                        let end = BodyEnd::complete(bytes.clone());
                        if let Err(r) = done.clone().finish(info, end).await {
                            return to_http(r);
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
                        let d = for_mcp(Decision::harness(h.clone()));
                        if let Err(r) =
                            record_event(&app, &attempt, &req, info, &d, 200, source).await
                        {
                            return to_http(r);
                        }
                        return mcp_response(harness_reply(&req.body, &h));
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
    }
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
    /// The mock answers (the replay pipeline's stages, as `crate::proxy::mcp` runs them).
    async fn mocked(
        &self,
        record: &AttemptRecord,
        op: Arc<Operation>,
        arguments: Value,
    ) -> HttpResponse {
        let mut info = CallInfo {
            execution_attempt_id: attempt::new_uuid(),
            integration: self.integ.name().to_string(),
            operation_id: Some(self.name.to_string()),
            is_write: write_flag(&op),
            arguments: arguments.clone(),
            idempotency_key_ref: None,
            trace_id: pipeline::trace_id(self.req),
        };
        let form = op.op.result_form.unwrap_or(ResultForm::Structured);
        let prepared = pipeline::prepare_operation(
            self.app,
            record,
            self.integ,
            op,
            Wire::Mcp,
            arguments,
            self.req,
            &mut info,
        );
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
            return to_http(response);
        }
        pipeline::delay(delay_ms).await;
        self.render(render_outcome(self.name, outcome, form, self.stateless))
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
        let mut d = local_decision(
            NativeResponse {
                status: 200,
                headers: Vec::new(),
                body: Some(result.clone()),
            },
            status,
        );
        d.result = result;
        if let Err(r) = record_event(
            self.app,
            self.attempt,
            self.req,
            info,
            &d,
            200,
            EventSource::Mock,
        )
        .await
        {
            return to_http(r);
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

/// The finishing of a forwarded `tools/call`: evidence and capture.
struct ToolDone {
    app: Arc<App>,
    attempt: Arc<Attempt>,
    req: Request,
    source: EventSource,
    capture: Option<Capture>,
    status: u16,
    headers: HeaderMap,
    id: Value,
    name: String,
    arguments: Value,
}

impl Finisher for ToolDone {
    fn finish(
        self: Arc<Self>,
        info: CallInfo,
        end: BodyEnd,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), NativeResponse>> + Send>>
    {
        Box::pin(async move {
            let answer = if end.complete && !end.truncated {
                messages(&self.headers, &end.bytes)
                    .into_iter()
                    .find(|m| m.get("id") == Some(&self.id) && m.get("method").is_none())
            } else {
                None
            };
            let outcome = answer.as_ref().and_then(|m| {
                m.get("result")
                    .cloned()
                    .map(ToolOutcome::Result)
                    .or_else(|| m.get("error").cloned().map(ToolOutcome::Error))
            });
            let mut result = match &outcome {
                Some(ToolOutcome::Result(r)) | Some(ToolOutcome::Error(r)) => r.clone(),
                None => http_result(self.status, &self.headers, &end),
            };
            scrub_value(&self.app, &self.req, &mut result);
            let d = forwarded_decision(result);
            record_event(
                &self.app,
                &self.attempt,
                &self.req,
                info,
                &d,
                self.status,
                self.source.clone(),
            )
            .await?;
            if let (Some(c), Some(outcome)) = (&self.capture, outcome) {
                keep_exchange(
                    &self.app,
                    Exchange {
                        integration: c.integration.clone(),
                        profile: c.profile,
                        matched_operation: c.matched_operation.clone(),
                        at_ms: c.order,
                        call: Call::Tool(ToolCall {
                            name: self.name.clone(),
                            arguments: self.arguments.clone(),
                            outcome,
                        }),
                    },
                );
            }
            Ok(())
        })
    }
}
