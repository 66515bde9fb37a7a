//! One proxied HTTP-profile call from routing to commit (SPEC 4, 5), one documented function
//! per stage, run in this order by [`handle`] for every call in every mode:
//!
//! 1. [`identify`] — the attempt (`super::route`; 401 for an unknown token), its lease
//!    ([`check_lease`]), the integration, the operation, the input ([`build_input`]: path
//!    captures, query captures, then the JSON body — an object's members merged in, later
//!    sources overriding earlier ones; any other body under `body`; a body that is not JSON
//!    is an input error) and the write flag. A lease that is over, or a request that names no
//!    integration, ends the call here;
//! 2. [`plan`] — from the mode and whether the attempt pinned a mock of the matched
//!    operation: a [`Plan`] (the mock, the real system, a blocked or simulated write, or a
//!    refusal). Every plan but [`Plan::Mock`] is carried out by `super::forward`;
//! 3. [`prepare_mock`] — only for [`Plan::Mock`]: the operation file (`no_mock` for a
//!    built-in template), input validation ([`validate_input`], compiled once per contract),
//!    the pinned revision (`no_mock`, `stale_contract`), its engine, the idempotency key;
//! 4. [`run_mocked`] — **under the attempt's state lock**: [`evaluate`] (idempotency — replay
//!    or 422 —, then the pinned revision's engine against the integration's pre-call state,
//!    [`validate_output`] and the wire's rendering, once per static result: `settled`), then
//!    [`plan_fault`] (HTTP calls: the attempt's chaos or the definition's fault, which decides
//!    whether the effect is committed; [`crate::operation::fault`]), then [`commit`], then [`delay`]
//!    (`delay_ms`, after the lock is released); a faulted call's answer is then put on the
//!    wire by [`faulted`] (the aborts are the server's: `crate::http::fault`);
//! 5. [`commit`] — the one commit of every call, whatever stage or plan ended it (STYLE
//!    habit 10): the event and the integration's new state are written in one store
//!    transaction under the lock, the new state becomes visible to the next call, the lock is
//!    released, then the group flush makes the write durable (the answer never leaves before
//!    its evidence is on disk, yet calls share fsyncs). `Err` is [`StoreFailed`]: the 500 to
//!    answer instead — an unrecorded call is never answered. A call answered `store_error`
//!    changes nothing (SPEC 3.3): the change it published is withdrawn before the 500 leaves
//!    ([`withdraw`], from the rollback copy the commit kept), so the next call never sees it.
//!
//! Stages 1–4 return values ([`Plan`], [`Prepared`], [`Decision`]); only stage 5 commits.
//! Input and output validation are the call core's (`crate::operation::call`): the same
//! functions, error paths and wording as `understudy exec` and `POST /tools/execute`. MCP
//! tool calls (`super::mcp`, `super::forward::mcp`) run stages 3–5 with [`Wire::Mcp`].

use std::collections::hash_map::Entry;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::answer::StaticAnswer;
pub use super::decision::{Committed, Decision, Plan, StoreFailed};
use super::route::{self, Matched, Target};
use crate::app::attempt::{self, Attempt, AttemptState, IdempotentEntry, RecordRef};
use crate::app::{App, Integration};
use crate::config::Mode;
use crate::contract::template::RequestView;
use crate::contract::ResultForm;
use crate::error::{CallError, HarnessCode, HarnessError, InputError};
use crate::http::{to_http, to_http_with, HttpResponse, Request};
use crate::mock::eval::{Rendered, StaticResult};
use crate::mock::path::json_identical;
use crate::mock::Engine;
use crate::operation::call::{validate_input, validate_output};
use crate::operation::fault::{self, FaultAnswer, FaultPlan};
use crate::operation::{IdempotencySource, Operation};
pub use crate::profile::Wire;
use crate::profile::{NativeResponse, Profile};
use crate::records::{AttemptRecord, EventSource, ResultStatus, ToolEvent};
use crate::store::{CallRecord, StoreError};

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
    /// When the request arrived (the event's latency).
    pub received: Instant,
    /// The secret values the request carries, computed once
    /// (`super::forward::capture::secret_values`) for a call the mock does not answer —
    /// forwarded, blocked, simulated — whose `arguments` [`commit`] scrubs; `None` for the
    /// mock's calls, recorded as the agent sent them.
    pub secrets: Option<Arc<[String]>>,
}

impl CallInfo {
    /// A call of `integration` that no stage has looked at yet.
    pub fn new(req: &Request, integration: &str, arguments: Value) -> CallInfo {
        let mut info = CallInfo::received_at(req.received, integration, arguments);
        info.trace_id = trace_id(req);
        info
    }

    /// [`CallInfo::new`] of a call without a buffered request (a refused `CONNECT`).
    pub fn received_at(received: Instant, integration: &str, arguments: Value) -> CallInfo {
        CallInfo {
            execution_attempt_id: crate::util::ids::new_uuid(),
            integration: integration.to_string(),
            operation_id: None,
            is_write: false,
            arguments,
            idempotency_key_ref: None,
            trace_id: None,
            received,
            secrets: None,
        }
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

/// What stage 1 found: the integration, its HTTP profile, and the operation.
pub struct Identified<'a> {
    pub integ: &'a Integration,
    pub profile: Arc<Profile>,
    /// How many leading path segments named the attempt.
    pub consumed: usize,
    /// The matched operation, or the `unmatched_request` message.
    pub resolved: Result<Resolved, String>,
}

/// The operation a request matched, and the input built for it (stage 2).
pub struct Resolved {
    pub target: Target,
    /// For a built-in template: the closest operation files, for the `no_mock` message.
    pub near_files: Option<String>,
    pub input: Result<Value, InputError>,
}

/// Run one proxied HTTP-profile call through every stage and answer it.
pub async fn handle(app: Arc<App>, req: Request) -> HttpResponse {
    let (attempt, consumed) = match route::attempt(&app, &req) {
        Ok(x) => x,
        Err(r) => return to_http(r.response()),
    };
    let integration = req.segments.get(consumed).cloned().unwrap_or_default();
    // `arguments` is set by `identify` once the input is built (always an object);
    // otherwise the raw request's description below.
    let mut info = CallInfo::new(&req, &integration, Value::Null);
    // Stages 1–3 read the attempt's record, borrowed (not held across an await).
    let staged = {
        let record = attempt.read_record();
        match identify(&app, &attempt, &record, consumed, &req, &mut info) {
            Err(d) => Staged::Mocked(Err(d)),
            Ok(id) => match plan(&app, &record, &id, &info) {
                Plan::Mock => Staged::Mocked(prepare_mock(&app, &record, id, &req, &mut info)),
                Plan::Refuse(d) => Staged::Mocked(Err(d)),
                unmocked => Staged::Unmocked(id, unmocked),
            },
        }
    };
    if info.arguments.is_null() {
        info.arguments = req.describe();
    }
    let prepared = match staged {
        Staged::Mocked(p) => p,
        Staged::Unmocked(id, plan) => {
            return super::forward::run(&app, attempt, req, info, id, plan).await
        }
    };
    let profile = match &prepared {
        Ok(Prepared {
            wire: Wire::Http(p),
            ..
        }) => Some(p.clone()),
        _ => None,
    };
    // A settled static answer goes out as its prebuilt bytes (`super::answer`).
    let shared = |d: &Decision| d.shared.clone();
    match run_mocked_with_faults(&app, &attempt, info, prepared, true, shared).await {
        Ok((_, None, Some(answer))) => answer.to_http(),
        Ok((response, None, None)) => to_http(response),
        Ok((response, Some(plan), _)) => faulted(&plan, response, profile.as_deref()),
        Err(f) => to_http(f.response),
    }
}

/// What goes on the wire for a faulted HTTP call instead of its decided `response`
/// ([`FaultAnswer`]; `crate::http::fault` for the aborts). `profile`: the integration's, for
/// a `status` fault's native error body.
pub fn faulted(
    plan: &FaultPlan,
    response: NativeResponse,
    profile: Option<&Profile>,
) -> HttpResponse {
    use crate::http::fault::{self as wire, Abort};
    match &plan.answer {
        FaultAnswer::Reset => wire::aborted(Abort::Reset),
        FaultAnswer::Close => wire::aborted(Abort::Close),
        FaultAnswer::Hold { ms } => wire::aborted(Abort::Hold { ms: *ms }),
        FaultAnswer::SlowBody { chunks, ms } => {
            to_http_with(response, |b| wire::slow(b, *chunks, *ms))
        }
        FaultAnswer::Truncated => to_http_with(response, wire::truncated),
        FaultAnswer::Status { status, headers } => to_http(fault_status(*status, headers, profile)),
        // `check` refuses MCP kinds on HTTP operations (and chaos specs alike); should one
        // get here, no answer leaves rather than an unfaulted one.
        FaultAnswer::JsonRpcError { .. } | FaultAnswer::StreamCut => wire::aborted(Abort::Close),
    }
}

/// A `status` fault's answer: the profile's native error body (its input-error shape, with
/// the error code it gives that status) at `status`, with the fault's extra headers.
pub fn fault_status(
    status: u16,
    headers: &[(String, String)],
    profile: Option<&Profile>,
) -> NativeResponse {
    let reason = hyper::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("error");
    let mut e = InputError::new(format!(
        "{status} {reason} (a fault injected by understudy)"
    ));
    e.status = status;
    let mut r = match profile {
        Some(p) => p.input_error(&e),
        None => NativeResponse {
            status,
            headers: Vec::new(),
            body: Some(json!({"error": {"message": e.message}})),
        },
    };
    r.status = status;
    r.headers.extend(headers.iter().cloned());
    r
}

/// Where stages 1–3 left a call: the mock's (prepared, or its decided end), or another plan
/// with what stage 1 identified.
enum Staged<'a> {
    Mocked(Result<Prepared, Box<Decision>>),
    Unmocked(Identified<'a>, Plan),
}

/// `trace_id` from a single valid W3C `traceparent` header (PROTOCOLS 4.1), else `None`.
pub fn trace_id(req: &Request) -> Option<String> {
    if req.header_count("traceparent") != 1 {
        return None;
    }
    attempt::trace_id(req.header("traceparent")?)
}

/// Stage 1 — the lease, the integration, the operation, the input and the write flag
/// (`info.operation_id`, `info.is_write`, `info.arguments` once the input is built). `Err` is
/// the decided end of the call in every mode: a lease that is over, a request that names no
/// integration, or the non-endpoint path of an `mcp` integration.
pub fn identify<'a>(
    app: &'a App,
    attempt: &Attempt,
    record: &RecordRef<'_>,
    consumed: usize,
    req: &Request,
    info: &mut CallInfo,
) -> Result<Identified<'a>, Box<Decision>> {
    check_lease(app, record)?;
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
        return Err(Box::new(Decision::harness(HarnessError::new(
            HarnessCode::UnmatchedRequest,
            msg,
        ))));
    };
    let Wire::Http(profile) = &integ.wire else {
        // An `mcp` integration: its endpoint is the base URL itself (`super::mcp`).
        return Err(Box::new(Decision::harness(HarnessError::new(
            HarnessCode::UnmatchedRequest,
            format!(
                "{} is not the endpoint of `{}`: a `{}` integration is served at its base URL /{} itself",
                req.line(),
                integ.name(),
                integ.config.profile,
                integ.name()
            ),
        ))));
    };
    // The operation.
    let rel = &req.segments[consumed + 1..];
    let mut query = req.query.clone();
    let method = profile.effective_method(&req.method, &mut query);
    let body = req.json();
    let view = RequestView {
        method: &method,
        segments: rel,
        query: &query,
        headers: &req.headers,
    };
    info.is_write = profile.is_write(&method, rel, body.ok().flatten());
    let resolved = route::operation_with(integ, Some(&integ.routes), &view, req).map(|matched| {
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
        let body = body.map(|b| b.cloned()).map_err(str::to_string);
        let input = build_input(&matched, &query, include_query, body);
        if let Ok(input) = &input {
            info.arguments = input.clone();
        }
        Resolved {
            target: matched.target,
            near_files: matched.near_files,
            input,
        }
    });
    Ok(Identified {
        integ,
        profile: profile.clone(),
        consumed,
        resolved,
    })
}

/// Stage 1b — the lease: a call after it expired, or after the attempt ended, is the
/// harness error `lease_expired`.
pub fn check_lease(app: &App, record: &RecordRef<'_>) -> Result<(), Box<Decision>> {
    match attempt::lease_error(record, record.lease(app.clock.now())) {
        None => Ok(()),
        Some(e) => Err(Box::new(Decision::harness(e))),
    }
}

/// Stage 2 — what happens to an identified call (SPEC 4; the table of `super::forward`). In
/// `replay` the mock decides every call that matched an operation, and a request that
/// matched none is refused (`unmatched_request`). In the other modes an operation file the
/// attempt pinned a mock of is the mock's in `dry-run` and `record-missing` (its refusals —
/// input errors, `stale_contract` — are the mock's to give); everything else follows the
/// mode's rule for unmocked calls ([`super::forward::policy::unmocked`]).
pub fn plan(app: &App, record: &AttemptRecord, id: &Identified<'_>, info: &CallInfo) -> Plan {
    if app.mode == Mode::Replay {
        return match &id.resolved {
            Ok(_) => Plan::Mock,
            Err(m) => Plan::Refuse(Box::new(Decision::harness(HarnessError::new(
                HarnessCode::UnmatchedRequest,
                m.clone(),
            )))),
        };
    }
    let pinned = match &id.resolved {
        Ok(Resolved {
            target: Target::File(op),
            ..
        }) => record.pins.contains_key(&op.key()),
        _ => false,
    };
    super::forward::policy::plan_for(app, pinned, info.is_write, id.integ)
}

/// Stage 3 — for [`Plan::Mock`]: the operation file of the matched operation (a built-in
/// template has no mock: `no_mock`), the input, then [`prepare_operation`]. `Err` is the
/// decided end of the call (recorded like any other).
pub fn prepare_mock(
    app: &App,
    record: &AttemptRecord,
    id: Identified<'_>,
    req: &Request,
    info: &mut CallInfo,
) -> Result<Prepared, Box<Decision>> {
    let Identified {
        integ,
        profile,
        resolved,
        ..
    } = id;
    let resolved = resolved.map_err(|m| {
        Box::new(Decision::harness(HarnessError::new(
            HarnessCode::UnmatchedRequest,
            m,
        )))
    })?;
    let input = resolved
        .input
        .map_err(|e| Box::new(Decision::input(&profile, e)))?;
    let op = match resolved.target {
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
            if let Some(near) = &resolved.near_files {
                msg.push_str(&format!("; closest operation files: {near}"));
            }
            return Err(Box::new(Decision::harness(HarnessError::new(
                HarnessCode::NoMock,
                msg,
            ))));
        }
    };
    prepare_operation(app, record, integ, op, input, req, info)
}

/// Input validation and the pin lookup of a resolved operation file, shared by HTTP calls
/// and MCP tool calls (`super::mcp`, on the integration's wire): input validation, the pinned
/// revision (`no_mock`, `stale_contract`), its engine, the idempotency key.
pub fn prepare_operation(
    app: &App,
    record: &AttemptRecord,
    integ: &Integration,
    op: Arc<Operation>,
    input: Value,
    req: &Request,
    info: &mut CallInfo,
) -> Result<Prepared, Box<Decision>> {
    let wire = &integ.wire;
    validate_input(&op, &input).map_err(|e| Box::new(Decision::input_on(wire, e)))?;
    // The pinned revision.
    let key = op.key();
    let Some(pin) = record.pins.get(&key) else {
        return Err(Box::new(Decision::harness_on(
            wire,
            HarnessError::new(
                HarnessCode::NoMock,
                no_pin_message(app, integ, &op, &record.attempt_id),
            ),
        )));
    };
    if let Some(e) = attempt::stale_pin(Some(&record.attempt_id), &key, pin, &op.contract_hash) {
        return Err(Box::new(
            Decision::harness_on(wire, e).at(Some(pin.revision), None),
        ));
    }
    let engine = app
        .engines
        .get(&app.store, &op, pin)
        .map_err(|e| Box::new(Decision::error_on(wire, e).at(Some(pin.revision), None)))?;
    let idempotency = idempotency_key(op.idempotency.as_ref(), req, &input).map(|k| {
        let r = attempt::idempotency_key_ref(&record.secret, &k);
        info.idempotency_key_ref = Some(r.clone());
        (key.clone(), r)
    });
    Ok(Prepared {
        variant: record.variants.get(&key).cloned(),
        revision: pin.revision,
        op,
        wire: wire.clone(),
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
        Err(m) => return Err(InputError::of_body(m)),
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
                        source: EventSource::Mock,
                        error: None,
                        revision: first.revision,
                        variant: first.variant.clone(),
                        rule: first.rule,
                        delay_ms: 0,
                        new_state: None,
                        remember: None,
                        fault: None,
                        fault_record: None,
                        shared: None,
                    },
                    Err(e) => Decision::harness_on(&p.wire, e),
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
        Err(e) => return Decision::error_on(&p.wire, e),
    };
    // Stages 5 and 6: once per static result (see `settled`), else for this call.
    let settled = match &outcome.result {
        Rendered::Static(s) => settled(p, s, outcome.variant, outcome.rule),
        Rendered::Dynamic(_) => None,
    };
    // A settled answer with prebuilt wire bytes is shared, not copied (`Decision::shared`).
    let (response, shared) = match settled {
        Some(a) if a.shareable() => (a.head(), Some(a.clone())),
        Some(a) => (a.response.clone(), None),
        None => match check_and_render(p, outcome.result.value(), outcome.variant, outcome.rule) {
            Ok(r) => (r, None),
            Err(d) => return *d,
        },
    };
    let new_state = patched_state(pre, outcome.state_patch).map(|s| (p.op.integration.clone(), s));
    let result = match &shared {
        Some(_) => Value::Null,
        None => outcome.result.into_value(),
    };
    let variant = outcome.variant.to_string();
    let remember = p.idempotency.clone().map(|k| {
        (
            k,
            IdempotentEntry {
                arguments: p.input.clone(),
                result: shared
                    .as_ref()
                    .map_or_else(|| result.clone(), |a| Value::clone(&a.result)),
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
        source: EventSource::Mock,
        error: None,
        revision: Some(p.revision),
        variant: Some(variant),
        rule: outcome.rule,
        delay_ms: outcome.delay_ms,
        new_state,
        remember,
        fault: outcome.fault.cloned(),
        fault_record: None,
        shared,
    }
}

/// Stages 5 and 6 of one result: the output check, then the native response. `Err` is the
/// decided end of the call.
fn check_and_render(
    p: &Prepared,
    result: &Value,
    variant: &str,
    rule: Option<usize>,
) -> Result<NativeResponse, Box<Decision>> {
    // Stage 5.
    if let Err(v) = validate_output(&p.op, p.engine.definition(), result, variant, rule) {
        let mut d = Decision::harness_on(&p.wire, v.error);
        d.variant = Some(variant.to_string());
        d.rule = rule;
        return Err(Box::new(d));
    }
    // Stage 6.
    p.wire
        .render(result)
        .map_err(|e| Box::new(Decision::harness_on(&p.wire, e)))
}

/// Stages 5 and 6 of a static result, done on its first call and kept in the compiled
/// revision ([`StaticResult::memo`]) with what else the answer needs that does not depend
/// on the call ([`StaticAnswer`]: the wire bytes, the event's `result` JSON): what they
/// decide depends only on the result and on
/// what is fixed per contract — the output schema and the operation id (both in the contract
/// hash, which every call of a pinned revision shares), the result form and the wire. A
/// result that fails them is not kept: such calls run the stages every time (the harness
/// error names the rule that selected the result, which can differ per call).
fn settled<'s>(
    p: &Prepared,
    s: &'s StaticResult,
    variant: &str,
    rule: Option<usize>,
) -> Option<&'s Arc<StaticAnswer>> {
    let mcp = matches!(p.wire, Wire::Mcp);
    let m = s.memo(|v| Settled {
        contract_hash: p.op.contract_hash.clone(),
        result_form: p.op.op.result_form,
        mcp,
        response: check_and_render(p, v, variant, rule)
            .ok()
            .map(|r| Arc::new(StaticAnswer::new(r, s.value().clone(), !mcp))),
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
    response: Option<Arc<StaticAnswer>>,
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

/// Stage 4 — lock → evaluate → commit → delay: the one mocked run of every call the mock
/// decides (HTTP and MCP, every mode) and of every call refused before evaluation
/// (`prepared` is `Err`: its decision is committed as is). `seen` looks at the decision
/// before it is committed (an MCP caller keeps the tool-call outcome for the dialect). The
/// delay runs after the lock is released and only once the evidence is durable.
///
/// [`run_mocked`] decides no fault (calls refused before evaluation, e.g. MCP's
/// `lease_expired`); HTTP calls and MCP tool calls run [`run_mocked_with_faults`].
pub async fn run_mocked<T>(
    app: &App,
    attempt: &Attempt,
    info: CallInfo,
    prepared: Result<Prepared, Box<Decision>>,
    seen: impl FnOnce(&Decision) -> T,
) -> Result<(NativeResponse, T), StoreFailed> {
    let (response, _, seen) =
        run_mocked_with_faults(app, attempt, info, prepared, false, seen).await?;
    Ok((response, seen))
}

/// [`run_mocked`], deciding the call's fault when `faults` ([`plan_fault`], under the lock
/// after evaluation): the plan comes back with the decided response, for the caller to put
/// on the wire instead. The evidence (and the state change, when the fault is after the
/// effect) is committed and durable before it returns, as for any call.
pub async fn run_mocked_with_faults<T>(
    app: &App,
    attempt: &Attempt,
    info: CallInfo,
    prepared: Result<Prepared, Box<Decision>>,
    faults: bool,
    seen: impl FnOnce(&Decision) -> T,
) -> Result<(NativeResponse, Option<FaultPlan>, T), StoreFailed> {
    let mut state = attempt.lock.lock().await;
    // SPEC 17: a shared store's row lock and the pre-call state read under it (a no-op for
    // the embedded store); held until after the commit's `write_call`.
    let _row = attempt::lock_in_store(&app.store, &attempt.id, &mut state).await;
    let (decision, plan) = match prepared {
        Ok(p) => {
            let mut d = evaluate(&mut state, &p).at(Some(p.revision), p.variant.clone());
            let plan = if faults {
                plan_fault(attempt, &mut state, &p, &mut d)
            } else {
                None
            };
            (d, plan)
        }
        Err(d) => (*d, None),
    };
    let seen = seen(&decision);
    let committed = commit(app, attempt, state, info, decision).await?;
    delay(committed.delay_ms).await;
    Ok((committed.response, plan, seen))
}

/// Stage 4b — the call's fault ([`crate::operation::fault::decide`]), under the state lock, after
/// evaluation and the output check, before the commit. Only a call that evaluated to an
/// answer (`ok`) can fault: input and harness errors and idempotent replays (`replayed`:
/// never faulted, no chaos index consumed) are answered as they are. The attempt's chaos
/// for the operation wins over the definition's fault. A fault before the effect
/// (`after_effect: false`) drops the state change and the idempotency entry — nothing
/// changed, so a retry with the same key evaluates afresh — and the call is `blocked`; one
/// after the effect commits both and stays `ok`. Either way the event carries the `fault`
/// member and the decided `result` and `http_status`.
pub fn plan_fault(
    attempt: &Attempt,
    state: &mut AttemptState,
    p: &Prepared,
    d: &mut Decision,
) -> Option<FaultPlan> {
    let definition = d.fault.take();
    if d.result_status != ResultStatus::Ok {
        return None;
    }
    let key = p.op.key();
    let chaos = attempt.read_record().faults.get(&key).cloned();
    let plan = match &chaos {
        Some(c) => {
            let counter = state.chaos.entry(key.clone()).or_default();
            fault::decide(definition.as_ref(), Some(c), counter, &key)
        }
        None => fault::decide(definition.as_ref(), None, &mut Default::default(), &key),
    }?;
    if !plan.commit_effect {
        d.new_state = None;
        d.remember = None;
    }
    // The faulted answer is built from the response's body.
    d.unshare();
    d.result_status = plan.result_status();
    d.fault_record = Some(plan.record(d.response.status));
    Some(plan)
}

/// [`commit`] of a call decided without the attempt's state (forwarded, blocked, simulated,
/// or failed to forward): takes the state lock, so its event is ordered with the others,
/// and with a shared store the attempt's row lock too (its state read under it, so this
/// process's copy stays current for the next mocked call).
pub async fn record(
    app: &App,
    attempt: &Attempt,
    info: CallInfo,
    decision: Decision,
) -> Result<Committed, StoreFailed> {
    let mut state = attempt.lock.lock().await;
    let _row = attempt::lock_in_store(&app.store, &attempt.id, &mut state).await;
    commit(app, attempt, state, info, decision).await
}

/// Stage 5 — the one commit: write the call's evidence (and the integration's new state)
/// in one store transaction under the state lock, make the new state and the idempotency
/// entry visible, release the lock, then wait for the group flush that makes the write
/// durable: the answer never leaves before its evidence is on disk, yet calls to one attempt
/// share fsyncs. The arguments of a call that carries its secret set (`info.secrets`) are
/// scrubbed first. A failed write commits nothing and is [`StoreFailed`]; so is a failed
/// *flush* (disk gone): the write stays in the store's log and may or may not survive a
/// crash, so it is never acknowledged — and the state change it published is withdrawn
/// ([`withdraw`]) before the 500 is returned. Publishing before the flush keeps the group
/// commit (the next call of the attempt runs during this one's fsync); the rollback copy is
/// the replaced state itself, moved out, not cloned.
pub async fn commit(
    app: &App,
    attempt: &Attempt,
    state: tokio::sync::MutexGuard<'_, AttemptState>,
    info: CallInfo,
    d: Decision,
) -> Result<Committed, StoreFailed> {
    commit_as(app, attempt, state, info, d, false).await
}

/// [`commit`]; `withdrawal`: the record of a [`withdraw`] (nothing to withdraw if it fails,
/// and no second count of the failure).
async fn commit_as(
    app: &App,
    attempt: &Attempt,
    mut state: tokio::sync::MutexGuard<'_, AttemptState>,
    mut info: CallInfo,
    mut d: Decision,
    withdrawal: bool,
) -> Result<Committed, StoreFailed> {
    if let Some(secrets) = &info.secrets {
        super::forward::capture::scrub(app, secrets, &mut info.arguments);
    }
    // The result moves into the event (no deep copy per call): nothing below reads it.
    let result = std::mem::take(&mut d.result);
    let (event, latency_ms) = tool_event(app, &mut info, &d, result);
    let rec = CallRecord {
        event,
        state: d.new_state.clone(),
        result_json: d.shared.as_ref().and_then(|a| a.result_json.clone()),
    };
    let op_name = info.operation_id.as_deref().unwrap_or("");
    let written = app.store.write_call(&attempt.id, rec);
    let undo = match &written {
        Ok(seq) => publish(&mut state, &mut d, *seq),
        Err(_) => None,
    };
    drop(state);
    let durable = match written {
        // Durability `attempt`: flushed in the background, durable by the verdict read.
        Ok(seq) => app
            .store
            .acknowledge(attempt.durability)
            .await
            .map(|()| seq),
        Err(e) => Err(e),
    };
    let e = match durable {
        Ok(sequence) => {
            app.metrics.observe(
                &info.integration,
                op_name,
                d.result_status.as_str(),
                latency_ms,
            );
            match &d.error {
                Some(CallError::Harness(e)) => tracing::warn!(
                    attempt = %attempt.id, sequence, integration = %info.integration,
                    operation = op_name, code = %e.code, "harness error: {}", e.message
                ),
                Some(CallError::Input(e)) => tracing::info!(
                    attempt = %attempt.id, sequence, integration = %info.integration,
                    operation = op_name, "input error: {}", e.message
                ),
                None => tracing::debug!(
                    attempt = %attempt.id, sequence, integration = %info.integration,
                    operation = op_name, status = d.response.status,
                    result_status = d.result_status.as_str(), source = d.source.as_str(), "call"
                ),
            }
            return Ok(Committed {
                sequence,
                response: d.response,
                delay_ms: d.delay_ms,
            });
        }
        Err(e) => e,
    };
    tracing::error!(attempt = %attempt.id, error = %e, "cannot record the call's evidence");
    if withdrawal {
        return Err(store_failed(&e));
    }
    if let Some(undo) = undo {
        withdraw(app, attempt, undo, &info.integration, &e).await;
    }
    attempt
        .store_failures
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    app.metrics
        .observe(&info.integration, op_name, "store_error", latency_ms);
    Err(store_failed(&e))
}

/// The 500 `store_error` of a call whose evidence could not be recorded.
fn store_failed(e: &StoreError) -> StoreFailed {
    let body = json!({ "understudy_error": {
        "kind": "internal_error",
        "code": "store_error",
        "message": format!("the call could not be recorded, so it was not answered: {e}"),
    }});
    StoreFailed {
        response: NativeResponse {
            status: 500,
            headers: vec![("Understudy-Error".into(), "store_error".into())],
            body: Some(body),
        },
    }
}

/// What a commit published before its flush, kept until the flush answered: enough to put
/// it back ([`withdraw`]).
struct Undo {
    /// The call's sequence in the evidence.
    sequence: u64,
    /// `AttemptState::published` once this change was published.
    version: u64,
    /// The integration whose state the call replaced, and what it replaced.
    state: Option<(String, Option<Map<String, Value>>)>,
    /// The idempotency entry the call added.
    remembered: Option<(String, String)>,
}

/// Make the decision's state change and idempotency entry visible to the next call (under
/// the lock, once its evidence is written); `Some` when something changed.
fn publish(state: &mut AttemptState, d: &mut Decision, sequence: u64) -> Option<Undo> {
    let replaced = d.new_state.take().map(|(integ, s)| {
        let old = state.state.insert(integ.clone(), s);
        (integ, old)
    });
    let remembered = d
        .remember
        .take()
        .and_then(|(k, e)| match state.idempotency.entry(k) {
            Entry::Vacant(v) => {
                let k = v.key().clone();
                v.insert(e);
                Some(k)
            }
            Entry::Occupied(_) => None,
        });
    if replaced.is_none() && remembered.is_none() {
        return None;
    }
    state.published += 1;
    Some(Undo {
        sequence,
        version: state.published,
        state: replaced,
        remembered,
    })
}

/// SPEC 3.3 for a call answered `store_error` after its change was published: under the
/// lock again, put back the state and idempotency entry it replaced — unless a later call
/// already published a change built on it (then the evidence, where that call follows this
/// one, explains the state; the attempt fails on `store_failures` either way). The embedded
/// store keeps the failed call's write queued (a later flush may still commit it), so the
/// withdrawal is recorded too: a harness error `store_error` carrying the restored state,
/// which fails the verdict for good and makes the store's state the one the next call
/// sees. A shared store (PostgreSQL) rolled the failed transaction back, and every call
/// reads the state under its row lock: nothing to do.
fn withdraw<'a>(
    app: &'a App,
    attempt: &'a Attempt,
    undo: Undo,
    integration: &'a str,
    why: &'a StoreError,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        if app.store.is_shared() {
            return;
        }
        let mut state = attempt.lock.lock().await;
        if state.published != undo.version {
            tracing::error!(
                attempt = %attempt.id, sequence = undo.sequence,
                "a call answered store_error is not withdrawn: a later call already built on its state change"
            );
            return;
        }
        if let Some(k) = &undo.remembered {
            state.idempotency.remove(k);
        }
        let restored = undo.state.map(|(integ, old)| {
            let old = old.unwrap_or_default();
            state.state.insert(integ.clone(), old.clone());
            (integ, old)
        });
        state.published += 1;
        let info = CallInfo::received_at(
            Instant::now(),
            restored.as_ref().map_or(integration, |(i, _)| i.as_str()),
            json!({ "withdrawn_sequence": undo.sequence }),
        );
        let mut d = Decision::harness(HarnessError::new(
            HarnessCode::StoreError,
            format!(
                "call #{} was answered 500 store_error (its evidence could not be made durable: {why}); its state change is withdrawn",
                undo.sequence
            ),
        ));
        d.new_state = restored;
        if commit_as(app, attempt, state, info, d, true).await.is_err() {
            tracing::error!(attempt = %attempt.id, sequence = undo.sequence, "cannot record the withdrawal of a call answered store_error");
        }
    })
}

/// The evidence event of one decided call (its `result` given), and its latency so far
/// (ms). Takes the per-call fields out of `info` (its integration and operation id stay for
/// logging); the store assigns the sequence; `http_status` is the decision's.
fn tool_event(app: &App, info: &mut CallInfo, d: &Decision, result: Value) -> (ToolEvent, f64) {
    let latency_ms = info.received.elapsed().as_secs_f64() * 1000.0;
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
        result,
        result_status: d.result_status.clone(),
        http_status: d.response.status,
        latency_ms,
        delay_ms: d.delay_ms,
        idempotency_key_ref: info.idempotency_key_ref.take(),
        trace_id: info.trace_id.take(),
        source: d.source.clone(),
        error: d.error.as_ref().map(CallError::to_json),
        timestamp: crate::util::time::rfc3339(app.clock.now()),
        fault: d.fault_record.clone(),
    };
    (event, latency_ms)
}

/// After stage 4's commit — sleep `delay_ms` (the state change is committed and the lock
/// released).
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
        let op = Operation::compile("crm", crate::contract::ProfileKind::Rest, loaded).unwrap();
        Prepared {
            engine: op.engine().unwrap().unwrap(),
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

    /// What goes on the wire: status, headers, body bytes.
    async fn wire(r: HttpResponse) -> (u16, Vec<(String, String)>, bytes::Bytes) {
        use http_body_util::BodyExt;
        let (parts, body) = r.into_parts();
        let headers = parts
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        let body = body.collect().await.unwrap().to_bytes();
        (parts.status.as_u16(), headers, body)
    }

    #[tokio::test]
    async fn static_results_are_settled_once_and_shared_as_rendered() {
        let p = prepared(counter_mock(), json!({}), json!({"n": 0}));
        let mut st = AttemptState::default();
        let expected = json!({"status": 200, "data": {"ok": true}});
        let rendered = p.wire.render(&expected).unwrap();
        let mut first: Option<Arc<StaticAnswer>> = None;
        for _ in 0..2 {
            let mut d = evaluate(&mut st, &p);
            // Shared, not copied: the decision holds the head and no result, and every call
            // gets the same answer.
            let a = d.shared.clone().expect("a shared static answer");
            assert!(first.as_ref().is_none_or(|f| Arc::ptr_eq(f, &a)));
            first = Some(a.clone());
            assert_eq!(d.response.body, None);
            assert_eq!(d.response.status, 200);
            assert_eq!(d.result, Value::Null);
            // The prebuilt wire and event JSON are what rendering and serializing give.
            assert_eq!(
                wire(a.to_http()).await,
                wire(to_http(rendered.clone())).await
            );
            assert_eq!(
                a.result_json.as_ref().unwrap().as_bytes(),
                serde_json::to_vec(&expected).unwrap()
            );
            d.unshare();
            assert_eq!((&d.result, &d.response), (&expected, &rendered));
            assert!(d.shared.is_none());
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
