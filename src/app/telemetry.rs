//! Traces out for a running server (docs/src/guides/traces.md#traces-out): the exporter
//! started from `"otel"` and the `OTEL_*` variables, the span of each served call (the one
//! commit hands it over: [`App::call_span`] before the event is written,
//! [`App::send_call_span`] once it has its sequence), the attempt span with the verdict when
//! an attempt ends ([`App::trace_attempt_end`], read off the answer's path), the
//! `--otel-forward` forwarder ([`start_forward`]), and the flush at shutdown.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry_sdk::trace::SpanData;

use super::App;
use crate::config::Config;
use crate::profile::Wire;
use crate::records::ToolEvent;
use crate::store::Store;
use crate::telemetry::{
    self, AttemptOutcome, CallContext, CheckOutcome, Exporter, Forwarder, McpMessage,
};

/// How long the shutdown waits for the last spans at most.
pub const FLUSH_AT_SHUTDOWN: Duration = Duration::from_secs(3);

/// The exporter of `config` and the process environment; `None` when no endpoint is
/// configured. `Err` names the setting that is wrong.
pub fn start(config: &Config) -> Result<Option<Arc<Exporter>>, String> {
    let file = telemetry::FileSettings {
        endpoint: config.otel.endpoint.as_deref(),
        service_name: config.otel.service_name.as_deref(),
        content: config.otel.content,
    };
    let Some(settings) = telemetry::Settings::resolve(&file, |k| std::env::var(k).ok())? else {
        return Ok(None);
    };
    tracing::info!(
        endpoint = %crate::util::scrub::url_without_userinfo(&settings.endpoint),
        content = settings.content,
        "OpenTelemetry: exporting a span per served call"
    );
    Exporter::start(settings).map(|e| Some(Arc::new(e)))
}

/// The `--otel-forward` forwarder of `config` (headers and trust file from the process
/// environment); `None` without the flag. `Err` names the setting that is wrong.
pub fn start_forward(config: &Config) -> Result<Option<Arc<Forwarder>>, String> {
    let Some(url) = &config.otel.forward else {
        return Ok(None);
    };
    let f = Forwarder::new(url, |k| std::env::var(k).ok())?;
    tracing::info!(
        url = %crate::util::scrub::url_without_userinfo(url),
        "OpenTelemetry: the agent's spans are also forwarded"
    );
    Ok(Some(Arc::new(f)))
}

fn to_system(rfc3339: &str) -> Option<SystemTime> {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .map(|t| SystemTime::from(t.with_timezone(&chrono::Utc)))
}

impl App {
    /// Whether `integration` speaks MCP (its calls' JSON-RPC message says more about them:
    /// the caller's `params._meta.traceparent`, the request id).
    pub fn is_mcp(&self, integration: &str) -> bool {
        self.integrations
            .get(integration)
            .is_some_and(|i| matches!(i.wire, Wire::Mcp))
    }

    /// The span of the call whose evidence event is `ev` (before the store gave it its
    /// sequence; `encoded`: its result when stored pre-encoded; `mcp`: its JSON-RPC message
    /// when it came over MCP), or `None` when export is off or the caller's trace is not
    /// sampled. It carries the server's mode (`understudy.mode`).
    pub fn call_span(
        &self,
        attempt_id: &str,
        ev: &ToolEvent,
        encoded: Option<&crate::store::EncodedResult>,
        cx: &CallContext,
        mcp: Option<&McpMessage>,
    ) -> Option<SpanData> {
        let otel = self.otel.as_ref()?;
        let scrubber = self.store.scrubber().clone();
        let scrub = move |v: &mut serde_json::Value| {
            scrubber.json(v);
        };
        let content: Option<&dyn Fn(&mut serde_json::Value)> =
            otel.settings.content.then_some(&scrub);
        let result: Option<serde_json::Value> = if otel.settings.content {
            encoded.and_then(|e| serde_json::from_slice(e.as_bytes()).ok())
        } else {
            None
        };
        let mut span = telemetry::call_span(
            ev,
            result.as_ref(),
            attempt_id,
            cx,
            mcp,
            content,
            SystemTime::now(),
        )?;
        span.attributes.push(opentelemetry::KeyValue::new(
            "understudy.mode",
            self.mode.as_str(),
        ));
        if span.parent_span_is_remote {
            otel.note_parent(
                attempt_id,
                (span.span_context.trace_id(), span.parent_span_id),
            );
        }
        Some(span)
    }

    /// Queue a span made by [`App::call_span`]; `sequence`: the one the store gave its event.
    /// Never waits.
    pub fn send_call_span(&self, span: Option<SpanData>, sequence: Option<u64>) {
        let (Some(otel), Some(mut span)) = (self.otel.as_ref(), span) else {
            return;
        };
        if let Some(seq) = sequence {
            span.attributes.push(opentelemetry::KeyValue::new(
                "understudy.sequence",
                seq as i64,
            ));
        }
        otel.send(span);
    }

    /// `attempt_id` has ended: its span (verdict, one evaluation event per contract check)
    /// is made from its evidence in a blocking task and queued; the flush at shutdown waits
    /// for it. Nothing happens when export is off.
    pub fn trace_attempt_end(&self, attempt_id: &str) {
        let Some(otel) = self.otel.clone() else {
            return;
        };
        let store: Store = self.store.clone();
        let redact = self.config.redact.clone();
        let id = attempt_id.to_string();
        let task = tokio::task::spawn_blocking(move || {
            match attempt_outcome(&store, &redact, &id) {
                Ok(Some(o)) => otel.send(telemetry::attempt_span(&o, otel.take_parent(&id))),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(attempt = %id, error = %e, "no attempt span: its evidence cannot be read")
                }
            }
        });
        if let Some(otel) = &self.otel {
            otel.pending(task);
        }
    }

    /// At shutdown: wait (at most [`FLUSH_AT_SHUTDOWN`] each) for the last spans to be
    /// sent and the agent's last bodies to be forwarded.
    pub async fn flush_telemetry(&self) {
        let export = async {
            if let Some(otel) = &self.otel {
                otel.flush(FLUSH_AT_SHUTDOWN).await;
            }
        };
        let forward = async {
            if let Some(f) = &self.otel_forward {
                f.flush(FLUSH_AT_SHUTDOWN).await;
            }
        };
        tokio::join!(export, forward);
    }
}

/// An ended attempt as its span says it: the one verdict over its evidence, and every check
/// of its pinned contracts (their evidence texts scrubbed).
fn attempt_outcome(
    store: &Store,
    redact: &[String],
    id: &str,
) -> Result<Option<AttemptOutcome>, String> {
    let Some(found) = store.attempt_evidence(id).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let inputs = crate::evidence::Inputs::of(&found, redact);
    let results = crate::evidence::contract_results(&inputs);
    let verdict = crate::evidence::verdict_of(&inputs, &results);
    let scrubber = store.scrubber();
    let text = |s: &str| scrubber.text(s).unwrap_or_else(|| s.to_string());
    let checks = results
        .iter()
        .flat_map(|r| {
            r.checks.iter().map(|c| CheckOutcome {
                name: format!("{}:{}", r.contract_id, c.id),
                label: c.status.as_str().to_string(),
                explanation: text(&c.evidence),
            })
        })
        .collect();
    let now = SystemTime::now();
    let a = &found.attempt;
    Ok(Some(AttemptOutcome {
        attempt_id: a.attempt_id.clone(),
        started: to_system(&a.started_at).unwrap_or(now),
        ended: a.ended_at.as_deref().and_then(to_system).unwrap_or(now),
        verdict: verdict.word().to_string(),
        reasons: verdict
            .reasons
            .iter()
            .map(|r| text(&format!("{}: {}", r.code, r.message)))
            .collect(),
        checks,
        calls: found.calls.len() as u64,
    }))
}
