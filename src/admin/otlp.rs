//! `POST /_understudy/api/otlp/v1/traces` (`run` scope): the agent's own spans, OTLP/HTTP
//! (`application/x-protobuf` or `application/json`; docs/src/guides/traces.md).
//!
//! Each span is joined to an attempt by its resource's `understudy.attempt_id` attribute, or
//! else by its trace id: the attempt (loaded in this process, not ended) one of whose calls
//! carried that trace id in its `traceparent`. The spans that say what the agent did
//! ([`crate::telemetry::ingest`]) become agent-side events of that attempt, in the agent's own
//! order (start time), each taking the attempt's next sequence under its state lock like a
//! posted event, scrubbed by the store, durable before the answer. A span already taken
//! (same trace and span id: an exporter's retry) is not taken twice. An `otel.tool_call`
//! event's `data.resolves_to` names the project's `integration/operation_id` its tool name
//! resolves to (absent when the project has no such tool).
//!
//! The answer is OTLP's `ExportTraceServiceResponse` in the request's encoding; spans that
//! could not be joined (no such attempt, attempt ended, no call carried the trace) are
//! counted in `partialSuccess.rejectedSpans` with the reason. A body that does not decode is
//! 400 `bad_request`; another media type, or a compressed body, is 415. With
//! `understudy test --otel-forward URL` every body that decodes is also sent on, unchanged, to
//! that collector, in a task of its own (`crate::telemetry::forward`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use hyper::http::StatusCode;
use serde_json::{json, Value};

use super::{lookup, store_err, ApiError, Reply};
use crate::app::attempt::{Attempt, Lease};
use crate::app::App;
use crate::http::Request;
use crate::records::{AgentEvent, EvidenceEntry};
use crate::telemetry::ingest::{self, AgentSpan};

/// The path of the route.
pub const PATH: &str = "/_understudy/api/otlp/v1/traces";

fn unsupported(message: String) -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        message,
    )
}

/// The route.
pub(crate) async fn traces(app: &App, req: &Request) -> Result<Reply, ApiError> {
    let ct = req.header("content-type").unwrap_or("");
    let media = ct.split(';').next().unwrap_or("").trim();
    let protobuf = ingest::is_protobuf(ct);
    if !protobuf && !media.eq_ignore_ascii_case("application/json") {
        return Err(unsupported(format!(
            "OTLP/HTTP traces are `application/x-protobuf` or `application/json`, got `{}`",
            if ct.is_empty() { "(none)" } else { ct }
        )));
    }
    if let Some(enc) = req
        .header("content-encoding")
        .filter(|e| !e.trim().eq_ignore_ascii_case("identity"))
    {
        return Err(unsupported(format!(
            "the OTLP body is `Content-Encoding: {enc}`: understudy takes uncompressed bodies on loopback (set OTEL_EXPORTER_OTLP_COMPRESSION=none)"
        )));
    }
    let batch = ingest::decode(&req.body, ct).map_err(ApiError::bad_request)?;
    if let Some(f) = &app.otel_forward {
        f.send(ct, req.body.clone());
    }
    let (taken, rejected, reasons) = take(app, batch.agent_spans()).await?;
    let message = reasons.into_iter().collect::<Vec<_>>().join("; ");
    tracing::debug!(taken, rejected, "OTLP spans ingested");
    let (body, ctype) = ingest::response(protobuf, rejected, &message);
    let resp = hyper::Response::builder()
        .status(StatusCode::OK)
        .header("content-type", ctype)
        .body(crate::http::full(bytes::Bytes::from(body)))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(Reply::Http(resp))
}

/// Joins the spans to attempts and records them: (spans taken, spans rejected, reasons).
async fn take(
    app: &App,
    spans: Vec<&AgentSpan>,
) -> Result<(usize, i64, std::collections::BTreeSet<String>), ApiError> {
    let mut reasons = std::collections::BTreeSet::new();
    let mut rejected = 0i64;
    let mut by_attempt: BTreeMap<String, Vec<&AgentSpan>> = BTreeMap::new();
    let mut by_trace: Option<HashMap<String, String>> = None;
    for s in spans {
        let id = match &s.attempt_id {
            Some(id) => Some(id.clone()),
            None => {
                let map = by_trace.get_or_insert_with(|| trace_map(app));
                map.get(&s.trace_id).cloned()
            }
        };
        match id {
            Some(id) => by_attempt.entry(id).or_default().push(s),
            None => {
                rejected += 1;
                reasons.insert(format!(
                    "no open attempt carried trace {} in a call's traceparent, and the span's resource has no `understudy.attempt_id`",
                    s.trace_id
                ));
            }
        }
    }
    let mut taken = 0usize;
    for (id, spans) in by_attempt {
        let a = match lookup(app, &id) {
            Ok(a) => a,
            Err(_) => {
                rejected += spans.len() as i64;
                reasons.insert(format!("no attempt `{id}`"));
                continue;
            }
        };
        match record(app, &a, &spans).await? {
            Some(n) => taken += n,
            None => {
                rejected += spans.len() as i64;
                reasons.insert(format!("attempt `{id}` has ended: its evidence is closed"));
            }
        }
    }
    Ok((taken, rejected, reasons))
}

/// trace id → the attempt whose calls carried it (open attempts of this process).
fn trace_map(app: &App) -> HashMap<String, String> {
    let now = app.clock.now();
    let mut m = HashMap::new();
    for a in app.attempts.all() {
        if a.lease(now) == Lease::Ended {
            continue;
        }
        let Ok(entries) = app.store.timeline(&a.id) else {
            continue;
        };
        for e in entries {
            if let EvidenceEntry::Call(c) = e {
                if let Some(t) = c.trace_id {
                    m.entry(t.to_ascii_lowercase())
                        .or_insert_with(|| a.id.clone());
                }
            }
        }
    }
    m
}

/// `integration/operation_id` a tool name resolves to in the attempt's project: the full
/// name (`crm/book`, also `crm.book` or `crm__book`), else an operation id that exactly one
/// integration has.
fn resolve(app: &App, attempt_id: &str, name: &str) -> Option<String> {
    let map = app.integrations.for_attempt(attempt_id);
    let mut by_op = Vec::new();
    for (integ, i) in map.iter() {
        for op in &i.operations {
            let full = format!("{integ}/{}", op.id());
            if name == full
                || name == format!("{integ}.{}", op.id())
                || name == format!("{integ}__{}", op.id())
            {
                return Some(full);
            }
            if op.id() == name {
                by_op.push(full);
            }
        }
    }
    (by_op.len() == 1).then(|| by_op.remove(0))
}

/// Records the spans' events in `a`: `Some(how many were new)`, `None` when it has ended.
async fn record(
    app: &App,
    a: &Arc<Attempt>,
    spans: &[&AgentSpan],
) -> Result<Option<usize>, ApiError> {
    let mut n = 0;
    {
        let mut g = a.lock.lock().await;
        if a.lease(app.clock.now()) == Lease::Ended {
            return Ok(None);
        }
        let _row = crate::app::attempt::lock_in_store(&app.store, &a.id, &mut g).await;
        let mut seen: HashSet<(String, String)> = HashSet::new();
        for e in app.store.timeline(&a.id).map_err(store_err)? {
            if let EvidenceEntry::Agent(ev) = e {
                if let Some(d) = &ev.data {
                    if d.get("source").and_then(Value::as_str) == Some("otlp") {
                        seen.insert((str_of(d, "trace_id"), str_of(d, "span_id")));
                    }
                }
            }
        }
        for s in spans {
            let Some(ev) = &s.event else { continue };
            if !seen.insert((s.trace_id.clone(), s.span_id.clone())) {
                continue;
            }
            let mut ev: AgentEvent = ev.clone();
            if ev.name == "otel.tool_call" {
                if let Some(Value::Object(d)) = &mut ev.data {
                    let tool = d.get("tool").and_then(Value::as_str).unwrap_or("");
                    if let Some(r) = resolve(app, &a.id, tool) {
                        d.insert("resolves_to".into(), json!(r));
                    }
                }
            }
            ev.test_run_id = a.record().test_run_id.clone();
            ev.timestamp = crate::util::time::rfc3339(app.clock.now());
            app.store.write_agent_event(&a.id, ev).map_err(store_err)?;
            n += 1;
        }
    }
    app.store
        .acknowledge(a.durability)
        .await
        .map_err(store_err)?;
    Ok(Some(n))
}

fn str_of(d: &Value, k: &str) -> String {
    d.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}
