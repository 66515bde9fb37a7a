//! The attempt routes: create (`POST /attempts`), read, evidence and end, with the lookup
//! the other admin routes share (split from `mod.rs` to keep each file readable).

use super::*;

/// The body of `POST /attempts`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateAttempt {
    #[serde(default)]
    test_run_id: Option<String>,
    #[serde(default)]
    variants: BTreeMap<String, String>,
    #[serde(default)]
    ttl_s: Option<u64>,
    #[serde(default)]
    contracts: Vec<String>,
    /// Seeded chaos per operation (`crate::operation::fault`).
    #[serde(default)]
    faults: crate::records::ChaosFaults,
    /// When its calls are durable; the project's `durability` when absent.
    #[serde(default)]
    durability: Option<crate::records::Durability>,
    /// `false`: an attempt with no call and no agent-side event may pass (else `no_calls`).
    #[serde(default)]
    expect_calls: Option<bool>,
    /// `true`: while it is open, a call without its token fails it (`outside_attempt`).
    #[serde(default)]
    exclusive: bool,
}

pub(super) fn create_attempt(app: &App, req: &Request) -> ApiResult {
    let body: CreateAttempt = match req.json_body() {
        Ok(None) => CreateAttempt::default(),
        Ok(Some(v)) => from_value(&v, "attempt creation body")?,
        Err(e) => return Err(ApiError::of_body(e, "attempt creation body")),
    };
    let ttl = body.ttl_s.unwrap_or(DEFAULT_TTL_S);
    if ttl == 0 || ttl > MAX_TTL_S {
        return Err(ApiError::bad_request(format!(
            "ttl_s must be 1..={MAX_TTL_S} seconds, got {ttl}"
        )));
    }
    let unknown: Vec<Value> = body
        .variants
        .keys()
        .filter(|k| app.operation(k).is_none() && !app.builtin_default(k))
        .map(|k| json!(k))
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_operation",
            "`variants` names operations this server does not have: expected keys \"<integration>/<operation_id>\"",
        )
        .with_details(unknown));
    }
    let contracts = app
        .contracts
        .pin(&body.contracts)
        .map_err(|u| verify::unknown_contract_error(&u))?;
    fault_problems(app, &body.faults)?;
    let token = attempt::new_token();
    let a = {
        // Pin and bind under the change lock: the pins and the operation set the attempt
        // keeps are of the same generation (`app::generations`).
        let _g = app.integrations.change_lock();
        let pinned = app.pin_latest().map_err(store_err)?;
        if !pinned.stale.is_empty() {
            let details = pinned
                .stale
                .iter()
                .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
                .collect();
            let names: Vec<&str> = pinned.stale.iter().map(|s| s.operation.as_str()).collect();
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "stale_contract",
                format!(
                    "cannot pin stale mocks (their contract changed since they were checked): {}; save a new revision for each (POST {PREFIX}/tools/{{integration}}/testing with action \"save\" and the current contract_hash)",
                    names.join(", ")
                ),
            )
            .with_details(details));
        }
        let new = attempt::NewAttempt {
            token: Some(&token),
            ttl_s: Some(ttl),
            test_run_id: body.test_run_id,
            pins: pinned.pins.clone(),
            variants: body.variants,
            is_default: false,
            contracts,
            faults: body.faults,
            durability: body.durability.unwrap_or(app.config.durability),
        };
        let mut rec = attempt::new_record(app.clock.now(), new);
        rec.expect_calls = body.expect_calls.unwrap_or(true);
        rec.exclusive = body.exclusive;
        app.create_attempt(rec).map_err(store_err)?
    };
    let rec = a.record();
    let host = req
        .header("host")
        .map(str::to_string)
        .or_else(|| app.local_addr().map(|a| a.to_string()))
        .unwrap_or_else(|| "127.0.0.1".into());
    let scheme = app.scheme();
    let base_urls: BTreeMap<&str, String> = app
        .integrations
        .keys()
        .map(|name| (name.as_str(), format!("{scheme}://{host}/~{token}/{name}")))
        .collect();
    tracing::info!(attempt = %rec.attempt_id, test_run_id = ?rec.test_run_id, "attempt created");
    let mut answer = json!({
        "attempt_id": rec.attempt_id,
        "token": token,
        "expires_at": rec.expires_at,
        "base_urls": base_urls,
        "revision_set": rec.pins.id(),
        "contracts": contract_pins(&rec),
        "durability": rec.durability.as_str(),
    });
    with_pins(&mut answer, &rec, req);
    Ok((StatusCode::CREATED, answer))
}

/// `?pins=true`: the answer lists the attempt's pins (one per operation) beside the id of
/// its revision set; without it only the id (issue 20: with thousands of operations the
/// list is the whole answer).
fn with_pins(answer: &mut Value, rec: &crate::records::AttemptRecord, req: &Request) {
    let wanted = req
        .query
        .iter()
        .any(|(k, v)| k == "pins" && matches!(v.as_str(), "true" | "1" | "yes"));
    if wanted {
        answer["pins"] = json!(rec.pins);
    }
}

/// `{id: {"contract_hash"}}` of the attempt's pinned tool-call contracts.
fn contract_pins(rec: &crate::records::AttemptRecord) -> Value {
    rec.contracts
        .iter()
        .map(|(k, p)| (k.clone(), json!({ "contract_hash": p.contract_hash })))
        .collect::<serde_json::Map<String, Value>>()
        .into()
}

/// `faults` of `POST /attempts`: 422 `unknown_operation` naming the keys this server does
/// not have, else 422 `invalid_fault` listing every problem (`faults/<key>/<field>: …`).
fn fault_problems(app: &App, faults: &crate::records::ChaosFaults) -> Result<(), ApiError> {
    let mut unknown = Vec::new();
    let mut problems = Vec::new();
    for (key, spec) in faults {
        // An operation file, or a built-in with a default answer (the Salesforce login,
        // reads and default org), which chaos can fault too.
        if app.operation(key).is_none() && !app.builtin_default(key) {
            unknown.push(json!(key));
            continue;
        }
        let mcp = key
            .split_once('/')
            .and_then(|(i, _)| app.integrations.get(i))
            .is_some_and(|i| matches!(i.wire, crate::profile::Wire::Mcp));
        problems.extend(
            crate::operation::fault::chaos_problems(key, spec, mcp)
                .into_iter()
                .map(Value::from),
        );
    }
    if !unknown.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_operation",
            "`faults` names operations this server does not have: expected keys \"<integration>/<operation_id>\"",
        )
        .with_details(unknown));
    }
    if !problems.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_fault",
            "`faults` has invalid entries (see details)",
        )
        .with_details(problems));
    }
    Ok(())
}

pub(crate) fn lookup(
    app: &App,
    id: &str,
) -> Result<std::sync::Arc<crate::app::attempt::Attempt>, ApiError> {
    app.attempts
        .get(&app.store, id)
        .map_err(store_err)?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no attempt `{id}` (attempt ids are the `attempt_id` of POST {PREFIX}/attempts)"),
            )
        })
}

pub(super) async fn get_attempt(app: &App, id: &str, req: &Request) -> ApiResult {
    let a = lookup(app, id)?;
    let events = {
        let _g = a.lock.lock().await;
        app.store.timeline(id).map_err(store_err)?.len()
    };
    let r = a.record();
    let mut answer = json!({
        "attempt_id": r.attempt_id,
        "test_run_id": r.test_run_id,
        "status": a.lease(app.clock.now()).as_str(),
        "started_at": r.started_at,
        "ended_at": r.ended_at,
        "expires_at": r.expires_at,
        "is_default": r.is_default,
        "revision_set": r.pins.id(),
        "contracts": contract_pins(&r),
        "variants": r.variants,
        "faults": r.faults,
        "cleanup": r.cleanup,
        "events": events,
        "durability": r.durability.as_str(),
        "interrupted": r.interrupted,
    });
    with_pins(&mut answer, &r, req);
    Ok((StatusCode::OK, answer))
}

/// An attempt's evidence as a verdict reads it: under the state lock (events and final
/// state from the same instant), made durable first (durability `attempt`); 404 when the
/// store has no such attempt.
pub(crate) async fn verdict_evidence(
    app: &App,
    a: &crate::app::attempt::Attempt,
    id: &str,
) -> Result<crate::records::AttemptEvidence, ApiError> {
    let found = {
        let _g = a.lock.lock().await;
        app.store
            .make_durable(a.durability)
            .await
            .map_err(store_err)?;
        app.store.attempt_evidence(id).map_err(store_err)?
    };
    found
        .map(|mut f| {
            // A store failure whose durable mark could not be written still fails the
            // attempt in this process (the next start marks it `interrupted`).
            let live = a.store_failures.load(std::sync::atomic::Ordering::Relaxed);
            f.attempt.store_failures = f.attempt.store_failures.max(live);
            f
        })
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no attempt `{id}` in the store"),
            )
        })
}

pub(crate) async fn evidence(app: &App, id: &str) -> ApiResult {
    let a = lookup(app, id)?;
    let found = verdict_evidence(app, &a, id).await?;
    let env =
        crate::evidence::envelope_of(&crate::evidence::Inputs::of(&found, &app.config.redact));
    Ok((StatusCode::OK, env))
}

pub(crate) async fn end_attempt(app: &App, id: &str) -> ApiResult {
    let a = lookup(app, id)?;
    if a.is_default() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "default_attempt",
            "the default attempt lives as long as the server; end attempts created with POST /attempts",
        ));
    }
    // Under the state lock: no call is half-way through this attempt. On a shared store
    // (PostgreSQL) also under the attempt's row lock, as a call takes it: a call of another
    // process commits before the end, or after it (then stamped after `ended_at`, which
    // fails the attempt as `attempt_ended`).
    let mut g = a.lock.lock().await;
    // Taken and released at once: every call another process had under way has committed
    // (the end's own writes below would wait on a lock held here).
    drop(
        crate::app::attempt::read_in_store(&app.store, id, &mut g)
            .await
            .map_err(store_err)?,
    );
    let mut rec = a.record();
    if a.lease(app.clock.now()) != Lease::Ended {
        // The end snapshot (docs/src/reference/contracts.md): what `final_state` reads once the live state is gone.
        rec.final_state = Some(app.store.state(id).map_err(store_err)?);
        let remaining = app.store.clear_state(id).map_err(store_err)?;
        rec.ended_at = Some(crate::util::time::rfc3339(app.clock.now()));
        // Store failures this process saw but could not mark end up in the ended record.
        rec.store_failures = rec
            .store_failures
            .max(a.store_failures.load(std::sync::atomic::Ordering::SeqCst));
        rec.cleanup = Some(cleanup_report(remaining));
        app.store.put_attempt(&rec).map_err(store_err)?;
        app.store.flush().await.map_err(store_err)?;
        a.set_record(rec.clone());
        g.state.clear();
        g.idempotency.clear();
        app.integrations.unbind(id);
        // Its MCP endpoints (and so its MCP sessions) end with it.
        app.mcp.forget_attempt(id);
        tracing::info!(attempt = %id, remaining, "attempt ended");
        // Traces out: its span with the verdict, made off this answer's path.
        app.trace_attempt_end(id);
    }
    Ok((
        StatusCode::OK,
        json!({
            "attempt_id": rec.attempt_id,
            "ended_at": rec.ended_at,
            "cleanup": rec.cleanup,
        }),
    ))
}

/// The most entries one page of `GET …/evidence?after=&limit=` holds.
pub const MAX_PAGE: u64 = 10_000;
/// The page size when `after` is given without `limit`.
pub const DEFAULT_PAGE: u64 = 1_000;
/// Bytes of envelope buffered before they are handed to the connection.
const STREAM_BUFFER: usize = 64 * 1024;

/// `?after=SEQ&limit=N` of the evidence routes: `None` without either (the whole envelope,
/// streamed); 400 naming the parameter when one is not a number or `limit` is out of range.
pub(crate) fn evidence_window(
    req: &Request,
) -> Result<Option<crate::evidence::stream::Window>, ApiError> {
    let mut after = None;
    let mut limit = None;
    for (k, v) in &req.query {
        let slot = match k.as_str() {
            "after" => &mut after,
            "limit" => &mut limit,
            _ => continue,
        };
        *slot = Some(v.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "query parameter `{k}`: expected a non-negative integer, got `{v}`"
            ))
        })?);
    }
    if after.is_none() && limit.is_none() {
        return Ok(None);
    }
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::bad_request(format!(
            "query parameter `limit`: expected 1..={MAX_PAGE}, got {limit}"
        )));
    }
    Ok(Some(crate::evidence::stream::Window {
        after: after.unwrap_or(0),
        limit,
    }))
}

/// An attempt as a verdict reads it at one instant: its record (with the store failures
/// this process saw but could not mark), its final state and its counter — taken under the
/// state lock after the evidence was made durable (durability `attempt`). The timeline up to
/// the counter is then read without the lock (writes only add entries past it).
pub(crate) struct EvidenceSnapshot {
    pub attempt: crate::records::AttemptRecord,
    pub final_state: BTreeMap<String, serde_json::Map<String, Value>>,
    pub last_sequence: u64,
}

impl EvidenceSnapshot {
    /// What the one evidence writer reads besides the timeline.
    pub fn stream_snapshot<'a>(
        &'a self,
        redact: &'a [String],
    ) -> crate::evidence::stream::Snapshot<'a> {
        crate::evidence::stream::Snapshot {
            attempt: &self.attempt,
            final_state: &self.final_state,
            last_sequence: self.last_sequence,
            redact,
        }
    }
}

pub(crate) async fn evidence_snapshot(app: &App, id: &str) -> Result<EvidenceSnapshot, ApiError> {
    let a = lookup(app, id)?;
    let _g = a.lock.lock().await;
    app.store
        .make_durable(a.durability)
        .await
        .map_err(store_err)?;
    let Some(mut attempt) = app.store.attempt(id).map_err(store_err)? else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no attempt `{id}` in the store"),
        ));
    };
    let live = a.store_failures.load(std::sync::atomic::Ordering::Relaxed);
    attempt.store_failures = attempt.store_failures.max(live);
    let final_state = match &attempt.final_state {
        Some(s) => s.clone(),
        None => app.store.state(id).map_err(store_err)?,
    };
    let last_sequence = app.store.last_sequence(id).map_err(store_err)?;
    Ok(EvidenceSnapshot {
        attempt,
        final_state,
        last_sequence,
    })
}

/// Writes the envelope of `snap` to `out`, reading the store chunk by chunk (blocking: run
/// it off the async workers). Returns the verdict written.
pub(crate) fn write_evidence(
    app: &App,
    snap: &EvidenceSnapshot,
    window: Option<crate::evidence::stream::Window>,
    out: &mut dyn std::io::Write,
) -> Result<crate::evidence::stream::Written, crate::evidence::stream::StreamError> {
    let mut chunks = app.store.timeline_chunks(
        &snap.attempt.attempt_id,
        snap.attempt.rolled_through(),
        snap.last_sequence,
    );
    let mut next = || chunks().map_err(|e| e.to_string());
    let s = snap.stream_snapshot(&app.config.redact);
    crate::evidence::stream::write_envelope(out, &s, window, &mut next)
}

/// The verdict of `snap` in one pass over the store, nothing written
/// ([`crate::evidence::stream::judge_only`]).
pub(crate) fn judge_evidence(
    app: &App,
    snap: &EvidenceSnapshot,
) -> Result<crate::evidence::stream::Written, crate::evidence::stream::StreamError> {
    let mut chunks = app.store.timeline_chunks(
        &snap.attempt.attempt_id,
        snap.attempt.rolled_through(),
        snap.last_sequence,
    );
    let mut next = || chunks().map_err(|e| e.to_string());
    let s = snap.stream_snapshot(&app.config.redact);
    crate::evidence::stream::judge_only(&s, &mut next)
}

/// `GET /attempts/{id}/evidence`: the envelope streamed as it is read, the verdict last
/// (docs/src/reference/evidence-envelope.md); with `?after=SEQ&limit=N` one page of it,
/// judged over the whole timeline.
pub(crate) async fn evidence_route(app: &Arc<App>, id: &str, req: &Request) -> Routed {
    let window = evidence_window(req)?;
    let snap = evidence_snapshot(app, id).await?;
    let app = app.clone();
    if window.is_some() {
        let page = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            write_evidence(&app, &snap, window, &mut out).map(|_| out)
        })
        .await
        .map_err(|e| store_err(format!("the evidence reader stopped: {e}")))?
        .map_err(store_err)?;
        return Ok(Reply::Http(bytes_response(page.into())));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
    tokio::task::spawn_blocking(move || {
        let mut out = ChannelWriter {
            tx,
            buf: Vec::with_capacity(STREAM_BUFFER),
        };
        if let Err(e) = write_evidence(&app, &snap, None, &mut out) {
            // The body ends without its verdict: no reader can take it for a pass.
            tracing::warn!(attempt = %snap.attempt.attempt_id, error = %e, "evidence stream broken off");
        }
    });
    let body = http_body_util::BodyExt::boxed(ChannelBody { rx });
    Ok(Reply::Http(
        hyper::Response::builder()
            .status(StatusCode::OK)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::CACHE_CONTROL, "no-store")
            .body(body)
            .expect("static response"),
    ))
}

fn bytes_response(body: bytes::Bytes) -> HttpResponse {
    hyper::Response::builder()
        .status(StatusCode::OK)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::CACHE_CONTROL, "no-store")
        .body(crate::http::full(body))
        .expect("static response")
}

/// A `Write` that hands the envelope to the connection in [`STREAM_BUFFER`] pieces; the
/// bounded channel is the backpressure (a slow client slows the reader, memory stays flat).
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<bytes::Bytes>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let b = bytes::Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(STREAM_BUFFER),
        ));
        self.tx.blocking_send(b).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away")
        })
    }
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= STREAM_BUFFER {
            self.send()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// The response body fed by [`ChannelWriter`]: it ends when the writer is dropped.
struct ChannelBody {
    rx: tokio::sync::mpsc::Receiver<bytes::Bytes>,
}

impl hyper::body::Body for ChannelBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|m| m.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}
