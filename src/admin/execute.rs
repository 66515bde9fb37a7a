//! `POST /tools/execute` — run one operation in isolation, as a tool test (seed 002 "Execute
//! a tool in test mode", seed 004 "Test Lambda tool") — and `GET /attempts/{id}/state`.
//!
//! Body: `{"integration","operation_id","input","variant"?,"state"?,"attempt"?,"dry_run"?,
//! "target"?,"allow_write"?,"stream_response"?,"timeout_seconds"?,"test_context"?}`; headers
//! `Request-Timeout` / `Request-Timeout-Millis` (the budget and `test_context` rules are
//! [`super::execute_request`]'s). The call runs through the one shared execute function
//! ([`crate::operation::call::execute_with`]): input schema, the pinned revision's engine,
//! output schema and envelope — exactly what `understudy exec` prints, plus the tool-test
//! members every answer carries, mock or upstream: `integration`, `operation_id`, `target`
//! (`"mock"` | `"upstream"`), `is_write`, `dry_run` (as asked), `source: "tool_test"`,
//! `blocked_side_effects` (the `integration/operation_id` of a write that was held back, else
//! `[]`), `duration_ms`, and `test_context` (`{"metadata","secrets":[names]}`) when given.
//! The mock answer adds `revision` and `attempt`.
//!
//! - **Which revision**: with `attempt`, the revision that attempt pinned and the operation
//!   set it was created with (`crate::app::generations`); without, the latest revision (a stale
//!   one — checked against another contract — answers the harness error `stale_contract`; no
//!   revision at all answers `no_mock`). An attempt whose lease is over answers
//!   `lease_expired`. The lease and pin rules are the attempt module's
//!   ([`crate::app::attempt::lease_error`], [`crate::app::attempt::stale_pin`]), as for a proxied call.
//! - **Which state**: `state` when given (a JSON object: the integration's state); else the
//!   attempt's current state of the integration (with a shared store, docs/src/operations/fleet-store.md, read under
//!   the attempt's row lock, so a write through another process is seen); else the
//!   definition's `initial_state`.
//! - **Isolation**: nothing is committed — the answer's `state_after` shows what the call
//!   would write, the attempt's state and evidence are untouched (an execute is a tool test,
//!   not an agent call). So on the mock every write is a dry run: a write that succeeded is
//!   listed in `blocked_side_effects` whether or not `dry_run` was asked.
//! - **Variant**: `variant`, else the attempt's chosen variant, else the default one.
//! - **Delay**: the variant's `delay_ms` is slept after evaluating (so the wall time matches
//!   what an agent would see), bounded by the budget. Past it the non-streamed answer is 504
//!   `timeout`.
//! - **Streaming** (`stream_response: true`, mock or upstream): `text/event-stream`; while
//!   the call runs an `event: heartbeat` with `data: {"elapsed_ms":…}` every
//!   `Limits::sse_heartbeat` (1 s), then exactly one `event: result` whose `data` is the same
//!   object as the non-streamed answer (single-line JSON). A timeout after the stream started
//!   closes it without a result event. Refusals found before the stream starts (400, 404,
//!   422) are ordinary JSON errors.
//! - **`target: "upstream"`** sends the input to the real system once through
//!   [`super::execute_upstream`] (its module doc has the answer), within the budget (504
//!   `timeout` past it): status, duration, retries, raw response, the native envelope, output
//!   validation and a field diff against the pinned mock. A write is sent only with
//!   `allow_write: true` and without `dry_run`; under `dry_run` it is simulated instead (the
//!   pinned mock's result, else the profile's `simulate` answer). 422 `no_upstream` when the
//!   integration has no `upstream`. `dry_run` alone (no `target`) runs on the mock.
//! - Executes are not counted in `/metrics` call counters (those are agent calls).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin as StdPin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use hyper::http::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::execute_request::{budget, Budget, TestContext};
use super::execute_upstream::{execute_upstream, UpstreamOptions};
use super::{
    lookup, parse_body, store_err, unknown_integration, unknown_operation, ApiError, ApiResult,
    Reply, PREFIX,
};
use crate::app::App;
use crate::error::{CallError, HarnessCode, HarnessError};
use crate::http::{HttpResponse, Request};
use crate::mock::Engine;
use crate::operation::call::{execute_with, ExecResult};
use crate::operation::Operation;
use crate::records::Pin;
use crate::util::json::type_name;

/// The longest variant delay: the delay limit of docs/src/reference/mock-definition.md#checks-and-limits (a mock never takes longer).
pub const MAX_DELAY_S: f64 = 30.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecBody {
    integration: String,
    operation_id: String,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    variant: Option<String>,
    #[serde(default)]
    state: Option<Value>,
    #[serde(default)]
    attempt: Option<String>,
    /// Hold back every side effect: on the mock nothing is committed (as always), upstream a
    /// write is simulated instead of sent.
    #[serde(default)]
    dry_run: bool,
    /// `"mock"` (default) or `"upstream"`: one real call (issue 6b).
    #[serde(default)]
    target: Option<String>,
    /// With `target: "upstream"` and without `dry_run`: let a write reach the real system.
    #[serde(default)]
    allow_write: bool,
    #[serde(default)]
    stream_response: bool,
    #[serde(default)]
    timeout_seconds: Option<f64>,
    /// Checked by hand ([`TestContext::parse`]) so no message ever quotes a secret.
    #[serde(default)]
    test_context: Option<Value>,
}

/// `POST /tools/execute`.
pub(crate) async fn execute(app: &Arc<App>, req: &Request) -> Result<Reply, ApiError> {
    let b: ExecBody = parse_body(req, &format!("POST {PREFIX}/tools/execute body"))?;
    let Some(input) = b.input.clone() else {
        return Err(ApiError::bad_request(
            "input: missing: the operation's input (a JSON object; {} when it takes none)",
        ));
    };
    let budget = budget(req, b.timeout_seconds, b.stream_response)?;
    let test_context = TestContext::parse(b.test_context.as_ref())?;
    let given_state = match &b.state {
        None => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "state: expected a JSON object (the integration's state), got {}",
                type_name(other)
            )))
        }
    };
    let attempt = match &b.attempt {
        Some(id) => Some(lookup(app, id)?),
        None => None,
    };
    let map = match &attempt {
        Some(a) => app.integrations.for_attempt(&a.id),
        None => &app.integrations,
    };
    let integ = map
        .get(&b.integration)
        .ok_or_else(|| unknown_integration(map, &b.integration))?;
    let op = integ
        .operation(&b.operation_id)
        .ok_or_else(|| unknown_operation(integ, &b.operation_id))?
        .clone();
    let upstream = match b.target.as_deref() {
        None | Some("mock") => false,
        Some("upstream") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "target: expected \"mock\" or \"upstream\", got {other:?}"
            )))
        }
    };
    let context_json = test_context.as_ref().map(TestContext::to_json);
    if upstream {
        if integ.config.upstream.is_none() {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "no_upstream",
                format!(
                    "`target: \"upstream\"` calls the real system, but integration `{}` has no `upstream` in understudy.json (integrations.{}.upstream); without `target` the mock answers",
                    integ.name(),
                    integ.name()
                ),
            ));
        }
        if op.is_write && b.allow_write && !b.dry_run && !app.forwarding.allow_upstream_writes {
            app.metrics.refused("upstream_writes_disabled");
            tracing::warn!(
                operation = %op.key(),
                "POST /tools/execute: a real upstream write refused (serve without --allow-upstream-writes)"
            );
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "upstream_writes_disabled",
                format!(
                    "`{}` is a write and `target: \"upstream\"` with `allow_write: true` would send it to the real system: this server was started without `--allow-upstream-writes`, so nothing was sent (start `understudy serve --allow-upstream-writes` to allow it, or use `dry_run: true`)",
                    op.key()
                ),
            ));
        }
        let opts = UpstreamOptions {
            allow_write: b.allow_write,
            dry_run: b.dry_run,
            authorization: test_context.and_then(|c| c.authorization),
        };
        let (app2, integration, operation_id) =
            (app.clone(), b.integration.clone(), b.operation_id.clone());
        let limit = budget.duration();
        let call = async move {
            let run = execute_upstream(&app2, &integration, &operation_id, &input, opts);
            let mut answer = tokio::time::timeout(limit, run).await.ok()?;
            if let (Value::Object(m), Some(c)) = (&mut answer, context_json) {
                m.insert("test_context".into(), c);
            }
            Some(answer)
        };
        if b.stream_response {
            return Ok(Reply::Http(stream(app.limits.sse_heartbeat, call)));
        }
        return match call.await {
            Some(answer) => Ok(Reply::Json(StatusCode::OK, answer)),
            None => Err(timeout_error(
                &op.key(),
                &budget,
                "the real system did not answer in time".into(),
                json!({}),
            )),
        };
    }
    let key = op.key();
    let record = attempt.as_ref().map(|a| a.record());
    let variant = b
        .variant
        .clone()
        .or_else(|| record.as_ref().and_then(|r| r.variants.get(&key).cloned()));
    let state = match (&given_state, &attempt) {
        (Some(s), _) => Some(s.clone()),
        (None, Some(a)) => {
            let mut g = a.lock.lock().await;
            // docs/src/operations/fleet-store.md: with a shared store, the state any process wrote last (read under the
            // attempt's row lock, released at once: an execute commits nothing).
            let _row = crate::app::attempt::read_in_store(&app.store, &a.id, &mut g)
                .await
                .map_err(store_err)?;
            Some(g.state.get(integ.name()).cloned().unwrap_or_default())
        }
        (None, None) => None,
    };
    let lease = record.as_ref().and_then(|r| {
        crate::app::attempt::lease_error(r, crate::app::attempt::lease_of(r, app.clock.now()))
    });
    let resolved = match (lease, &record) {
        (Some(e), _) => Err(e.into()),
        (None, Some(r)) => match r.pins.get(&key) {
            Some(pin) => engine_for(app, &op, pin, Some(&r.attempt_id)),
            None => Err(HarnessError::new(
                HarnessCode::NoMock,
                format!(
                    "attempt {} pinned no revision of `{key}` (it had no usable mock when the attempt started); save one and start a new attempt, or execute without `attempt`",
                    r.attempt_id
                ),
            )
            .into()),
        },
        (None, None) => latest_engine(app, &op, integ.name())?,
    };
    let (revision, r) = match resolved {
        Ok((revision, engine)) => (
            Some(revision),
            execute_with(
                &op,
                Some(&engine),
                &input,
                variant.as_deref(),
                state.as_ref(),
            ),
        ),
        Err(e) => (
            None,
            ExecResult::failed(e, variant.clone(), state.clone().unwrap_or_default()),
        ),
    };
    // Nothing is committed: a write that ran is a side effect held back.
    let blocked: Vec<String> = if op.is_write && r.error.is_none() {
        vec![key.clone()]
    } else {
        Vec::new()
    };
    let mut answer = r.to_json();
    if let Value::Object(m) = &mut answer {
        m.insert("integration".into(), json!(integ.name()));
        m.insert("operation_id".into(), json!(op.id()));
        m.insert("target".into(), json!("mock"));
        m.insert("revision".into(), json!(revision));
        m.insert("is_write".into(), json!(op.is_write));
        m.insert("dry_run".into(), json!(b.dry_run));
        m.insert("blocked_side_effects".into(), json!(blocked));
        m.insert("attempt".into(), json!(b.attempt));
        m.insert("source".into(), json!("tool_test"));
        if let Some(c) = context_json {
            m.insert("test_context".into(), c);
        }
    }
    let delay = Duration::from_millis(r.delay_ms);
    let timeout = budget.duration();
    if b.stream_response {
        let call = async move {
            if delay > timeout {
                tokio::time::sleep(timeout).await;
                return None;
            }
            tokio::time::sleep(delay).await;
            Some(answer)
        };
        return Ok(Reply::Http(stream(app.limits.sse_heartbeat, call)));
    }
    if delay > timeout {
        tokio::time::sleep(timeout).await;
        return Err(timeout_error(
            &key,
            &budget,
            format!(
                "its variant delays {} ms (pick another variant, or raise the budget: a delay is at most {MAX_DELAY_S} s)",
                r.delay_ms
            ),
            json!({ "delay_ms": r.delay_ms }),
        ));
    }
    tokio::time::sleep(delay).await;
    Ok(Reply::Json(StatusCode::OK, answer))
}

/// 504 `timeout`: `key` did not answer within `budget`; `why` says what took the time,
/// `details` (an object) is merged into the one detail.
fn timeout_error(key: &str, budget: &Budget, why: String, details: Value) -> ApiError {
    let mut d = json!({ "timeout_seconds": budget.seconds, "budget_from": budget.source });
    if let (Value::Object(m), Value::Object(extra)) = (&mut d, details) {
        m.extend(extra);
    }
    ApiError::new(
        StatusCode::GATEWAY_TIMEOUT,
        "timeout",
        format!(
            "`{key}` did not answer within the budget of {} s (from {}): {why}",
            budget.seconds, budget.source
        ),
    )
    .with_details(vec![d])
}

/// The engine of `pin` (compiled once per revision, shared with the proxy).
fn engine_for(
    app: &App,
    op: &Operation,
    pin: &Pin,
    attempt: Option<&str>,
) -> Result<(u64, std::sync::Arc<Engine>), CallError> {
    if let Some(e) = crate::app::attempt::stale_pin(attempt, &op.key(), pin, &op.contract_hash) {
        return Err(e.into());
    }
    app.engines
        .get(&app.store, op, pin)
        .map(|e| (pin.revision, e))
}

/// The latest revision's engine; `Err(CallError)` is an answer (no mock, stale), the outer
/// `Err` a store failure.
#[allow(clippy::type_complexity)]
fn latest_engine(
    app: &App,
    op: &Operation,
    integration: &str,
) -> Result<Result<(u64, std::sync::Arc<Engine>), CallError>, ApiError> {
    let key = op.key();
    let Some(rev) = app.store.latest_revision(&key).map_err(store_err)? else {
        return Ok(Err(HarnessError::new(
            HarnessCode::NoMock,
            format!(
                "operation `{key}` has no mock: no revision exists. Generate a draft (POST {PREFIX}/tools/{integration}/testing {{\"action\":\"generate\"}}) and save it (action \"save\"), or add a `mock` to {}",
                op.file.display()
            ),
        )
        .into()));
    };
    if rev.contract_hash != op.contract_hash {
        return Ok(Err(HarnessError::new(
            HarnessCode::StaleContract,
            format!(
                "the latest revision {} of `{key}` was checked against contract {} but the contract is now {}: save a new revision (POST {PREFIX}/tools/{integration}/testing, action \"save\", contract_hash \"{}\")",
                rev.revision, rev.contract_hash, op.contract_hash, op.contract_hash
            ),
        )
        .into()));
    }
    let pin = Pin {
        revision: rev.revision,
        contract_hash: rev.contract_hash,
    };
    Ok(engine_for(app, op, &pin, None))
}

/// One SSE event: `event: <name>`, one `data:` line of compact JSON, a blank line.
pub fn sse_event(event: &str, data: &Value) -> Bytes {
    Bytes::from(format!(
        "event: {event}\ndata: {}\n\n",
        serde_json::to_string(data).unwrap_or_default()
    ))
}

/// A response body fed by a channel: each message is flushed as one frame; the body ends
/// when the sender is dropped.
struct ChannelBody {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: StdPin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b))))
    }
}

/// The streamed answer: a heartbeat every `every` while `call` runs, then its answer as
/// the one result event — or, when it ends without one (timed out), the end of the stream.
fn stream<F>(every: Duration, call: F) -> HttpResponse
where
    F: Future<Output = Option<Value>> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let every = every.max(Duration::from_millis(1));
    let started = Instant::now();
    tokio::spawn(async move {
        let mut call = std::pin::pin!(call);
        // Every heartbeat that falls due before the end is sent (late after a stall, then
        // realigned), so a call lasting longer than an interval always shows one: the
        // heartbeat is polled first.
        let mut next = started + every;
        loop {
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(next.into()) => {
                    let elapsed_ms = started.elapsed().as_millis() as u64;
                    let beat = sse_event("heartbeat", &json!({ "elapsed_ms": elapsed_ms }));
                    if tx.send(beat).await.is_err() {
                        return; // the client went away
                    }
                    next += every;
                    let now = Instant::now();
                    if next <= now {
                        next = now + every;
                    }
                }
                answer = &mut call => {
                    match answer {
                        Some(a) => {
                            let _ = tx.send(sse_event("result", &a)).await;
                        }
                        None => tracing::info!(
                            elapsed_ms = started.elapsed().as_millis() as u64,
                            "tools/execute stream timed out; closing it without a result event"
                        ),
                    }
                    return;
                }
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(hyper::header::CONTENT_TYPE, "text/event-stream")
        .header(hyper::header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(ChannelBody { rx }.boxed())
        .expect("static response")
}

/// `GET /attempts/{id}/state`: the attempt's live state (under its lock), pins and variants.
pub(crate) async fn attempt_state(app: &App, id: &str) -> ApiResult {
    let a = lookup(app, id)?;
    let mut g = a.lock.lock().await;
    // docs/src/operations/fleet-store.md: the state any process wrote last (see `execute`).
    let _row = crate::app::attempt::read_in_store(&app.store, &a.id, &mut g)
        .await
        .map_err(store_err)?;
    let rec = a.record();
    let state: Map<String, Value> = g
        .state
        .iter()
        .map(|(k, v)| (k.clone(), Value::Object(v.clone())))
        .collect();
    Ok((
        StatusCode::OK,
        json!({
            "attempt_id": rec.attempt_id,
            "status": a.lease(app.clock.now()).as_str(),
            "is_default": rec.is_default,
            "pins": rec.pins,
            "variants": rec.variants,
            "state": state,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_framed() {
        let e = sse_event("result", &json!({"a": "x\ny"}));
        assert_eq!(&e[..], b"event: result\ndata: {\"a\":\"x\\ny\"}\n\n");
    }
}
