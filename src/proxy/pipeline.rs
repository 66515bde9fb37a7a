//! The call pipeline of SPEC section 5, one documented function per stage, run in this order
//! by [`handle`]:
//!
//! 1. [`route`](super::route) — attempt (401 for an unknown token), lease, integration,
//!    operation ([`prepare`]);
//! 2. [`build_input`] — path captures, query captures, then the JSON body (an object's
//!    members merged in, later sources overriding earlier ones; any other body under `body`);
//!    a body that is not JSON is an input error;
//! 3. [`validate_input`] — the operation's input schema (compiled once per contract);
//! 4. [`evaluate`] — **under the attempt's state lock**: idempotency (replay or 422), then the
//!    pinned revision's engine against the integration's pre-call state;
//! 5. [`validate_output`] — the output schema and the profile's envelope rule
//!    (`output_schema_violation` is never sent as a success);
//! 6. [`render_native`] — the adapter envelope becomes the native response;
//! 7. [`record_evidence`] — still under the lock: the event and the integration's new state
//!    are written atomically and durably; only then is the new state visible to the next
//!    call. This phase runs for every call, whatever stage ended it (STYLE habit 10);
//! 8. [`delay`] — `delay_ms`, after the lock is released;
//! 9. respond.
//!
//! Stages 2–6 return a [`Decision`] instead of side effects; only stage 7 commits. Stages 3
//! and 5 are the call core's (`crate::operation::call`): the same functions, error paths and
//! wording as `understudy exec` and `POST /tools/execute`.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::route::{self, Matched, Refusal, Target};
use crate::app::{App, Integration};
use crate::attempt::{self, Attempt, AttemptState, IdempotentEntry, RecordRef};
use crate::contract::template::RequestView;
use crate::contract::ResultForm;
use crate::error::{CallError, HarnessCode, HarnessError, InputError};
use crate::http::Request;
use crate::mock::eval::{Rendered, StaticResult};
use crate::mock::path::json_identical;
use crate::mock::Engine;
use crate::operation::call::{validate_input, validate_output};
use crate::operation::{IdempotencySource, Operation};
use crate::profile::{self, NativeResponse, Profile};
use crate::records::AttemptRecord;
use crate::records::{EventSource, ResultStatus, ToolEvent};
use crate::store::CallRecord;

/// What is known about a call for its evidence, filled in as stages run.
#[derive(Debug, Clone)]
pub struct CallInfo {
    pub execution_attempt_id: String,
    pub integration: String,
    pub operation_id: Option<String>,
    pub is_write: bool,
    /// The input once built; until then, a description of the raw request.
    pub arguments: Value,
    pub idempotency_key_ref: Option<String>,
    pub trace_id: Option<String>,
}

/// How results and input errors go on the wire: an HTTP profile's native envelope, or an
/// MCP tool result (rendered by the MCP dialect, `crate::profile::mcp`: here the mock's
/// result passes through with HTTP status 200, as MCP answers travel as JSON-RPC over 200).
#[derive(Debug, Clone)]
pub enum Wire {
    Http(Arc<Profile>),
    Mcp,
}

impl Wire {
    /// Stage 6 on this wire.
    pub fn render(&self, result: &Value) -> Result<NativeResponse, HarnessError> {
        match self {
            Wire::Http(p) => render_native(p, result),
            Wire::Mcp => Ok(NativeResponse {
                status: 200,
                headers: Vec::new(),
                body: Some(result.clone()),
            }),
        }
    }
}

/// How a call ended, before its evidence is written.
#[derive(Debug, Clone)]
pub struct Decision {
    pub response: NativeResponse,
    /// The envelope recorded as the event's `result`.
    pub result: Value,
    /// `ok`, `input_error`, `harness_error`, `replayed`.
    pub result_status: ResultStatus,
    pub error: Option<CallError>,
    pub revision: Option<u64>,
    pub variant: Option<String>,
    pub rule: Option<usize>,
    pub delay_ms: u64,
    /// The integration's whole new state, when the call changed it.
    pub new_state: Option<(String, Map<String, Value>)>,
    /// The first response of an idempotent call, to remember once recorded.
    pub remember: Option<((String, String), IdempotentEntry)>,
}

impl Decision {
    /// A call that ended in a harness error (SPEC 5.3).
    pub fn harness(e: HarnessError) -> Decision {
        let response = profile::harness_response(&e);
        Decision {
            result: response.to_envelope(),
            response,
            result_status: ResultStatus::HarnessError,
            error: Some(CallError::Harness(e)),
            revision: None,
            variant: None,
            rule: None,
            delay_ms: 0,
            new_state: None,
            remember: None,
        }
    }

    /// A call that ended in an input error, in the profile's native shape (SPEC 5.2).
    pub fn input(profile: &Profile, e: InputError) -> Decision {
        let response = profile.input_error(&e);
        Decision {
            result: response.to_envelope(),
            response,
            result_status: ResultStatus::InputError,
            error: Some(CallError::Input(e)),
            revision: None,
            variant: None,
            rule: None,
            delay_ms: 0,
            new_state: None,
            remember: None,
        }
    }

    /// An input error on `wire`; on MCP the recorded result is the `isError: true` tool
    /// result the agent sees.
    pub fn input_on(wire: &Wire, e: InputError) -> Decision {
        let Wire::Http(profile) = wire else {
            let result = profile::mcp::input_error_result(&e);
            return Decision {
                response: NativeResponse {
                    status: 200,
                    headers: Vec::new(),
                    body: Some(result.clone()),
                },
                result,
                result_status: ResultStatus::InputError,
                error: Some(CallError::Input(e)),
                revision: None,
                variant: None,
                rule: None,
                delay_ms: 0,
                new_state: None,
                remember: None,
            };
        };
        Decision::input(profile, e)
    }

    fn from_error(wire: &Wire, e: CallError) -> Decision {
        match e {
            CallError::Input(e) => Decision::input_on(wire, e),
            CallError::Harness(e) => Decision::harness(e),
        }
    }

    /// The pinned revision (and the variant, unless the decision set one) of the call.
    pub fn at(mut self, revision: Option<u64>, variant: Option<String>) -> Decision {
        self.revision = revision;
        if self.variant.is_none() {
            self.variant = variant;
        }
        self
    }
}

/// Everything evaluation needs, resolved before the lock is taken.
pub struct Prepared {
    pub op: Arc<Operation>,
    pub wire: Wire,
    pub engine: Arc<Engine>,
    pub revision: u64,
    pub variant: Option<String>,
    pub input: Value,
    /// (`"<integration>/<operation_id>"`, key ref) when the operation declares an
    /// idempotency key and the request carries one.
    pub idempotency: Option<(String, String)>,
}

/// Run one proxied call through every stage and return its native response.
pub async fn handle(app: &App, req: Request) -> NativeResponse {
    // Stage 1a: the attempt (before anything is recorded: an unknown token has no attempt).
    let (attempt, consumed) = match route::attempt(app, &req) {
        Ok(x) => x,
        Err(r) => return refusal(r),
    };
    let mut info = CallInfo {
        execution_attempt_id: attempt::new_uuid(),
        integration: req.segments.get(consumed).cloned().unwrap_or_default(),
        operation_id: None,
        is_write: false,
        // Set by `prepare` once the input is built (always an object); otherwise the raw
        // request's description below.
        arguments: Value::Null,
        idempotency_key_ref: None,
        trace_id: trace_id(&req),
    };
    let prepared = prepare(app, &attempt, consumed, &req, &mut info);
    if info.arguments.is_null() {
        info.arguments = req.describe();
    }
    let mut guard = attempt.lock.lock().await;
    // SPEC 17: a shared store's row lock, and its pre-call state (no-op when embedded).
    let _row = attempt::lock_in_store(&app.store, &attempt.id, &mut guard).await;
    let decision = match prepared {
        Ok(p) => {
            let d = evaluate(&mut guard, &p);
            d.at(Some(p.revision), p.variant.clone())
        }
        Err(d) => d,
    };
    let (response, delay_ms) = record_evidence(app, &attempt, guard, &req, info, decision).await;
    delay(delay_ms).await;
    response
}

/// The 401 (unknown token) or 500 (store) answer of a request that reached no attempt.
pub fn refusal(r: Refusal) -> NativeResponse {
    let (status, code, message) = match r {
        Refusal::UnknownToken(m) => (401, "unknown_attempt", m),
        Refusal::Store(m) => (500, "store_error", m),
    };
    NativeResponse {
        status,
        headers: vec![("Understudy-Error".into(), code.into())],
        body: Some(
            json!({ "understudy_error": { "kind": "auth_error", "code": code, "message": message } }),
        ),
    }
}

/// `trace_id` from a single valid W3C `traceparent` header (PROTOCOLS 4.1), else `None`.
pub fn trace_id(req: &Request) -> Option<String> {
    if req.header_count("traceparent") != 1 {
        return None;
    }
    attempt::trace_id(req.header("traceparent")?)
}

/// Stages 1b–3 and the pin lookup: lease, integration, operation, input, input validation.
/// `Err` is the decided end of the call (recorded like any other).
// The error is the call's decided end, moved once per call; boxing it buys nothing.
#[allow(clippy::result_large_err)]
pub fn prepare(
    app: &App,
    attempt: &Attempt,
    consumed: usize,
    req: &Request,
    info: &mut CallInfo,
) -> Result<Prepared, Decision> {
    let record = attempt.read_record();
    // Borrowed, not copied: the pins name every operation. Released when this returns.
    check_lease(app, &record)?;
    // Stage 1c: the integration.
    let Some(integ) = req
        .segments
        .get(consumed)
        .and_then(|n| app.integration_for(attempt, n))
    else {
        let names: Vec<&str> = app.integrations.keys().map(String::as_str).collect();
        let msg = match req.segments.get(consumed) {
            Some(n) => format!(
                "no integration named `{n}` ({}): expected a path starting with one of: {}",
                req.line(),
                names
                    .iter()
                    .map(|n| format!("/{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!(
                "{} names no integration: expected a path starting with one of: {}",
                req.line(),
                names
                    .iter()
                    .map(|n| format!("/{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        return Err(Decision::harness(HarnessError::new(
            HarnessCode::UnmatchedRequest,
            msg,
        )));
    };
    let Some(profile) = integ.profile.clone() else {
        // An `mcp` integration: its endpoint is the base URL itself (`super::mcp`).
        return Err(Decision::harness(HarnessError::new(
            HarnessCode::UnmatchedRequest,
            format!(
                "{} is not the endpoint of `{}`: a `{}` integration is served at its base URL /{} itself",
                req.line(),
                integ.name(),
                integ.config.profile,
                integ.name()
            ),
        )));
    };
    // Stage 1d: the operation.
    let rel = &req.segments[consumed + 1..];
    let mut query = req.query.clone();
    let method = profile.effective_method(&req.method, &mut query);
    let body = req.json_body();
    let view = RequestView {
        method: &method,
        segments: rel,
        query: &query,
        headers: &req.headers,
    };
    info.is_write = profile.is_write(&method, rel, body.as_ref().ok().and_then(Option::as_ref));
    let matched = route::operation_with(integ, Some(&integ.routes), &view, req)
        .map_err(|m| Decision::harness(HarnessError::new(HarnessCode::UnmatchedRequest, m)))?;
    info.operation_id = Some(matched.target.operation_id().to_string());
    let explicit_write = match &matched.target {
        Target::File(op) => op.op.write,
        Target::Builtin(b) => b.write,
    };
    if let Some(w) = explicit_write {
        info.is_write = w;
    }
    // Stage 2: the input.
    let include_query = matches!(matched.target, Target::Builtin(_));
    let input = build_input(&matched, &query, include_query, body)
        .map_err(|e| Decision::input(&profile, e))?;
    info.arguments = input.clone();
    let near_files = matched.near_files.clone();
    let op = match matched.target {
        Target::File(op) => op,
        Target::Builtin(b) => {
            let mut msg = format!(
                "{} matches only `{}`, a built-in {} operation of `{}` without an operation file, so it has no mock: add {}/{}.json with a `mock`",
                req.line(),
                b.operation_id,
                profile.name(),
                integ.name(),
                integ.config.operations.display(),
                b.operation_id
            );
            if let Some(near) = &near_files {
                msg.push_str(&format!("; closest operation files: {near}"));
            }
            return Err(Decision::harness(HarnessError::new(
                HarnessCode::NoMock,
                msg,
            )));
        }
    };
    prepare_operation(
        app,
        &record,
        integ,
        op,
        Wire::Http(profile),
        input,
        req,
        info,
    )
}

/// Stage 1b — the lease: a call after it expired, or after the attempt ended, is the
/// harness error `lease_expired`.
#[allow(clippy::result_large_err)]
pub fn check_lease(app: &App, record: &RecordRef<'_>) -> Result<(), Decision> {
    match attempt::lease_error(record, record.lease(app.clock.now())) {
        None => Ok(()),
        Some(e) => Err(Decision::harness(e)),
    }
}

/// Stage 3 and the pin lookup of a resolved operation file, shared by HTTP calls and MCP
/// tool calls (`super::mcp`): input validation, the pinned revision (`no_mock`,
/// `stale_contract`), its engine, the idempotency key.
#[allow(clippy::result_large_err, clippy::too_many_arguments)]
pub fn prepare_operation(
    app: &App,
    record: &AttemptRecord,
    integ: &Integration,
    op: Arc<Operation>,
    wire: Wire,
    input: Value,
    req: &Request,
    info: &mut CallInfo,
) -> Result<Prepared, Decision> {
    // Stage 3: input validation.
    validate_input(&op, &input).map_err(|e| Decision::input_on(&wire, e))?;
    // The pinned revision.
    let key = op.key();
    let Some(pin) = record.pins.get(&key) else {
        return Err(Decision::harness(HarnessError::new(
            HarnessCode::NoMock,
            no_pin_message(app, integ, &op, &record.attempt_id),
        )));
    };
    if let Some(e) = attempt::stale_pin(Some(&record.attempt_id), &key, pin, &op.contract_hash) {
        return Err(Decision::harness(e).at(Some(pin.revision), None));
    }
    let engine = app
        .engines
        .get(&app.store, &op, pin)
        .map_err(|e| Decision::from_error(&wire, e).at(Some(pin.revision), None))?;
    let idempotency = idempotency_key(op.idempotency.as_ref(), req, &input).map(|k| {
        let r = attempt::idempotency_key_ref(&record.secret, &k);
        info.idempotency_key_ref = Some(r.clone());
        (key.clone(), r)
    });
    Ok(Prepared {
        variant: record.variants.get(&key).cloned(),
        revision: pin.revision,
        op,
        wire,
        engine,
        input,
        idempotency,
    })
}

fn no_pin_message(app: &App, integ: &Integration, op: &Operation, attempt_id: &str) -> String {
    let latest = app.store.latest_revision(&op.key()).ok().flatten();
    match latest {
        Some(rev) if rev.contract_hash != op.contract_hash => format!(
            "`{}` has no usable mock in attempt {attempt_id}: its latest revision {} is stale (checked against another contract)",
            op.key(),
            rev.revision
        ),
        Some(rev) => format!(
            "`{}` had no mock when attempt {attempt_id} started (revision {} was saved later; start a new attempt to pin it)",
            op.key(),
            rev.revision
        ),
        None => format!(
            "operation `{}` of `{}` has no mock: add a `mock` to {}",
            op.id(),
            integ.name(),
            op.file.display()
        ),
    }
}

/// Stage 2 — build the input (SPEC 5 step 2): path captures, query captures (for built-in
/// templates, which have no query templates, every query parameter), then the JSON body:
/// an object's members are merged in (a member overrides a capture of the same name), any
/// other JSON value goes under `body`. A body that is not JSON is an input error.
pub fn build_input(
    matched: &Matched,
    query: &[(String, String)],
    include_query: bool,
    body: Result<Option<Value>, String>,
) -> Result<Value, InputError> {
    let mut input = matched.captures.clone();
    if include_query {
        for (k, v) in query {
            input
                .entry(k.clone())
                .or_insert_with(|| Value::String(v.clone()));
        }
    }
    match body {
        Err(m) => return Err(InputError::new(m)),
        Ok(None) => {}
        Ok(Some(Value::Object(o))) => {
            for (k, v) in o {
                input.insert(k, v);
            }
        }
        Ok(Some(other)) => {
            input.insert("body".into(), other);
        }
    }
    Ok(Value::Object(input))
}

/// The raw idempotency key of a call, when the operation declares where it lives: a header
/// (an RFC 8941 sf-string's quotes are removed) or a dot path in the input (compiled with
/// the operation; a string or a number there is the key).
pub fn idempotency_key(
    source: Option<&IdempotencySource>,
    req: &Request,
    input: &Value,
) -> Option<String> {
    match source? {
        IdempotencySource::Header(h) => {
            let v = req.header(h)?.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .unwrap_or(v);
            (!v.is_empty()).then(|| v.to_string())
        }
        IdempotencySource::Input(path) => match path.resolve(input).ok()? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        },
    }
}

/// Stage 4 — evaluate under the state lock (`state` is the guarded attempt state).
///
/// An idempotent repeat (same key, same arguments) replays the first response without
/// evaluating (`replayed`); the same key with other arguments is an input error with status
/// 422 (SPEC 5.4). Otherwise the pinned engine runs against the integration's pre-call state;
/// then stages 5 and 6 run, and the decision carries the new state for stage 7 to commit.
pub fn evaluate(state: &mut AttemptState, p: &Prepared) -> Decision {
    if let Some(k) = &p.idempotency {
        if let Some(first) = state.idempotency.get(k) {
            if first.arguments == p.input {
                return match p.wire.render(&first.result) {
                    Ok(response) => Decision {
                        response,
                        result: first.result.clone(),
                        result_status: ResultStatus::Replayed,
                        error: None,
                        revision: first.revision,
                        variant: first.variant.clone(),
                        rule: first.rule,
                        delay_ms: 0,
                        new_state: None,
                        remember: None,
                    },
                    Err(e) => Decision::harness(e),
                };
            }
            let mut e = InputError::new(format!(
                "this idempotency key was already used in this attempt with other arguments for `{}`: reuse a key only to retry the same request",
                p.op.id()
            ));
            e.status = 422;
            return Decision::input_on(&p.wire, e);
        }
    }
    let empty = Map::new();
    let pre = state.state.get(&p.op.integration).unwrap_or(&empty);
    let outcome = match p.engine.decide(p.variant.as_deref(), &p.input, pre) {
        Ok(o) => o,
        Err(e) => return Decision::from_error(&p.wire, e),
    };
    // Stages 5 and 6: once per static result (see `settled`), else for this call.
    let settled = match &outcome.result {
        Rendered::Static(s) => settled(p, s, outcome.variant, outcome.rule),
        Rendered::Dynamic(_) => None,
    };
    let response = match settled {
        Some(r) => r.clone(),
        None => match check_and_render(p, outcome.result.value(), outcome.variant, outcome.rule) {
            Ok(r) => r,
            Err(d) => return d,
        },
    };
    let new_state = patched_state(pre, outcome.state_patch).map(|s| (p.op.integration.clone(), s));
    let result = outcome.result.into_value();
    let variant = outcome.variant.to_string();
    let remember = p.idempotency.clone().map(|k| {
        (
            k,
            IdempotentEntry {
                arguments: p.input.clone(),
                result: result.clone(),
                http_status: response.status,
                revision: Some(p.revision),
                variant: Some(variant.clone()),
                rule: outcome.rule,
            },
        )
    });
    Decision {
        response,
        result,
        result_status: ResultStatus::Ok,
        error: None,
        revision: Some(p.revision),
        variant: Some(variant),
        rule: outcome.rule,
        delay_ms: outcome.delay_ms,
        new_state,
        remember,
    }
}

/// Stages 5 and 6 of one result: the output check, then the native response. `Err` is the
/// decided end of the call.
#[allow(clippy::result_large_err)]
fn check_and_render(
    p: &Prepared,
    result: &Value,
    variant: &str,
    rule: Option<usize>,
) -> Result<NativeResponse, Decision> {
    // Stage 5.
    if let Err(v) = validate_output(&p.op, p.engine.definition(), result, variant, rule) {
        let mut d = Decision::harness(v.error);
        d.variant = Some(variant.to_string());
        d.rule = rule;
        return Err(d);
    }
    // Stage 6.
    p.wire.render(result).map_err(Decision::harness)
}

/// Stages 5 and 6 of a static result, done on its first call and kept in the compiled
/// revision ([`StaticResult::memo`]): what they decide depends only on the result and on
/// what is fixed per contract — the output schema and the operation id (both in the contract
/// hash, which every call of a pinned revision shares), the result form and the wire. A
/// result that fails them is not kept: such calls run the stages every time (the harness
/// error names the rule that selected the result, which can differ per call).
fn settled<'s>(
    p: &Prepared,
    s: &'s StaticResult,
    variant: &str,
    rule: Option<usize>,
) -> Option<&'s NativeResponse> {
    let mcp = matches!(p.wire, Wire::Mcp);
    let m = s.memo(|v| Settled {
        contract_hash: p.op.contract_hash.clone(),
        result_form: p.op.op.result_form,
        mcp,
        response: check_and_render(p, v, variant, rule).ok(),
    })?;
    // Another contract or form (a reloaded file whose mock did not change) is not what
    // was settled: run the stages for it.
    (m.contract_hash == p.op.contract_hash && m.result_form == p.op.op.result_form && m.mcp == mcp)
        .then_some(m.response.as_ref())
        .flatten()
}

/// What [`settled`] keeps for a static result.
struct Settled {
    contract_hash: String,
    result_form: Option<ResultForm>,
    mcp: bool,
    /// `None` when the result fails stage 5 or 6.
    response: Option<NativeResponse>,
}

/// The integration's whole new state after `patch`, or `None` when the patch changes
/// nothing — every key already holds the identical value — so the store writes no state.
fn patched_state(
    pre: &Map<String, Value>,
    patch: Map<String, Value>,
) -> Option<Map<String, Value>> {
    if patch
        .iter()
        .all(|(k, v)| pre.get(k).is_some_and(|old| json_identical(old, v)))
    {
        return None;
    }
    let mut s = pre.clone();
    s.extend(patch);
    Some(s)
}

/// Stage 6 — the adapter envelope as the native response (SPEC 5.1).
pub fn render_native(profile: &Profile, result: &Value) -> Result<NativeResponse, HarnessError> {
    profile.render(result)
}

/// Stage 7 — write the call's evidence (and the integration's new state) in one store
/// transaction under the state lock, make the new state and the idempotency entry visible,
/// release the lock, then wait for the group flush that makes the write durable: the answer
/// never leaves before its evidence is on disk, yet calls to one attempt share fsyncs.
/// A store failure answers 500 (`Understudy-Error: store_error`); a failed write commits
/// nothing. (A failed *flush* — disk gone — answers 500 too; the write stays in the store's
/// log and may or may not survive a crash, so it is never acknowledged.)
pub async fn record_evidence(
    app: &App,
    attempt: &Attempt,
    mut state: tokio::sync::MutexGuard<'_, AttemptState>,
    req: &Request,
    mut info: CallInfo,
    mut d: Decision,
) -> (NativeResponse, u64) {
    // The result moves into the event (no deep copy per call): nothing below reads it.
    let result = std::mem::take(&mut d.result);
    let (mut event, latency_ms) = tool_event(
        app,
        req,
        &mut info,
        &d,
        d.response.status,
        EventSource::Mock,
    );
    event.result = result;
    let rec = CallRecord {
        event,
        state: d.new_state.clone(),
    };
    let op_name = info.operation_id.as_deref().unwrap_or("");
    let written = app.store.write_call(&attempt.id, rec);
    if written.is_ok() {
        if let Some((integ, s)) = d.new_state {
            state.state.insert(integ, s);
        }
        if let Some((k, e)) = d.remember {
            state.idempotency.entry(k).or_insert(e);
        }
    }
    drop(state);
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
                Some(CallError::Input(e)) => tracing::info!(
                    attempt = %attempt.id, sequence = seq, integration = %info.integration,
                    operation = op_name, "input error: {}", e.message
                ),
                None => tracing::debug!(
                    attempt = %attempt.id, sequence = seq, integration = %info.integration,
                    operation = op_name, status = d.response.status, result_status = d.result_status.as_str(), "call"
                ),
            }
            (d.response, d.delay_ms)
        }
        Err(e) => {
            tracing::error!(attempt = %attempt.id, error = %e, "cannot record the call's evidence");
            attempt
                .store_failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            app.metrics
                .observe(&info.integration, op_name, "store_error", latency_ms);
            let body = json!({ "understudy_error": {
                "kind": "internal_error",
                "code": "store_error",
                "message": format!("the call could not be recorded, so it was not answered: {e}"),
            }});
            (
                NativeResponse {
                    status: 500,
                    headers: vec![("Understudy-Error".into(), "store_error".into())],
                    body: Some(body),
                },
                0,
            )
        }
    }
}

/// The evidence event of one decided call, and its latency so far (ms). Takes the
/// per-call fields out of `info` (its integration and operation id stay for logging); the
/// store assigns the sequence. One place for every path that records a call (mock, MCP,
/// forwarded, blocked, simulated).
pub(crate) fn tool_event(
    app: &App,
    req: &Request,
    info: &mut CallInfo,
    d: &Decision,
    http_status: u16,
    source: EventSource,
) -> (ToolEvent, f64) {
    let latency_ms = req.received.elapsed().as_secs_f64() * 1000.0;
    let event = ToolEvent {
        sequence: 0,
        execution_attempt_id: std::mem::take(&mut info.execution_attempt_id),
        integration: info.integration.clone(),
        operation_id: info.operation_id.clone(),
        revision: d.revision,
        variant: d.variant.clone(),
        rule: d.rule,
        is_write: info.is_write,
        arguments: std::mem::take(&mut info.arguments),
        result: d.result.clone(),
        result_status: d.result_status.clone(),
        http_status,
        latency_ms,
        delay_ms: d.delay_ms,
        idempotency_key_ref: info.idempotency_key_ref.take(),
        trace_id: info.trace_id.take(),
        source,
        error: d.error.as_ref().map(CallError::to_json),
        timestamp: crate::util::time::rfc3339(app.clock.now()),
    };
    (event, latency_ms)
}

/// Stage 8 — sleep `delay_ms` (after the state change is committed and the lock released).
pub async fn delay(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::template::CompiledMatch;
    use crate::contract::MatchSpec;
    use crate::mock::path::DotPath;
    use hyper::http::HeaderMap;

    fn builtin_match(captures: Map<String, Value>) -> Matched {
        let m = CompiledMatch::compile(&MatchSpec {
            method: "GET".into(),
            path: "/x".into(),
            query: Default::default(),
            headers: Default::default(),
        })
        .unwrap();
        Matched {
            target: Target::Builtin(Arc::new(crate::app::BuiltinOp {
                operation_id: "x".into(),
                description: None,
                matcher: m,
                write: None,
            })),
            captures,
            near_files: None,
        }
    }

    #[test]
    fn input_merges_captures_query_and_body() {
        let mut caps = Map::new();
        caps.insert("id".into(), json!("001"));
        let m = builtin_match(caps);
        let q = vec![("q".to_string(), "SELECT Id".to_string())];
        let v = build_input(&m, &q, true, Ok(Some(json!({"Name": "A"})))).unwrap();
        assert_eq!(v, json!({"id": "001", "q": "SELECT Id", "Name": "A"}));
        let v = build_input(&m, &q, false, Ok(Some(json!([1, 2])))).unwrap();
        assert_eq!(v, json!({"id": "001", "body": [1, 2]}));
        let v = build_input(&m, &q, false, Ok(Some(json!({"id": "body wins"})))).unwrap();
        assert_eq!(v, json!({"id": "body wins"}));
        let e = build_input(&m, &q, false, Err("not JSON".into())).unwrap_err();
        assert_eq!(e.status, 400);
    }

    fn req_with(headers: &[(&str, &str)]) -> Request {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.append(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        Request::new(
            "POST",
            "/crm/x",
            None,
            h,
            bytes::Bytes::new(),
            "127.0.0.1:9".parse().unwrap(),
            std::time::Instant::now(),
        )
    }

    #[test]
    fn idempotency_keys() {
        let by_header = IdempotencySource::Header("Idempotency-Key".into());
        let r = req_with(&[("idempotency-key", "\"8e03978e\"")]);
        assert_eq!(
            idempotency_key(Some(&by_header), &r, &json!({})).as_deref(),
            Some("8e03978e")
        );
        let r = req_with(&[("idempotency-key", "abc")]);
        assert_eq!(
            idempotency_key(Some(&by_header), &r, &json!({})).as_deref(),
            Some("abc")
        );
        assert_eq!(
            idempotency_key(Some(&by_header), &req_with(&[]), &json!({})),
            None
        );
        let by_input = IdempotencySource::Input(DotPath::parse("order.key").unwrap());
        let input = json!({"order": {"key": "k-1"}});
        assert_eq!(
            idempotency_key(Some(&by_input), &r, &input).as_deref(),
            Some("k-1")
        );
        assert_eq!(idempotency_key(None, &r, &input), None);
    }

    #[test]
    fn traceparent_header() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            trace_id(&req_with(&[("traceparent", ok)])).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(
            trace_id(&req_with(&[("traceparent", ok), ("traceparent", ok)])),
            None
        );
        assert_eq!(trace_id(&req_with(&[("traceparent", "nope")])), None);
    }

    #[test]
    fn harness_decision_shape() {
        let d = Decision::harness(HarnessError::new(HarnessCode::UnmatchedRequest, "m"));
        assert_eq!(d.response.status, 500);
        assert_eq!(d.result_status, ResultStatus::HarnessError);
        assert_eq!(d.result["status"], 500);
        assert_eq!(
            d.result["data"]["understudy_error"]["code"],
            "unmatched_request"
        );
    }

    #[test]
    fn a_patch_that_changes_nothing_writes_no_state() {
        let pre = json!({"a": 1, "b": {"c": [true]}});
        let pre = pre.as_object().unwrap();
        let patch = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(patched_state(pre, Map::new()), None);
        assert_eq!(patched_state(pre, patch(json!({"a": 1}))), None);
        assert_eq!(
            patched_state(pre, patch(json!({"b": {"c": [true]}, "a": 1}))),
            None
        );
        // `1.0` is not `1` as written: the stored state changes.
        assert_eq!(
            patched_state(pre, patch(json!({"a": 1.0}))),
            Some(patch(json!({"a": 1.0, "b": {"c": [true]}})))
        );
        assert_eq!(
            patched_state(pre, patch(json!({"a": 1, "n": null}))),
            Some(patch(json!({"a": 1, "b": {"c": [true]}, "n": null})))
        );
    }

    /// An operation of the `rest` profile whose mock is `mock`, compiled as served.
    fn prepared(mock: Value, output_schema: Value, input: Value) -> Prepared {
        let file = json!({
            "operation_id": "op",
            "match": {"method": "POST", "path": "/op"},
            "input_schema": {"type": "object"},
            "output_schema": output_schema,
            "mock": mock,
        });
        let loaded = crate::operation::load::parse_operation(
            &file,
            std::path::Path::new("crm/op.json"),
            "rest",
        )
        .unwrap();
        let op = Operation::compile("crm", crate::config::ProfileKind::Rest, loaded).unwrap();
        Prepared {
            engine: op.engine.clone().unwrap(),
            op: Arc::new(op),
            wire: Wire::Http(Profile::builtin("rest").unwrap()),
            revision: 1,
            variant: None,
            input,
            idempotency: None,
        }
    }

    fn counter_mock() -> Value {
        json!({"schema_version": 1, "default_variant": "v", "initial_state": {"n": 0},
            "variants": {"v": {"result": {"status": 200, "data": {"ok": true}},
                               "set_state": {"n": {"$input": "n"}}}}})
    }

    #[test]
    fn evaluate_commits_state_only_when_it_changes() {
        let mut st = AttemptState::default();
        st.state
            .insert("crm".into(), Map::from_iter([("n".into(), json!(0))]));
        let same = prepared(counter_mock(), json!({}), json!({"n": 0}));
        let d = evaluate(&mut st, &same);
        assert_eq!((d.result_status, d.new_state), (ResultStatus::Ok, None));
        let other = prepared(counter_mock(), json!({}), json!({"n": 1}));
        let d = evaluate(&mut st, &other);
        assert_eq!(
            d.new_state,
            Some(("crm".into(), Map::from_iter([("n".into(), json!(1))])))
        );
    }

    #[test]
    fn static_results_are_settled_once_and_answer_as_rendered() {
        let p = prepared(counter_mock(), json!({}), json!({"n": 0}));
        let mut st = AttemptState::default();
        for _ in 0..2 {
            let d = evaluate(&mut st, &p);
            assert_eq!(d.result, json!({"status": 200, "data": {"ok": true}}));
            assert_eq!(d.response, p.wire.render(&d.result).unwrap());
        }
        let rendered = p.engine.decide(None, &p.input, &Map::new()).unwrap();
        let Rendered::Static(s) = rendered.result else {
            panic!("expected a static result");
        };
        assert!(settled(&p, s, "v", None).is_some());
    }

    #[test]
    fn a_static_result_that_breaks_the_output_schema_fails_every_call() {
        // `check` compares only the examples with the output schema; a rule no example
        // reaches can hold a literal result that breaks it.
        let mock = json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": {"status": 200, "data": {"ok": "yes"}},
            "rules": [{"when": [{"source": "input", "path": "r", "op": "exists"}]}]}}});
        let schema = json!({"type": "object", "properties": {"data": {"properties": {"ok": {"type": "boolean"}}}}});
        for _ in 0..2 {
            // Rule 0 has no `result` of its own: what it renders is the variant's, and the
            // error says so (it once named `rules/0/result`, a place that does not exist).
            for (input, at) in [
                (json!({}), "variants/v/result"),
                (json!({"r": 1}), "variants/v/result"),
            ] {
                let p = prepared(mock.clone(), schema.clone(), input);
                let d = evaluate(&mut AttemptState::default(), &p);
                assert_eq!(d.result_status, ResultStatus::HarnessError);
                let Some(CallError::Harness(e)) = &d.error else {
                    panic!("{:?}", d.error);
                };
                assert_eq!(e.code, HarnessCode::OutputSchemaViolation);
                assert_eq!(e.path.as_deref(), Some(at));
            }
        }
    }
}
