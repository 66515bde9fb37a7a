//! Reaching the real system (SPEC 4, 5.3, 7, 11): the call pipeline of every mode but
//! `replay`, for HTTP profiles here and for MCP endpoints in [`mcp`]; on-demand real calls in
//! `crate::admin::execute_upstream`; the capture of exchanges for drafts in
//! [`crate::app::recorder`].
//!
//! The server sends every proxied request here when the mode is not `replay`
//! ([`handle`]). What happens to a call (SPEC 4):
//!
//! | mode | operation with a pinned mock | anything else |
//! |---|---|---|
//! | `dry-run` | the mock answers (the replay pipeline) | reads forwarded; writes by the integration's `unmatched_writes` |
//! | `record` | forwarded and captured | forwarded and captured; writes blocked unless `--allow-writes` |
//! | `record-missing` | the mock answers | forwarded and captured; writes blocked unless `--allow-writes` |
//! | `passthrough` | forwarded | forwarded |
//!
//! "Anything else" is a request the replay pipeline would refuse with `unmatched_request` or
//! `no_mock` (no operation file matches, only a built-in template matches, the file has no
//! mock, or the attempt pinned none). Every other refusal stays what it is in `replay`: an
//! unknown token (401), a lease that is over, `stale_contract`, and — for mocked operations —
//! input errors. In `record` and `passthrough` the real system answers everything, so the
//! mock's input schema is not applied.
//!
//! **Writes** are classified as in replay: the profile's rules (read methods; Salesforce
//! `POST ?_HttpMethod=PATCH` is a PATCH; `composite`/`composite/batch` are writes when any
//! subrequest is not a GET, and when their body cannot be read), overridden by the matched
//! operation file's `write`. MCP: the operation's `write`, else its annotations, else the
//! annotations the real server advertised in a forwarded `tools/list`, else a write (fail
//! closed).
//!
//! **Unmatched writes in `dry-run`** (SPEC 5.3):
//! - `block`: the profile's native 403 (Salesforce `[{"message","errorCode":
//!   "INSUFFICIENT_ACCESS_OR_READONLY","fields":[]}]`, rest `{"error":{…}}`, MCP a tool result
//!   with `isError: true`); evidence `result_status: "blocked"`, `source: "mock"`.
//! - `simulate`: the profile's synthetic success (Salesforce create 201
//!   `{"id","success":true,"errors":[]}`, update/delete 204, rest POST 201 `{"id"}`, MCP a
//!   success result); `result_status: "simulated"`. The fake id is **deterministic**: SHA-256
//!   of the attempt's `test_run_id` (else its id), the integration and the number of simulated
//!   writes of the attempt so far — the same run with the same `test_run_id` gets the same
//!   ids in the same order. Salesforce ids are 18 characters with the sObject's key prefix
//!   (`001` Account, `003` Contact, `006` Opportunity, `00Q` Lead, `500` Case, … else `a00`)
//!   and the case-safe checksum; rest ids are UUID-shaped. A write the profile has no
//!   synthetic answer for is blocked.
//! - `tag`: forwarded with `Understudy-Source: tool_test` (and, for MCP, the body tag
//!   `params._meta["dev.understudy/source"] = "tool_test"`; the HTTP profiles have no body
//!   tag: Salesforce and generic REST bodies have no field a server would ignore);
//!   `result_status: "forwarded"`, `source: "tool_test"`.
//!
//! In `record`/`record-missing` a write without `--allow-writes` is blocked the same way
//! (403, `blocked`). Blocked, simulated and tagged calls are in `blocked_side_effects`.
//!
//! **Forwarding**: the request goes to the integration's `upstream` joined with the path after
//! `/~<token>/<integration>` (through the forward proxy: the path relative to the upstream's
//! base), with the agent's headers minus `Understudy-*` and hop-by-hop ones
//! ([`crate::upstream::prepare_forward`]). The answer keeps the real status and headers (hop-by-hop
//! ones removed) and gains `Understudy-Source: upstream` (or `tool_test`). An upstream that
//! gives no answer (refused, DNS, TLS, timeout — 30 s for the response head by default) is
//! the harness error `upstream_unavailable` (HTTP 500, SPEC 5.3), recorded like any other.
//! An integration without `upstream` answers the same harness error for calls it would
//! forward.
//!
//! **Bodies and evidence** (decisions): a response that is not `text/event-stream` is read
//! whole (up to the request body limit, 10 MiB, and for at most the body read timeout), then
//! its evidence is written, then it is answered — the replay rule "evidence before the
//! answer" holds. An SSE response, or one larger or slower than that, is streamed frame by
//! frame as the upstream sends it (the first event reaches the agent before the upstream
//! finishes); its evidence is written when the upstream ends the stream and **before the
//! end of the stream is passed on** (the status line and the events went first; if the
//! agent drops the stream, the evidence is still written with what was seen). Evidence
//! `result` is the native envelope `{"status","data"}`: `data` is the JSON body (text as a
//! string) when it is at most [`EVIDENCE_BODY_LIMIT`] (256 KiB), an SSE stream's event data
//! as `{"events":[…]}`, else the summary `{"bytes":n,"content_type":…,"complete":bool}`;
//! MCP `tools/call`: the JSON-RPC `result` (or `error`) of the call. `arguments` is the
//! mock pipeline's input when an operation matched, else `{"method","path","query","body"}`.
//! Both are scrubbed ([`crate::record::scrub_json`] plus the project's `scrub.fields`), and
//! every secret header value the agent sent (`Authorization`, cookies, API keys) is cut out
//! of every string in them, so a credential echoed by the upstream does not reach the store.
//! A body error after the head was relayed ends the stream early (the agent sees a short or
//! broken body); it is noted in the event's data (`complete: false`).
//!
//! **Recording** (`record`, `record-missing`): every forwarded call that got a complete
//! answer becomes a [`crate::record::Exchange`] (scrubbed before it is kept) in arrival
//! order; blocked writes and failed calls are not captured.

pub mod mcp;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::http::{HeaderMap, HeaderValue, Method, Response};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;

use super::pipeline::{self, CallInfo, Decision};
use super::route;
use crate::app::{App, Integration};
use crate::attempt::{self, Attempt};
use crate::config::{Mode, UnmatchedWrites};
use crate::error::{CallError, HarnessCode, HarnessError};
use crate::http::{full, is_sse, to_http, HttpBody, HttpResponse, Request};
use crate::profile::{NativeResponse, Profile};
use crate::record::{self, Call, Exchange, HttpCall};
use crate::records::{AttemptRecord, EventSource, ResultStatus};
use crate::store::CallRecord;
use crate::upstream;

/// Bodies up to this size are kept in evidence; larger ones are summarized.
pub const EVIDENCE_BODY_LIMIT: usize = 256 * 1024;

/// A streamed body is copied (for evidence and drafts) up to this many bytes.
pub const CAPTURE_LIMIT: usize = 10 * 1024 * 1024;

/// The response header naming who answered a forwarded call.
pub const SOURCE_HEADER: &str = "understudy-source";

/// The MCP body tag of a tagged write: `params._meta[MCP_TAG_KEY] = "tool_test"`.
pub const MCP_TAG_KEY: &str = "dev.understudy/source";

/// Answer one proxied request in a mode other than `replay` (module doc).
pub async fn handle(app: Arc<App>, req: Request) -> HttpResponse {
    if super::mcp::is_endpoint(&app, &req) {
        return mcp::handle(app, req).await;
    }
    http_call(app, req).await
}

/// What to do with a call that no mock answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Forward { tag: bool, capture: bool },
    Block,
    Simulate,
}

/// The mode's rule for a call without a mock (module doc).
pub(crate) fn action_for(app: &App, is_write: bool, unmatched_writes: UnmatchedWrites) -> Action {
    match app.mode {
        Mode::DryRun if is_write => match unmatched_writes {
            UnmatchedWrites::Block => Action::Block,
            UnmatchedWrites::Simulate => Action::Simulate,
            UnmatchedWrites::Tag => Action::Forward {
                tag: true,
                capture: false,
            },
        },
        Mode::Record | Mode::RecordMissing if is_write && !app.forwarding.allow_writes => {
            Action::Block
        }
        Mode::Record | Mode::RecordMissing => Action::Forward {
            tag: false,
            capture: true,
        },
        _ => Action::Forward {
            tag: false,
            capture: false,
        },
    }
}

/// Why a write was blocked, in words the agent (and the log) can act on.
pub(crate) fn blocked_message(app: &App, integration: &str, what: &str) -> String {
    match app.mode {
        Mode::DryRun => format!(
            "understudy blocked this write: {what} has no mock, and in dry-run mode writes never reach the real system (integrations.{integration}.unmatched_writes is `block`; `simulate` answers a synthetic success, `tag` forwards it marked as test traffic)"
        ),
        _ => format!(
            "understudy blocked this write: {what} would change the real system, and `{}` mode blocks writes unless started with --allow-writes",
            app.mode
        ),
    }
}

/// A request the replay pipeline refused only because no mock answers it.
fn is_unmocked(d: &Decision) -> bool {
    matches!(&d.error, Some(CallError::Harness(e)) if matches!(e.code, HarnessCode::UnmatchedRequest | HarnessCode::NoMock))
}

/// The call matched an operation file the attempt pinned a mock of (so its refusals —
/// input errors, `stale_contract` — are the mock's to give).
fn has_mock(attempt: &Attempt, integ: &Integration, info: &CallInfo) -> bool {
    let record = attempt.read_record(); // borrowed: one pin per operation, not copied per call
    info.operation_id
        .as_deref()
        .and_then(|id| integ.operation(id))
        .is_some_and(|op| record.pins.contains_key(&op.key()))
}

fn is_lease(d: &Decision) -> bool {
    matches!(&d.error, Some(CallError::Harness(e)) if e.code == HarnessCode::LeaseExpired)
}

/// The call pipeline of an HTTP profile outside `replay` (module doc).
async fn http_call(app: Arc<App>, req: Request) -> HttpResponse {
    let (attempt, consumed) = match route::attempt(&app, &req) {
        Ok(x) => x,
        Err(r) => return to_http(pipeline::refusal(r)),
    };
    let integ = req
        .segments
        .get(consumed)
        .and_then(|n| app.integration_for(&attempt, n))
        .filter(|i| i.profile.is_some())
        .cloned();
    let Some(integ) = integ else {
        // No HTTP integration: the replay pipeline names the problem.
        return to_http(pipeline::handle(&app, req).await);
    };
    let profile = integ.profile.clone().expect("filtered on profile");
    let mut info = CallInfo {
        execution_attempt_id: attempt::new_uuid(),
        integration: integ.name().to_string(),
        operation_id: None,
        is_write: false,
        arguments: req.describe(),
        idempotency_key_ref: None,
        trace_id: pipeline::trace_id(&req),
    };
    let uses_mocks = matches!(app.mode, Mode::DryRun | Mode::RecordMissing);
    match pipeline::prepare(&app, &attempt, consumed, &req, &mut info) {
        Ok(p) if uses_mocks => {
            // The replay pipeline, as `pipeline::handle` runs it.
            let mut guard = attempt.lock.lock().await;
            let _row = crate::attempt::lock_in_store(&app.store, &attempt.id, &mut guard).await;
            let d = pipeline::evaluate(&mut guard, &p).at(Some(p.revision), p.variant.clone());
            let (response, delay_ms) =
                pipeline::record_evidence(&app, &attempt, guard, &req, info, d).await;
            pipeline::delay(delay_ms).await;
            return to_http(response);
        }
        Ok(_) => {}
        Err(d)
            if is_lease(&d)
                || (uses_mocks && has_mock(&attempt, &integ, &info) && !is_unmocked(&d)) =>
        {
            let guard = attempt.lock.lock().await;
            let (response, _) =
                pipeline::record_evidence(&app, &attempt, guard, &req, info, d).await;
            return to_http(response);
        }
        // `record`/`passthrough`: the real system answers whatever the mocks would say;
        // dry-run/record-missing: nothing mocked answers this call.
        Err(_) => {}
    }
    // Arguments as prepared (the input when an operation matched), scrubbed below.
    let what = format!("{} {}", req.method, path_only(&req));
    match action_for(&app, info.is_write, integ.config.unmatched_writes) {
        Action::Block => {
            let msg = blocked_message(&app, integ.name(), &what);
            tracing::info!(integration = %integ.name(), operation = info.operation_id.as_deref().unwrap_or(""), "write blocked: {what}");
            let response = profile.blocked_write(&msg);
            let d = local_decision(response, ResultStatus::Blocked);
            answer_local(&app, &attempt, &req, info, d).await
        }
        Action::Simulate => {
            let mut q = req.query.clone();
            let method = profile.effective_method(&req.method, &mut q);
            let rel = &req.segments[(consumed + 1).min(req.segments.len())..];
            let n = app.forwarding.next_simulated(&attempt.id);
            let fake = fake_id(&profile, &attempt.record(), integ.name(), n, rel);
            match profile
                .simulate_with_id(info.operation_id.as_deref(), &method, &fake)
                .map(|env| profile.render(&env).map(|r| (env, r)))
            {
                Some(Ok((env, response))) => {
                    let mut d = local_decision(response, ResultStatus::Simulated);
                    d.result = env;
                    answer_local(&app, &attempt, &req, info, d).await
                }
                _ => {
                    let msg = format!(
                        "understudy blocked this write: {what} has no mock and the `{}` profile has no synthetic answer for it (unmatched_writes `simulate`)",
                        profile.name()
                    );
                    let d = local_decision(profile.blocked_write(&msg), ResultStatus::Blocked);
                    answer_local(&app, &attempt, &req, info, d).await
                }
            }
        }
        Action::Forward { tag, capture } => {
            let rest = rest_of(&req, consumed);
            let capture = capture.then(|| Capture {
                integration: integ.name().to_string(),
                profile: integ.config.profile,
                matched_operation: info
                    .operation_id
                    .clone()
                    .filter(|id| integ.operation(id).is_some()),
                order: app.forwarding.next_order(),
                path: rest.split('?').next().unwrap_or("").to_string(),
            });
            forward_http(app.clone(), attempt, req, info, &integ, rest, tag, capture).await
        }
    }
}

/// A decision answered by understudy itself (blocked or simulated write).
pub(crate) fn local_decision(response: NativeResponse, status: ResultStatus) -> Decision {
    Decision {
        result: response.to_envelope(),
        response,
        result_status: status,
        error: None,
        revision: None,
        variant: None,
        rule: None,
        delay_ms: 0,
        new_state: None,
        remember: None,
    }
}

/// Record a locally decided call (`source: "mock"`) and answer it.
async fn answer_local(
    app: &App,
    attempt: &Attempt,
    req: &Request,
    info: CallInfo,
    d: Decision,
) -> HttpResponse {
    let status = d.response.status;
    let response = d.response.clone();
    match record_event(app, attempt, req, info, &d, status, EventSource::Mock).await {
        Ok(_) => to_http(response),
        Err(r) => to_http(r),
    }
}

/// The raw path of a request (no query), for messages and logs (queries may hold secrets).
fn path_only(req: &Request) -> &str {
    &req.path
}

/// The path and query to join to the integration's `upstream`: what follows `/~<token>` and
/// `/<integration>` (escapes kept), or, through the forward proxy, the path relative to the
/// upstream's base.
pub fn rest_of(req: &Request, consumed: usize) -> String {
    if let Some(v) = &req.via_proxy {
        return v.rest.clone();
    }
    let mut rest = skip_segments(&req.path, consumed + 1);
    if let Some(q) = &req.raw_query {
        rest.push('?');
        rest.push_str(q);
    }
    rest
}

/// `path` without its first `n` non-empty segments, keeping the rest as written
/// (`/~t/crm/a//b/`, 2 → `/a//b/`; `/crm`, 1 → ``).
pub fn skip_segments(path: &str, n: usize) -> String {
    let mut rest = path;
    for _ in 0..n {
        rest = rest.trim_start_matches('/');
        rest = match rest.find('/') {
            Some(i) => &rest[i..],
            None => "",
        };
    }
    rest.to_string()
}

/// What a recorded call needs besides the request and the response.
#[derive(Debug, Clone)]
pub(crate) struct Capture {
    pub integration: String,
    pub profile: crate::config::ProfileKind,
    pub matched_operation: Option<String>,
    pub order: u64,
    /// The raw path after the integration prefix (no query).
    pub path: String,
}

/// The end of a relayed body.
#[derive(Debug, Clone)]
pub struct BodyEnd {
    /// The first bytes of the body (up to the capture limit).
    pub bytes: Bytes,
    /// Every byte that went through.
    pub total: u64,
    pub truncated: bool,
    /// The upstream ended the body normally.
    pub complete: bool,
    pub error: Option<String>,
}

impl BodyEnd {
    /// A body read whole and ended normally (small enough to keep in full).
    pub(crate) fn complete(bytes: Bytes) -> BodyEnd {
        BodyEnd {
            total: bytes.len() as u64,
            bytes,
            truncated: false,
            complete: true,
            error: None,
        }
    }
}

/// Forward one HTTP-profile call and answer with the real response (module doc).
#[allow(clippy::too_many_arguments)]
async fn forward_http(
    app: Arc<App>,
    attempt: Arc<Attempt>,
    req: Request,
    mut info: CallInfo,
    integ: &Integration,
    rest: String,
    tag: bool,
    capture: Option<Capture>,
) -> HttpResponse {
    let source = if tag {
        EventSource::ToolTest
    } else {
        EventSource::Upstream
    };
    scrub_arguments(&app, &req, &mut info.arguments);
    let upstream_resp = match send_upstream(&app, integ, &req, &rest, tag, req.body.clone()).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(integration = %integ.name(), "{}", e.message);
            let d = Decision::harness(e);
            let status = d.response.status;
            let resp = d.response.clone();
            return match record_event(&app, &attempt, &req, info, &d, status, source.clone()).await
            {
                Ok(_) => to_http(resp),
                Err(r) => to_http(r),
            };
        }
    };
    let (mut parts, body) = upstream_resp.into_parts();
    upstream::strip_response_headers(&mut parts.headers);
    let status = parts.status.as_u16();
    let headers = parts.headers.clone();
    let ctx = Arc::new(HttpDone {
        app: app.clone(),
        attempt,
        req,
        source: source.clone(),
        capture,
        status,
        headers: headers.clone(),
    });
    let body_out = if is_sse(&headers) {
        relay(ctx, info, Bytes::new(), body)
    } else {
        match buffer(body, app.limits.max_body, app.limits.body_read_timeout).await {
            Buffered::Complete(bytes) => {
                let end = BodyEnd::complete(bytes.clone());
                if let Err(r) = ctx.clone().finish(info, end).await {
                    return to_http(r);
                }
                full(bytes)
            }
            Buffered::Partial { prefix, rest } => relay(ctx, info, prefix, rest),
            Buffered::Failed(e) => {
                let h = HarnessError::new(
                    HarnessCode::UpstreamUnavailable,
                    format!(
                        "upstream {} failed while sending its response body: {e}",
                        upstream_host(integ)
                    ),
                );
                let d = Decision::harness(h);
                let resp = d.response.clone();
                return match record_event(
                    &ctx.app,
                    &ctx.attempt,
                    &ctx.req,
                    info,
                    &d,
                    500,
                    ctx.source.clone(),
                )
                .await
                {
                    Ok(_) => to_http(resp),
                    Err(r) => to_http(r),
                };
            }
        }
    };
    let mut out = Response::new(body_out);
    *out.status_mut() = parts.status;
    *out.headers_mut() = headers;
    out.headers_mut().insert(
        SOURCE_HEADER,
        HeaderValue::from_static(source_value(&source)),
    );
    out
}

fn source_value(source: &EventSource) -> &'static str {
    if *source == EventSource::ToolTest {
        "tool_test"
    } else {
        "upstream"
    }
}

fn upstream_host(integ: &Integration) -> String {
    integ
        .config
        .upstream
        .as_deref()
        .and_then(|u| u.parse::<hyper::Uri>().ok())
        .and_then(|u| u.authority().map(|a| a.to_string()))
        .unwrap_or_else(|| integ.config.upstream.clone().unwrap_or_default())
}

/// Send the request upstream (`Understudy-Source: tool_test` added when `tag`); the harness
/// error `upstream_unavailable` when there is no upstream or it does not answer.
pub(crate) async fn send_upstream(
    app: &App,
    integ: &Integration,
    req: &Request,
    rest: &str,
    tag: bool,
    body: Bytes,
) -> Result<Response<Incoming>, HarnessError> {
    let Some(base) = integ.config.upstream.as_deref() else {
        return Err(HarnessError::new(
            HarnessCode::UpstreamUnavailable,
            format!(
                "integration `{}` has no `upstream` in understudy.json (integrations.{}.upstream), so {} mode cannot forward {} {}",
                integ.name(),
                integ.name(),
                app.mode,
                req.method,
                req.path
            ),
        ));
    };
    let method = Method::from_bytes(req.method.as_bytes()).unwrap_or(Method::GET);
    let mut p =
        upstream::prepare_forward(&method, base, rest, &req.headers).map_err(|e| e.to_harness())?;
    if tag {
        p.headers
            .insert(SOURCE_HEADER, HeaderValue::from_static("tool_test"));
    }
    app.forwarding
        .upstream
        .forward(p.into_request(body))
        .await
        .map_err(|e| e.to_harness())
}

/// What reading a response body into memory came to.
pub(crate) enum Buffered {
    Complete(Bytes),
    /// Larger than the limit, or slower than the deadline: stream `prefix` then `rest`.
    Partial {
        prefix: Bytes,
        rest: Incoming,
    },
    Failed(String),
}

/// Read a body whole if it ends within `limit` bytes and `deadline`.
pub(crate) async fn buffer(mut body: Incoming, limit: usize, deadline: Duration) -> Buffered {
    let until = tokio::time::Instant::now() + deadline;
    let mut buf = BytesMut::new();
    loop {
        match tokio::time::timeout_at(until, body.frame()).await {
            Err(_) => {
                return Buffered::Partial {
                    prefix: buf.freeze(),
                    rest: body,
                }
            }
            Ok(None) => return Buffered::Complete(buf.freeze()),
            Ok(Some(Err(e))) => return Buffered::Failed(e.to_string()),
            Ok(Some(Ok(frame))) => {
                if let Ok(d) = frame.into_data() {
                    buf.extend_from_slice(&d);
                    if buf.len() > limit {
                        return Buffered::Partial {
                            prefix: buf.freeze(),
                            rest: body,
                        };
                    }
                }
            }
        }
    }
}

/// Something that finishes a relayed call when its body ends (evidence, capture).
pub(crate) trait Finisher: Send + Sync + 'static {
    /// Write what the call came to. `Err` is the answer to send instead (a store failure),
    /// when the answer was not sent yet.
    fn finish(
        self: Arc<Self>,
        info: CallInfo,
        end: BodyEnd,
    ) -> Pin<Box<dyn Future<Output = Result<(), NativeResponse>> + Send>>;

    /// Called after each data frame with everything captured so far, before the frame is
    /// passed on (a `tools/list` is learned before the agent can act on it).
    fn on_data(&self, _captured: &[u8]) {}
}

/// Stream `prefix` then `rest` to the agent; when the upstream ends, `done` runs before the
/// end of the stream is passed on (module doc).
pub(crate) fn relay(
    done: Arc<dyn Finisher>,
    info: CallInfo,
    prefix: Bytes,
    rest: Incoming,
) -> HttpBody {
    let limit = CAPTURE_LIMIT;
    let mut buf = BytesMut::new();
    let take = prefix.len().min(limit);
    buf.extend_from_slice(&prefix[..take]);
    Relay {
        total: prefix.len() as u64,
        truncated: prefix.len() > limit,
        prefix: (!prefix.is_empty()).then_some(prefix),
        inner: rest,
        buf,
        limit,
        finisher: Some((done, info)),
        finishing: None,
        done: false,
    }
    .boxed()
}

/// The relayed body (see [`relay`]).
struct Relay {
    prefix: Option<Bytes>,
    inner: Incoming,
    buf: BytesMut,
    limit: usize,
    total: u64,
    truncated: bool,
    finisher: Option<(Arc<dyn Finisher>, CallInfo)>,
    finishing: Option<JoinHandle<Result<(), NativeResponse>>>,
    done: bool,
}

impl Relay {
    fn end(&mut self, complete: bool, error: Option<String>) {
        if let Some((f, info)) = self.finisher.take() {
            let end = BodyEnd {
                bytes: std::mem::take(&mut self.buf).freeze(),
                total: self.total,
                truncated: self.truncated,
                complete,
                error,
            };
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                self.finishing = Some(rt.spawn(f.finish(info, end)));
            }
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // The agent went away before the end: the evidence is still written.
        self.end(false, Some("the agent closed the stream early".into()));
    }
}

impl Body for Relay {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        loop {
            if let Some(h) = &mut this.finishing {
                return match Pin::new(h).poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(r) => {
                        if let Ok(Err(resp)) = r {
                            tracing::error!(
                                status = resp.status,
                                "the evidence of a streamed call could not be written"
                            );
                        }
                        this.finishing = None;
                        this.done = true;
                        Poll::Ready(None)
                    }
                };
            }
            if this.done {
                return Poll::Ready(None);
            }
            if let Some(p) = this.prefix.take() {
                return Poll::Ready(Some(Ok(Frame::data(p))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some(d) = frame.data_ref() {
                        this.total += d.len() as u64;
                        let room = this.limit.saturating_sub(this.buf.len());
                        if d.len() > room {
                            this.truncated = true;
                        }
                        this.buf.extend_from_slice(&d[..d.len().min(room)]);
                        if let Some((f, _)) = &this.finisher {
                            f.on_data(&this.buf);
                        }
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                Poll::Ready(Some(Err(e))) => {
                    this.end(false, Some(e.to_string()));
                    if this.finishing.is_none() {
                        this.done = true;
                    }
                }
                Poll::Ready(None) => {
                    this.end(true, None);
                    if this.finishing.is_none() {
                        this.done = true;
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

/// The finishing of a forwarded HTTP-profile call.
struct HttpDone {
    app: Arc<App>,
    attempt: Arc<Attempt>,
    req: Request,
    source: EventSource,
    capture: Option<Capture>,
    status: u16,
    headers: HeaderMap,
}

impl Finisher for HttpDone {
    fn finish(
        self: Arc<Self>,
        info: CallInfo,
        end: BodyEnd,
    ) -> Pin<Box<dyn Future<Output = Result<(), NativeResponse>> + Send>> {
        Box::pin(async move {
            let mut result = http_result(self.status, &self.headers, &end);
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
            if let Some(c) = &self.capture {
                if end.complete && !end.truncated {
                    let ex = http_exchange(c, &self.req, self.status, &self.headers, &end.bytes);
                    keep_exchange(&self.app, ex);
                } else {
                    tracing::warn!(integration = %c.integration, "record: a response that was not received whole is not captured");
                }
            }
            Ok(())
        })
    }
}

/// A forwarded call's decision: the real answer as `result`.
pub(crate) fn forwarded_decision(result: Value) -> Decision {
    Decision {
        response: NativeResponse {
            status: 200,
            headers: Vec::new(),
            body: None,
        },
        result,
        result_status: ResultStatus::Forwarded,
        error: None,
        revision: None,
        variant: None,
        rule: None,
        delay_ms: 0,
        new_state: None,
        remember: None,
    }
}

/// The envelope of a real response for evidence (module doc).
pub(crate) fn http_result(status: u16, headers: &HeaderMap, end: &BodyEnd) -> Value {
    let mut m = Map::new();
    m.insert("status".into(), json!(status));
    if end.total > 0 || !end.complete {
        m.insert("data".into(), body_summary(headers, end));
    }
    Value::Object(m)
}

fn body_summary(headers: &HeaderMap, end: &BodyEnd) -> Value {
    let ct = headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let summary = || json!({"bytes": end.total, "content_type": ct, "complete": end.complete});
    if !end.complete || end.truncated || end.total as usize > EVIDENCE_BODY_LIMIT {
        return summary();
    }
    if is_sse(headers) {
        let events: Vec<Value> = crate::profile::mcp::sse::parse_events(&end.bytes)
            .into_iter()
            .map(|(_, data)| serde_json::from_str(&data).unwrap_or(Value::String(data)))
            .collect();
        return json!({ "events": events });
    }
    record::parse_body(&end.bytes).unwrap_or_else(summary)
}

/// The exchange of a forwarded HTTP call.
fn http_exchange(
    c: &Capture,
    req: &Request,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
) -> Exchange {
    Exchange {
        integration: c.integration.clone(),
        profile: c.profile,
        matched_operation: c.matched_operation.clone(),
        at_ms: c.order,
        call: Call::Http(HttpCall {
            method: req.method.clone(),
            path: c.path.clone(),
            query: req.query.clone(),
            request_headers: header_pairs(&req.headers),
            request_body: record::parse_body(&req.body),
            status,
            response_headers: header_pairs(headers),
            response_body: record::parse_body(body),
        }),
    }
}

pub(crate) fn header_pairs(h: &HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// Scrub an exchange and keep it for the drafts.
pub(crate) fn keep_exchange(app: &App, mut ex: Exchange) {
    record::scrub_exchange(&mut ex, &app.config.scrub);
    app.forwarding.recorder.push(ex);
}

/// The secret values a request carries, at least 8 characters long: secret headers (whole,
/// and the credential after a scheme such as `Bearer `; each cookie value), secret query
/// parameters and secret fields of a JSON body (the denylist of [`crate::record::scrub`] plus
/// the project's `scrub`).
pub(crate) fn secret_values(app: &App, req: &Request) -> Vec<String> {
    let mut out = Vec::new();
    let fields = &app.config.scrub.fields;
    for (k, v) in &req.query {
        if record::is_secret_field(k, fields) && v.len() >= 8 {
            out.push(v.clone());
        }
    }
    if let Ok(Some(body)) = req.json_body() {
        secret_fields(&body, fields, &mut out);
    }
    for (k, v) in &req.headers {
        if !record::is_secret_header(k.as_str(), &app.config.scrub.headers) {
            continue;
        }
        let Ok(v) = v.to_str() else { continue };
        let v = v.trim();
        for part in std::iter::once(v).chain(v.split_once(' ').map(|(_, t)| t.trim())) {
            if part.len() >= 8 && !out.iter().any(|o| o == part) {
                out.push(part.to_string());
            }
        }
        // Cookies: each value.
        if k == hyper::header::COOKIE {
            for c in v.split(';') {
                if let Some((_, val)) = c.split_once('=') {
                    let val = val.trim();
                    if val.len() >= 8 {
                        out.push(val.to_string());
                    }
                }
            }
        }
    }
    // Longest first, so a value containing another is cut whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// The values of secret fields anywhere in `v`.
fn secret_fields(v: &Value, fields: &[String], out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if record::is_secret_field(k, fields) {
                    let text = match x {
                        Value::String(s) => s.clone(),
                        Value::Null => continue,
                        other => other.to_string(),
                    };
                    if text.len() >= 8 {
                        out.push(text);
                    }
                } else {
                    secret_fields(x, fields, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| secret_fields(x, fields, out)),
        _ => {}
    }
}

/// Cut every occurrence of `secrets` out of every string (keys included) of `v`.
pub(crate) fn cut_secrets(v: &mut Value, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    let cut = |s: &str| -> Option<String> {
        let mut out = s.to_string();
        let mut changed = false;
        for sec in secrets {
            if out.contains(sec.as_str()) {
                out = out.replace(sec.as_str(), record::SCRUBBED);
                changed = true;
            }
        }
        changed.then_some(out)
    };
    match v {
        Value::String(s) => {
            if let Some(n) = cut(s) {
                *s = n;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| cut_secrets(x, secrets)),
        Value::Object(m) => {
            let old = std::mem::take(m);
            for (k, mut x) in old {
                cut_secrets(&mut x, secrets);
                m.insert(cut(&k).unwrap_or(k), x);
            }
        }
        _ => {}
    }
}

/// Scrub a value for evidence: secret fields, then the request's secret header values.
pub(crate) fn scrub_value(app: &App, req: &Request, v: &mut Value) {
    record::scrub_json(v, &app.config.scrub.fields);
    cut_secrets(v, &secret_values(app, req));
}

fn scrub_arguments(app: &App, req: &Request, v: &mut Value) {
    scrub_value(app, req, v);
}

/// Write one event of a call decided here (forwarded, blocked, simulated, or failed to
/// forward), under the attempt's state lock. `Err` is the 500 to answer when the store
/// refused it (an unrecorded call is never answered as a success).
pub(crate) async fn record_event(
    app: &App,
    attempt: &Attempt,
    req: &Request,
    mut info: CallInfo,
    d: &Decision,
    http_status: u16,
    source: EventSource,
) -> Result<u64, NativeResponse> {
    scrub_value(app, req, &mut info.arguments);
    let (event, latency_ms) =
        pipeline::tool_event(app, req, &mut info, d, http_status, source.clone());
    let op_name = info.operation_id.as_deref().unwrap_or("");
    // As the replay pipeline: written under the state lock, durable after it is released.
    let guard = attempt.lock.lock().await;
    let written = app
        .store
        .write_call(&attempt.id, CallRecord { event, state: None });
    drop(guard);
    let durable = match written {
        Ok(seq) => app.store.wait_durable().await.map(|()| seq),
        Err(e) => Err(e),
    };
    match durable {
        Ok(seq) => {
            app.metrics.observe(
                &info.integration,
                op_name,
                d.result_status.as_str(),
                latency_ms,
            );
            match &d.error {
                Some(CallError::Harness(e)) => tracing::warn!(
                    attempt = %attempt.id, sequence = seq, integration = %info.integration,
                    operation = op_name, code = %e.code, "harness error: {}", e.message
                ),
                _ => tracing::debug!(
                    attempt = %attempt.id, sequence = seq, integration = %info.integration,
                    operation = op_name, status = http_status, result_status = d.result_status.as_str(),
                    source = source.as_str(), "call"
                ),
            }
            Ok(seq)
        }
        Err(e) => {
            tracing::error!(attempt = %attempt.id, error = %e, "cannot record the call's evidence");
            attempt
                .store_failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            app.metrics
                .observe(&info.integration, op_name, "store_error", latency_ms);
            Err(NativeResponse {
                status: 500,
                headers: vec![("Understudy-Error".into(), "store_error".into())],
                body: Some(json!({ "understudy_error": {
                    "kind": "internal_error",
                    "code": "store_error",
                    "message": format!("the call could not be recorded, so it was not answered: {e}"),
                }})),
            })
        }
    }
}

/// The deterministic fake id of the `n`-th simulated write of an attempt (module doc).
/// `segments`: the request's path relative to the integration (for the sObject name).
pub fn fake_id(
    profile: &Profile,
    attempt: &AttemptRecord,
    integration: &str,
    n: u64,
    segments: &[String],
) -> String {
    let run = attempt
        .test_run_id
        .as_deref()
        .unwrap_or(&attempt.attempt_id);
    let digest =
        Sha256::digest(format!("understudy-simulate\0{run}\0{integration}\0{n}").as_bytes());
    let h: &[u8] = digest.as_slice();
    if profile.name() == "salesforce" {
        let mut body = [0u8; 12];
        body.copy_from_slice(&h[..12]);
        return crate::profile::salesforce::record_id(
            crate::profile::salesforce::key_prefix_of_path(segments),
            &body,
        );
    }
    let mut b = [0u8; 16];
    b.copy_from_slice(&h[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let x = attempt::hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &x[..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_skipped_as_written() {
        assert_eq!(skip_segments("/~t/crm/a//b/", 2), "/a//b/");
        assert_eq!(skip_segments("/crm", 1), "");
        assert_eq!(skip_segments("/crm/", 1), "/");
        assert_eq!(skip_segments("//crm/x%2Fy", 1), "/x%2Fy");
    }

    #[test]
    fn fake_ids_are_deterministic_and_well_formed() {
        let sf = Profile::builtin("salesforce").unwrap();
        let new = attempt::NewAttempt {
            token: Some("tok"),
            test_run_id: Some("run-1".into()),
            ..attempt::NewAttempt::default()
        };
        let rec = attempt::new_record(chrono::Utc::now(), new);
        let segs: Vec<String> = ["services", "data", "v60.0", "sobjects", "Contact"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let a = fake_id(&sf, &rec, "crm", 1, &segs);
        assert_eq!(a.len(), 18);
        assert!(a.starts_with("003"), "{a}");
        assert_eq!(crate::profile::salesforce::to_18(&a[..15]), a);
        assert_eq!(a, fake_id(&sf, &rec, "crm", 1, &segs));
        assert_ne!(a, fake_id(&sf, &rec, "crm", 2, &segs));
        assert!(fake_id(&sf, &rec, "crm", 1, &[]).starts_with("a00"));
        let rest = Profile::builtin("rest").unwrap();
        let u = fake_id(&rest, &rec, "api", 1, &[]);
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }

    #[test]
    fn secrets_are_cut_from_every_string() {
        let mut v =
            json!({"a": "x Bearer-tok-123456 y", "Bearer-tok-123456": [1, "Bearer-tok-123456"]});
        cut_secrets(&mut v, &["Bearer-tok-123456".to_string()]);
        assert!(!v.to_string().contains("tok-123456"), "{v}");
    }
}
