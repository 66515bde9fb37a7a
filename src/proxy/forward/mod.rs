//! Reaching the real system (docs/src/reference/modes.md, docs/src/concepts/errors.md, docs/src/guides/record.md, docs/src/reference/https.md): carrying out every [`Plan`] but
//! [`Plan::Mock`] — forwarded, tagged, blocked, simulated — for HTTP profiles here ([`run`])
//! and for MCP endpoints in `crate::proxy::mcp::forward`; on-demand real calls are `crate::admin::execute_upstream`,
//! the drafts of captured exchanges [`crate::app::recorder`]. No second pipeline: routing,
//! the plan and the commit are `super::call`'s stages.
//!
//! | module | owns |
//! |---|---|
//! | [`policy`] | the mode's rule for an unmocked call, blocked-write messages, fake ids |
//! | [`send`] | the upstream URL, sending, reading a small answer whole |
//! | [`relay`] | streaming a large or SSE answer, finishing the call at its end |
//! | [`capture`] | evidence results, secret scrubbing, exchanges for drafts |
//!
//! What happens to a call ([`crate::proxy::call::plan`], the mode rule
//! [`crate::proxy::decision::plan_for`], docs/src/reference/modes.md):
//!
//! | mode | operation with a pinned mock | anything else |
//! |---|---|---|
//! | `dry-run` | the mock answers | reads forwarded; writes by the integration's `unmatched_writes` |
//! | `record` | forwarded and captured | forwarded and captured; writes blocked unless `--allow-writes` |
//! | `record-missing` | the mock answers | forwarded and captured; writes blocked unless `--allow-writes` |
//! | `passthrough` | forwarded | forwarded |
//!
//! "Anything else" is a request the mock would refuse with `unmatched_request` or
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
//! **Unmatched writes in `dry-run`** (docs/src/concepts/errors.md):
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
//! the harness error `upstream_unavailable` (HTTP 500, docs/src/concepts/errors.md), recorded like any other.
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
//! string) when it is at most [`capture::EVIDENCE_BODY_LIMIT`] (256 KiB), an SSE stream's event data
//! as `{"events":[…]}`, else the summary `{"bytes":n,"content_type":…,"complete":bool}`;
//! MCP `tools/call`: the JSON-RPC `result` (or `error`) of the call. `arguments` is the
//! mock pipeline's input when an operation matched, else `{"method","path","query","body"}`.
//! Both are scrubbed ([`crate::author::record::scrub_json`] plus the project's `scrub.fields`), and
//! every secret header value the agent sent (`Authorization`, cookies, API keys) is cut out
//! of every string in them, so a credential echoed by the upstream does not reach the store.
//! A body error after the head was relayed ends the stream early (the agent sees a short or
//! broken body); it is noted in the event's data (`complete: false`).
//!
//! **Recording** (`record`, `record-missing`): every forwarded call that got a complete
//! answer becomes a [`crate::author::record::Exchange`] (scrubbed before it is kept) in arrival
//! order; blocked writes and failed calls are not captured.

pub mod capture;
pub mod policy;
pub mod relay;
pub mod send;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use hyper::http::{HeaderMap, HeaderValue, Response};

use self::capture::{http_exchange, http_result, keep_exchange, Capture};
use self::relay::{relay, BodyEnd, Finisher};
use self::send::{buffer, rest_of, send_upstream, upstream_host, Buffered};
use crate::app::attempt::Attempt;
use crate::app::App;
use crate::error::{HarnessCode, HarnessError};
use crate::http::{full, is_sse, to_http, HttpResponse, Request};
use crate::proxy::call::{self, scrub, secret_values, CallInfo, Identified};
use crate::proxy::decision::{Decision, Plan, StoreFailed};
use crate::records::{EventSource, ResultStatus};

/// The response header naming who answered a forwarded call.
pub const SOURCE_HEADER: &str = "understudy-source";

/// The MCP body tag of a tagged write: `params._meta[MCP_TAG_KEY] = "tool_test"`.
pub const MCP_TAG_KEY: &str = "dev.understudy/source";

/// Carry out `plan` (forward, block or simulate; module doc) for an identified HTTP-profile
/// call. `info.arguments` is the input when an operation matched, else the request's
/// description; here the call's secret set is computed, once, for every scrub that follows.
pub async fn run(
    app: &Arc<App>,
    attempt: Arc<Attempt>,
    req: Request,
    mut info: CallInfo,
    id: Identified<'_>,
    plan: Plan,
) -> HttpResponse {
    let body = req.json().ok().flatten();
    info.secrets = Some(secret_values(app, &req, body).into());
    let Identified {
        integ,
        profile,
        consumed,
        ..
    } = id;
    let what = format!("{} {}", req.method, req.path);
    match plan {
        Plan::Forward { tag, capture } => {
            let rest = rest_of(&req, consumed);
            let capture = capture.then(|| {
                let matched =
                    (info.operation_id.clone()).filter(|id| integ.operation(id).is_some());
                let path = rest.split('?').next().unwrap_or("").to_string();
                Capture::new(app, integ, matched, path)
            });
            let out = Outbound { rest, tag, capture };
            forward_http(app, attempt, req, info, integ, out).await
        }
        Plan::Simulate => {
            let mut q = req.query.clone();
            let method = profile.effective_method(&req.method, &mut q);
            let rel = &req.segments[(consumed + 1).min(req.segments.len())..];
            let n = app.forwarding.next_simulated(&attempt.id);
            let fake = policy::fake_id(&profile, &attempt.record(), integ.name(), n, rel);
            let d = match profile
                .simulate_with_id(info.operation_id.as_deref(), &method, &fake)
                .map(|env| profile.render(&env).map(|r| (env, r)))
            {
                Some(Ok((env, response))) => {
                    let mut d = Decision::answered(response, ResultStatus::Simulated);
                    d.result = env;
                    d
                }
                _ => {
                    let msg = format!(
                        "understudy blocked this write: {what} has no mock and the `{}` profile has no synthetic answer for it (unmatched_writes `simulate`)",
                        profile.name()
                    );
                    Decision::answered(profile.blocked_write(&msg), ResultStatus::Blocked)
                }
            };
            answer(app, &attempt, info, d).await
        }
        // `Block`; `Mock` and `Refuse` are the pipeline's and never reach here.
        _ => {
            let msg = policy::blocked_message(app, integ.name(), &what);
            tracing::info!(integration = %integ.name(), operation = info.operation_id.as_deref().unwrap_or(""), "write blocked: {what}");
            let d = Decision::answered(profile.blocked_write(&msg), ResultStatus::Blocked);
            answer(app, &attempt, info, d).await
        }
    }
}

/// Commit a call decided here and answer its response (or the store's 500).
async fn answer(app: &App, attempt: &Attempt, info: CallInfo, d: Decision) -> HttpResponse {
    match call::record(app, attempt, info, d).await {
        Ok(c) => to_http(c.response),
        Err(f) => to_http(f.response),
    }
}

/// Where and how a call goes to the real system.
struct Outbound {
    /// The path and query joined to the integration's `upstream`.
    rest: String,
    /// Marked as test traffic (`Understudy-Source: tool_test`).
    tag: bool,
    capture: Option<Capture>,
}

/// Forward one HTTP-profile call and answer with the real response (module doc).
async fn forward_http(
    app: &Arc<App>,
    attempt: Arc<Attempt>,
    req: Request,
    info: CallInfo,
    integ: &crate::app::Integration,
    out: Outbound,
) -> HttpResponse {
    let source = if out.tag {
        EventSource::ToolTest
    } else {
        EventSource::Upstream
    };
    let upstream_resp =
        match send_upstream(app, integ, &req, &out.rest, out.tag, req.body.clone()).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(integration = %integ.name(), "{}", e.message);
                return answer(app, &attempt, info, Decision::harness(e).from(source)).await;
            }
        };
    let (mut parts, body) = upstream_resp.into_parts();
    crate::upstream::strip_response_headers(&mut parts.headers);
    let headers = std::mem::take(&mut parts.headers);
    let ctx = Arc::new(HttpDone {
        app: app.clone(),
        attempt,
        req,
        source: source.clone(),
        capture: out.capture,
        status: parts.status.as_u16(),
        headers: headers.clone(),
    });
    let body_out = if is_sse(&headers) {
        relay(ctx, info, Bytes::new(), body)
    } else {
        match buffer(body, app.limits.max_body, app.limits.body_read_timeout).await {
            Buffered::Complete(bytes) => {
                let end = BodyEnd::complete(bytes.clone());
                if let Err(f) = ctx.clone().finish(info, end).await {
                    return to_http(f.response);
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
                let d = Decision::harness(h).from(source);
                return answer(app, &ctx.attempt, info, d).await;
            }
        }
    };
    let mut resp = Response::new(body_out);
    *resp.status_mut() = parts.status;
    *resp.headers_mut() = headers;
    resp.headers_mut().insert(
        SOURCE_HEADER,
        HeaderValue::from_static(source_value(&source)),
    );
    resp
}

/// The `Understudy-Source` value of a forwarded answer.
fn source_value(source: &EventSource) -> &'static str {
    if *source == EventSource::ToolTest {
        "tool_test"
    } else {
        "upstream"
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
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreFailed>> + Send>> {
        Box::pin(async move {
            let mut result = http_result(self.status, &self.headers, &end);
            if let Some(secrets) = &info.secrets {
                scrub(&self.app, secrets, &mut result);
            }
            let d = Decision::forwarded(self.status, result, self.source.clone());
            call::record(&self.app, &self.attempt, info, d).await?;
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
