//! One `tools/call` at an MCP endpoint outside `replay` (the module doc of [`super::forward`]):
//! the plan of the mode ([`decision::plan_for`]) — the mock answers, or the call is forwarded
//! (tagged or not, captured in the record modes), blocked or simulated — and the evidence of
//! each.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use hyper::http::{HeaderMap, HeaderValue, Response};
use serde_json::{json, Map, Value};

use super::backend::{outcome_of, write_flag};
use super::body::mcp_response;
use super::forward::{call_info, forward_plain, messages, session_of, Keep, Sent};
use crate::app::attempt::Attempt;
use crate::app::{App, Integration};
use crate::author::record::{self, Ask, Call, Exchange, ToolCall, ToolOutcome};
use crate::contract::ResultForm;
use crate::error::{HarnessCode, HarnessError, InputError};
use crate::http::{full, is_sse, to_http, HttpResponse, Request};
use crate::operation::Operation;
use crate::profile::mcp::jsonrpc::Posted;
use crate::profile::mcp::tools::{render_outcome, tool_call_answer, CallAnswer};
use crate::profile::mcp::{blocked_result, harness_reply_to, simulated_result, ToolCallOutcome};
use crate::profile::NativeResponse;
use crate::proxy::call::{self, scrub, CallInfo};
use crate::proxy::decision::{self as decision, Decision, Plan, StoreFailed};
use crate::proxy::forward::capture::{http_result, keep_exchange, Capture};
use crate::proxy::forward::relay::{relay, BodyEnd, Finisher};
use crate::proxy::forward::send::{buffer, send_upstream, Buffered};
use crate::proxy::forward::{policy, MCP_TAG_KEY, SOURCE_HEADER};
use crate::records::{EventSource, ResultStatus};

/// One `tools/call` (module doc).
pub(super) async fn tools_call(
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
    let plan = decision::plan_for(&app, pinned, is_write, integ);
    if let (Plan::Mock, Some(op)) = (&plan, &op) {
        return call.mocked(op.clone(), arguments).await;
    }
    let form = match &op {
        Some(o) => o.op.result_form.unwrap_or(ResultForm::Structured),
        None => ResultForm::CallToolResult,
    };
    let mut info = call_info(&app, integ, &req, sent, arguments.clone());
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
        Err(e) => return done.failed(info, sent.posted, e).await,
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
                return done.failed(info, sent.posted, h).await;
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
    /// The mock answers (the call's stages, as the replay endpoint runs them).
    async fn mocked(&self, op: Arc<Operation>, arguments: Value) -> HttpResponse {
        let mut info = CallInfo::new(self.req, self.integ.name(), arguments.clone());
        info.operation_id = Some(self.name.to_string());
        info.is_write = write_flag(&op);
        let form = op.op.result_form.unwrap_or(ResultForm::Structured);
        let prepared = call::prepare_operation(
            self.app,
            &self.attempt.read_record(),
            self.integ,
            op,
            arguments,
            self.req,
            &mut info,
        );
        match call::run_mocked(self.app, self.attempt, info, prepared, outcome_of).await {
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
        if let Err(f) = call::record(self.app, self.attempt, info, d).await {
            return to_http(f.response);
        }
        // A blocked call renders as a tool error; a simulated one in the tool's form (a tool
        // the project does not know is answered as a whole CallToolResult).
        self.render(render_outcome(self.name, outcome, form, self.stateless))
    }

    /// The JSON-RPC answer, as JSON or as one SSE event (module doc), as the dialect renders
    /// it ([`tool_call_answer`]).
    fn render(&self, answer: CallAnswer) -> HttpResponse {
        mcp_response(tool_call_answer(
            self.id,
            answer,
            self.stateless,
            &format!("understudy-{}", self.integ.name()),
            &self.req.headers,
            self.integ.config.mcp_sse,
        ))
    }
}

impl ToolDone {
    /// The call got no answer from the real server: recorded as the harness error, answered
    /// as MCP answers it.
    async fn failed(&self, info: CallInfo, posted: &Posted, e: HarnessError) -> HttpResponse {
        let d = Decision::harness(e.clone())
            .for_mcp()
            .from(self.source.clone());
        if let Err(f) = call::record(&self.app, &self.attempt, info, d).await {
            return to_http(f.response);
        }
        mcp_response(harness_reply_to(posted, &e))
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
            call::record(&self.app, &self.attempt, info, d).await?;
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
