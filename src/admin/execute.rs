//! `POST /tools/execute` — run one operation in isolation — and `GET /attempts/{id}/state`.
//!
//! Body: `{"integration","operation_id","input","variant"?,"state"?,"attempt"?,"dry_run"?,
//! "stream_response"?,"timeout_seconds"?}`. The call runs through the one shared execute
//! function ([`crate::operation::call::execute_with`]): input schema, the pinned revision's
//! engine, output schema and envelope — exactly what `understudy exec` prints, plus
//! `integration`, `operation_id`, `revision`, `is_write`, `dry_run`, `attempt` and
//! `source: "tool_test"`.
//!
//! - **Which revision**: with `attempt`, the revision that attempt pinned and the operation
//!   set it was created with (`crate::app::generations`); without, the latest revision (a stale
//!   one — checked against another contract — answers the harness error `stale_contract`; no
//!   revision at all answers `no_mock`). An attempt whose lease is over answers
//!   `lease_expired`. The lease and pin rules are the attempt module's
//!   ([`crate::attempt::lease_error`], [`crate::attempt::stale_pin`]), as for a proxied call.
//! - **Which state**: `state` when given (a JSON object: the integration's state); else the
//!   attempt's current state of the integration (with a shared store, SPEC 17, read under
//!   the attempt's row lock, so a write through another process is seen); else the
//!   definition's `initial_state`.
//! - **Isolation**: nothing is committed — the answer's `state_after` shows what the call
//!   would write, the attempt's state and evidence are untouched (an execute is a tool test,
//!   not an agent call).
//! - **Variant**: `variant`, else the attempt's chosen variant, else the default one.
//! - **Delay**: the variant's `delay_ms` is slept after evaluating (so the wall time matches
//!   what an agent would see), bounded by `timeout_seconds` (default 30, at most 30 — the
//!   delay limit of SPEC 3.4; fractions allowed). Past the timeout the non-streamed answer is
//!   504 `timeout`.
//! - **Streaming** (`stream_response: true`): `text/event-stream`; while the call runs an
//!   `event: heartbeat` with `data: {"elapsed_ms":…}` every `Limits::sse_heartbeat` (1 s),
//!   then exactly one `event: result` whose `data` is the same object as the non-streamed
//!   answer (single-line JSON). A timeout after the stream started closes it without a
//!   result event. Refusals found before the stream starts (400, 404, 422) are ordinary JSON
//!   errors.
//! - **`target: "upstream"`** (or `dry_run: true`) sends the input to the real system once
//!   through [`super::execute_upstream`]: status, duration, retries, raw
//!   response, the native envelope, output validation and a field diff against the pinned
//!   mock. Writes are refused unless `allow_write: true` — and `dry_run` never lets one
//!   through. 422 `dry_run_unavailable` when the integration has no `upstream`. Not streamed.
//! - Executes are not counted in `/metrics` call counters (those are agent calls).

use std::convert::Infallible;
use std::pin::Pin as StdPin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use hyper::http::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Map, Value};

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

/// The longest `timeout_seconds` (and its default): the delay limit of SPEC 3.4.
pub const MAX_TIMEOUT_S: f64 = 30.0;

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
    #[serde(default)]
    dry_run: bool,
    /// `"mock"` (default) or `"upstream"`: one real call (issue 6b).
    #[serde(default)]
    target: Option<String>,
    /// With `target: "upstream"`: let a write reach the real system.
    #[serde(default)]
    allow_write: bool,
    #[serde(default)]
    stream_response: bool,
    #[serde(default)]
    timeout_seconds: Option<f64>,
}

/// `POST /tools/execute`.
pub(crate) async fn execute(app: &App, req: &Request) -> Result<Reply, ApiError> {
    let b: ExecBody = parse_body(req, &format!("POST {PREFIX}/tools/execute body"))?;
    let Some(input) = b.input.clone() else {
        return Err(ApiError::bad_request(
            "input: missing: the operation's input (a JSON object; {} when it takes none)",
        ));
    };
    let timeout_s = b.timeout_seconds.unwrap_or(MAX_TIMEOUT_S);
    if !(timeout_s > 0.0 && timeout_s <= MAX_TIMEOUT_S) {
        return Err(ApiError::bad_request(format!(
            "timeout_seconds: expected a number of seconds > 0 and <= {MAX_TIMEOUT_S} (the delay limit), got {timeout_s}"
        )));
    }
    let timeout = Duration::from_secs_f64(timeout_s);
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
        None | Some("mock") => b.dry_run,
        Some("upstream") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "target: expected \"mock\" or \"upstream\", got {other:?}"
            )))
        }
    };
    if upstream {
        if integ.config.upstream.is_none() {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "dry_run_unavailable",
                format!(
                    "`dry_run` / `target: \"upstream\"` call the real system, but integration `{}` has no `upstream` in understudy.json (integrations.{}.upstream); without them the mock answers",
                    integ.name(),
                    integ.name()
                ),
            ));
        }
        // `dry_run` never lets a write through; `target: "upstream"` does with `allow_write`.
        let allow_write = b.allow_write && !b.dry_run;
        let answer = super::execute_upstream::execute_upstream(
            app,
            &b.integration,
            &b.operation_id,
            &input,
            allow_write,
        )
        .await;
        return Ok(Reply::Json(StatusCode::OK, answer));
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
            // SPEC 17: with a shared store, the state any process wrote last (read under the
            // attempt's row lock, released at once: an execute commits nothing).
            let _row = crate::attempt::read_in_store(&app.store, &a.id, &mut g)
                .await
                .map_err(store_err)?;
            Some(g.state.get(integ.name()).cloned().unwrap_or_default())
        }
        (None, None) => None,
    };
    let lease = record
        .as_ref()
        .and_then(|r| crate::attempt::lease_error(r, crate::attempt::lease_of(r, app.clock.now())));
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
    let mut answer = r.to_json();
    if let Value::Object(m) = &mut answer {
        m.insert("integration".into(), json!(integ.name()));
        m.insert("operation_id".into(), json!(op.id()));
        m.insert("revision".into(), json!(revision));
        m.insert("is_write".into(), json!(op.is_write));
        m.insert("dry_run".into(), json!(false));
        m.insert("attempt".into(), json!(b.attempt));
        m.insert("source".into(), json!("tool_test"));
    }
    let delay = Duration::from_millis(r.delay_ms);
    if b.stream_response {
        return Ok(Reply::Http(stream(
            app.limits.sse_heartbeat,
            delay,
            timeout,
            answer,
        )));
    }
    if delay > timeout {
        tokio::time::sleep(timeout).await;
        return Err(timeout_error(&key, r.delay_ms, timeout_s));
    }
    tokio::time::sleep(delay).await;
    Ok(Reply::Json(StatusCode::OK, answer))
}

fn timeout_error(key: &str, delay_ms: u64, timeout_s: f64) -> ApiError {
    ApiError::new(
        StatusCode::GATEWAY_TIMEOUT,
        "timeout",
        format!(
            "`{key}` did not answer within timeout_seconds = {timeout_s}: its variant delays {delay_ms} ms; raise timeout_seconds (at most {MAX_TIMEOUT_S}) or pick another variant"
        ),
    )
    .with_details(vec![json!({ "delay_ms": delay_ms, "timeout_seconds": timeout_s })])
}

/// The engine of `pin` (compiled once per revision, shared with the proxy).
fn engine_for(
    app: &App,
    op: &Operation,
    pin: &Pin,
    attempt: Option<&str>,
) -> Result<(u64, std::sync::Arc<Engine>), CallError> {
    if let Some(e) = crate::attempt::stale_pin(attempt, &op.key(), pin, &op.contract_hash) {
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

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
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

/// The streamed answer: heartbeats every `every` until `delay` has passed, then the result
/// event — or, when `timeout` comes first, the end of the stream without a result.
fn stream(every: Duration, delay: Duration, timeout: Duration, answer: Value) -> HttpResponse {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let every = every.max(Duration::from_millis(1));
    let started = Instant::now();
    tokio::spawn(async move {
        let end = started + delay.min(timeout);
        // Every heartbeat that falls due before the end is sent (late after a stall, then
        // realigned), so a call lasting longer than an interval always shows one.
        let mut next = started + every;
        while next < end {
            tokio::time::sleep_until(next.into()).await;
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
        tokio::time::sleep_until(end.into()).await;
        if delay <= timeout {
            let _ = tx.send(sse_event("result", &answer)).await;
        } else {
            tracing::info!(
                delay_ms = delay.as_millis() as u64,
                timeout_ms = timeout.as_millis() as u64,
                "tools/execute stream timed out; closing it without a result event"
            );
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
    // SPEC 17: the state any process wrote last (see `execute`).
    let _row = crate::attempt::read_in_store(&app.store, &a.id, &mut g)
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
