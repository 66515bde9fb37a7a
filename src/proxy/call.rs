//! The stages of one proxied call (docs/src/reference/modes.md, docs/src/reference/operation-files.md#matching), each a function that returns a value; the order
//! they run in is `super::pipeline` (HTTP profiles) and `super::mcp` (MCP tool calls, on
//! [`Wire::Mcp`]). None of them calls back into its callers.
//!
//! | stage | function | |
//! |---|---|---|
//! | identify | [`identify`] | the lease ([`check_lease`]), the integration, the operation, the input ([`build_input`]: path captures, query captures, then the JSON body — an object's members merged in, later sources overriding earlier ones; any other body under `body`; a body that is not JSON is an input error; a form body's fields are members too, typed by the input schema, `crate::http::form`), the write flag |
//! | plan | [`plan`] | the mode rule ([`super::decision::plan_for`]) for the identified call |
//! | prepare | [`prepare_mock`], [`prepare_operation`] | the operation file (`no_mock` for a built-in template), input validation (compiled once per contract), the pinned revision (`no_mock`, `stale_contract`), its engine, the idempotency key |
//! | evaluate | [`evaluate`] ([`evaluate`](mod@evaluate)) | idempotency — replay or 422 —, the pinned engine against the pre-call state, the output check and the wire's rendering, once per static result |
//! | run_mocked | [`run_mocked`], [`run_mocked_with_faults`] | lock → evaluate → [`plan_fault`] → commit → [`delay`] |
//! | commit | [`commit`], [`record`] ([`commit`](mod@commit)) | the one commit: the event and the new state in one store transaction under the lock, durable before the answer leaves; a failed flush withdraws what it published |
//!
//! Input and output validation are the call core's (`crate::operation::call`): the same
//! functions, error paths and wording as `understudy exec` and `POST /tools/execute`.

mod commit;
mod evaluate;
mod secrets;

pub use commit::{commit, record};
pub use evaluate::evaluate;
pub use secrets::{scrub, secret_values};

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::decision::{plan_for, Decision, Plan, StoreFailed};
use super::route::{self, Matched, Target};
use crate::app::attempt::{self, Attempt, AttemptState, RecordRef};
use crate::app::{App, Integration};
use crate::config::Mode;
use crate::contract::template::RequestView;
use crate::error::{HarnessCode, HarnessError, InputError};
use crate::http::NativeResponse;
use crate::http::Request;
use crate::mock::Engine;
use crate::operation::call::validate_input;
use crate::operation::fault::{self, FaultPlan};
use crate::operation::{IdempotencySource, Operation};
use crate::profile::{Profile, Wire};
use crate::records::{AttemptRecord, ResultStatus};

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
    /// The caller's trace: the `traceparent` header's here; [`commit`] settles it — an MCP
    /// call's `params._meta.traceparent` wins ([`crate::telemetry::CallContext::caller_of`]).
    pub trace_id: Option<String>,
    /// When the request arrived (the event's latency).
    pub received: Instant,
    /// The secret values the request carries, computed once
    /// (`super::forward::capture::secret_values`) for a call the mock does not answer —
    /// forwarded, blocked, simulated — whose `arguments` [`commit`] scrubs; `None` for the
    /// mock's calls, recorded as the agent sent them.
    pub secrets: Option<Arc<[String]>>,
    /// The caller's span and MCP session headers, for the call's exported span
    /// (`crate::app::telemetry`).
    pub span_context: crate::telemetry::CallContext,
}

impl CallInfo {
    /// A call of `integration` that no stage has looked at yet.
    pub fn new(req: &Request, integration: &str, arguments: Value) -> CallInfo {
        let mut info = CallInfo::received_at(req.received, integration, arguments);
        info.trace_id = trace_id(req);
        info.span_context = crate::telemetry::CallContext::of(
            |n| (req.header_count(n) == 1).then(|| req.header(n)).flatten(),
            &req.body,
        );
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
            span_context: Default::default(),
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

/// `trace_id` from a single valid W3C `traceparent` header (docs/src/reference/evidence-envelope.md#tool-events), else `None`.
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
        let mut body = body.map(|b| b.cloned()).map_err(Clone::clone);
        // A CSV body (a Salesforce Bulk API 2.0 upload) is text to an operation file: the
        // input's `body`, as the recorder drafts it. (The built-in upload records only its
        // columns and row count.)
        let file = matches!(matched.target, Target::File(_));
        if file && body.is_err() && req.header("content-type").is_some_and(is_csv) {
            if let Ok(text) = std::str::from_utf8(&req.body) {
                body = Ok(Some(Value::String(text.to_string())));
            }
        }
        // A form body's fields are text: typed by the operation's input schema.
        if let (Ok(Some(b)), Some(_), Target::File(op)) =
            (&mut body, req.form_body(), &matched.target)
        {
            crate::http::form::type_by_schema(b, &op.op.input_schema);
        }
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

/// Stage 2 — what happens to an identified call (docs/src/reference/modes.md; the table of `super::forward`). In
/// `replay` the mock decides every call that matched an operation, and a request that
/// matched none is refused (`unmatched_request`). In the other modes an operation file the
/// attempt pinned a mock of is the mock's in `dry-run` and `record-missing` (its refusals —
/// input errors, `stale_contract` — are the mock's to give); everything else follows the
/// mode's rule for unmocked calls ([`super::decision::unmocked`]).
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
    plan_for(app, pinned, info.is_write, id.integ)
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
        consumed,
    } = id;
    if let Ok(Resolved {
        target: Target::Builtin(b),
        ..
    }) = &resolved
    {
        if let Some(d) = builtin_default(app, record, integ, &profile, b, req, consumed, info) {
            return Err(Box::new(d));
        }
    }
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

/// The default answer of a built-in operation that has one (the Salesforce login and reads
/// without a file: `crate::profile::salesforce::defaults`), as the call's decided end: the
/// mock's answer, recorded with the arguments and result the profile chose (never a
/// credential or a token). `None` for every other built-in (`no_mock`).
#[allow(clippy::too_many_arguments)]
fn builtin_default(
    app: &App,
    record: &AttemptRecord,
    integ: &Integration,
    profile: &Profile,
    b: &crate::app::BuiltinOp,
    req: &Request,
    consumed: usize,
    info: &mut CallInfo,
) -> Option<Decision> {
    use crate::profile::salesforce::{defaults, login, model, org};
    if profile.kind() != Some(crate::contract::ProfileKind::Salesforce) {
        return None;
    }
    let key = format!("{}/{}", integ.name(), b.operation_id);
    let ctx = login::Ctx {
        instance_url: login::instance_url(req, consumed, integ.config.upstream.as_deref()),
        secret: &record.secret,
        attempt_id: &record.attempt_id,
        integration: integ.name(),
        variant: record.variants.get(&key).map(String::as_str),
        now_ms: app.clock.now().timestamp_millis(),
        // This call is the next one.
        calls: app
            .attempts
            .loaded(&record.attempt_id)
            .map_or(0, |a| a.calls.load(std::sync::atomic::Ordering::Relaxed))
            + 1,
    };
    let rel = &req.segments[consumed + 1..];
    if org::WITH_STATE.contains(&b.operation_id.as_str()) {
        // The org answers under the state lock (`settle_org`); a variant decides alone.
        if let Some(a) = defaults::org_variant(&b.operation_id, ctx.variant) {
            let mut d = default_decision(a, ctx.variant, info);
            d.chaos = Some(key);
            return Some(d);
        }
        let call = model::Call::of(
            req,
            rel,
            integ.name(),
            &b.operation_id,
            &record.secret,
            ctx.now_ms,
        );
        info.arguments = org::arguments(&call);
        let mut d = Decision::answered(
            NativeResponse {
                status: 500,
                headers: Vec::new(),
                body: None,
            },
            ResultStatus::Ok,
        );
        d.org = Some(Box::new(call));
        d.chaos = Some(key);
        return Some(d);
    }
    let a = defaults::answer(&b.operation_id, &ctx, req, rel)?;
    let mut d = default_decision(a, ctx.variant, info);
    d.chaos = Some(key);
    Some(d)
}

/// A default answer as the call's decided end.
fn default_decision(
    a: crate::profile::salesforce::login::Answer,
    variant: Option<&str>,
    info: &mut CallInfo,
) -> Decision {
    info.arguments = a.arguments;
    if let Some(e) = a.harness {
        return Decision::harness(e);
    }
    let status = if a.input_error {
        ResultStatus::InputError
    } else {
        ResultStatus::Ok
    };
    let mut d = Decision::answered(a.response, status);
    d.result = a.result;
    d.variant = variant.map(str::to_string);
    d
}

/// Stage 4 for a call of the Salesforce default org (`Decision::org`): its answer from the
/// org the attempt's pre-call state holds, and the new state when the call changed the org.
fn settle_org(state: &AttemptState, mut d: Decision) -> Decision {
    use crate::profile::salesforce::org;
    let Some(call) = d.org.take() else {
        return d;
    };
    let pre = state.state.get(&call.integration);
    let (a, changed) = org::answer(&call, pre.and_then(|m| m.get(org::STATE_KEY)));
    let status = if a.input_error {
        ResultStatus::InputError
    } else {
        ResultStatus::Ok
    };
    let mut out = Decision::answered(a.response, status);
    out.result = a.result;
    out.variant = d.variant;
    out.chaos = d.chaos;
    if let Some(o) = changed {
        let mut s = pre.cloned().unwrap_or_default();
        s.insert(org::STATE_KEY.into(), o);
        out.new_state = Some((call.integration.clone(), s));
    }
    out
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

/// Whether a `Content-Type` is CSV (`text/csv`, any parameters).
fn is_csv(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/csv"))
}

/// Stage 2 — build the input (docs/src/reference/operation-files.md#matching step 2): path captures, query captures (for built-in
/// templates, which have no query templates, every query parameter), then the JSON body:
/// an object's members are merged in (a member overrides a capture of the same name), any
/// other JSON value goes under `body`. A body that is not JSON is an input error (a CSV
/// body, read as text by the caller, is not).
pub fn build_input(
    matched: &Matched,
    query: &[(String, String)],
    include_query: bool,
    body: Result<Option<Value>, crate::http::request::BodyError>,
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
        Err(e) => {
            let too_deep = matches!(e, crate::http::request::BodyError::TooDeep { .. });
            return Err(InputError::of_body(e.to_string(), too_deep));
        }
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
    // docs/src/operations/fleet-store.md: a shared store's row lock and the pre-call state read under it (a no-op for
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
        Err(d) => {
            let mut d = settle_org(&state, *d);
            // A built-in's default answer: the attempt's chaos for it (no definition fault).
            let plan = match d.chaos.take() {
                Some(key) if faults => plan_fault_of(attempt, &mut state, &key, None, &mut d),
                _ => None,
            };
            (d, plan)
        }
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
    plan_fault_of(attempt, state, &p.op.key(), definition, d)
}

/// [`plan_fault`] for the operation `key` whose definition chose the fault `definition`
/// (`None` for a built-in's default answer: only the attempt's chaos can fault it).
fn plan_fault_of(
    attempt: &Attempt,
    state: &mut AttemptState,
    key: &str,
    definition: Option<crate::mock::model::Fault>,
    d: &mut Decision,
) -> Option<FaultPlan> {
    if d.result_status != ResultStatus::Ok {
        return None;
    }
    let chaos = attempt.read_record().faults.get(key).cloned();
    let plan = match &chaos {
        Some(c) => {
            let counter = state.chaos.entry(key.to_string()).or_default();
            fault::decide(definition.as_ref(), Some(c), counter, key)
        }
        None => fault::decide(definition.as_ref(), None, &mut Default::default(), key),
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

/// After stage 4's commit — sleep `delay_ms` (the state change is committed and the lock
/// released).
pub async fn delay(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

#[cfg(test)]
mod tests;
