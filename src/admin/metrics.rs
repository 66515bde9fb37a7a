//! `GET /metrics`: Prometheus text exposition format 0.0.4
//! (`Content-Type: text/plain; version=0.0.4; charset=utf-8`).
//!
//! | metric | type | what |
//! |---|---|---|
//! | `understudy_calls_total{integration,operation,result_status}` | counter | calls answered through the proxy (every call recorded in evidence, and calls refused for a store failure as `store_error`) |
//! | `understudy_call_latency_ms` | histogram | request received → evidence durable, in ms (before `delay_ms`); buckets [`Metrics::BUCKETS_MS`] |
//! | `understudy_open_attempts` | gauge | attempts created with `POST /attempts` whose lease is active (the default attempt is not counted) |
//! | `understudy_revisions_saved_total` | counter | revisions appended while serving: admin saves and hot reloads (not the start-up sync) |
//! | `understudy_reload_problems{integration}` | gauge | problems of the last refused hot reload (0 once one succeeds) |
//! | `understudy_connections_total` | counter | accepted connections |
//! | `understudy_store_flushes_total` | counter | group flushes of the store |
//! | `understudy_admin_refusals_total{code}` | counter | requests to `/_understudy/…` refused by the control-plane gate ([`super::gate`]: `forbidden_host`, `forbidden_origin`, `content_type`, `unauthorized`, `forbidden_scope`) or by `upstream_writes_disabled` |
//!
//! | `understudy_otel_spans_exported_total` | counter | spans the OpenTelemetry collector accepted (only when export is configured) |
//! | `understudy_otel_forwarded_total` | counter | agent OTLP bodies the `--otel-forward` collector accepted (only with `--otel-forward`) |
//! | `understudy_otel_forward_failed_total` | counter | agent OTLP bodies not forwarded: refused, a failed connection or TLS handshake (an untrusted certificate), timed out, or dropped with 16 already on their way (only with `--otel-forward`) |
//! | `understudy_otel_spans_dropped_total` | counter | spans lost to a full export queue, a failed export or one slower than the export timeout (only when export is configured): what a down or slow collector costs instead of latency |
//!
//! Counters start at zero with each process.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use hyper::http::{Response, StatusCode};

use super::{store_err, ApiError, Reply};
use crate::app::attempt::{lease_of, Lease};
use crate::app::{App, Metrics};
use crate::http::full;

/// The Content-Type of the exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value escaped for the text format (`\`, `"`, newline).
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The whole exposition.
pub fn text(app: &App) -> Result<String, ApiError> {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# HELP understudy_calls_total Calls answered through the proxy, by integration, operation and result_status."
    );
    let _ = writeln!(o, "# TYPE understudy_calls_total counter");
    for ((i, op, s), n) in app.metrics.calls() {
        let _ = writeln!(
            o,
            "understudy_calls_total{{integration=\"{}\",operation=\"{}\",result_status=\"{}\"}} {n}",
            escape(&i),
            escape(&op),
            escape(&s)
        );
    }
    let (buckets, sum, count) = app.metrics.latency();
    let _ = writeln!(
        o,
        "# HELP understudy_call_latency_ms Call latency in milliseconds, from request received to evidence recorded (before delay_ms)."
    );
    let _ = writeln!(o, "# TYPE understudy_call_latency_ms histogram");
    let mut acc = 0u64;
    for (i, le) in Metrics::BUCKETS_MS.iter().enumerate() {
        acc += buckets[i];
        let _ = writeln!(o, "understudy_call_latency_ms_bucket{{le=\"{le}\"}} {acc}");
    }
    acc += buckets[Metrics::BUCKETS_MS.len()];
    let _ = writeln!(o, "understudy_call_latency_ms_bucket{{le=\"+Inf\"}} {acc}");
    let _ = writeln!(o, "understudy_call_latency_ms_sum {sum}");
    let _ = writeln!(o, "understudy_call_latency_ms_count {count}");

    let now = app.clock.now();
    let open = app
        .store
        .attempts()
        .map_err(store_err)?
        .iter()
        .filter(|a| !a.is_default && lease_of(a, now) == Lease::Active)
        .count();
    let _ = writeln!(
        o,
        "# HELP understudy_open_attempts Attempts created with POST /attempts whose lease is active."
    );
    let _ = writeln!(o, "# TYPE understudy_open_attempts gauge");
    let _ = writeln!(o, "understudy_open_attempts {open}");

    let _ = writeln!(
        o,
        "# HELP understudy_revisions_saved_total Revisions appended while serving (admin saves, hot reloads)."
    );
    let _ = writeln!(o, "# TYPE understudy_revisions_saved_total counter");
    let _ = writeln!(
        o,
        "understudy_revisions_saved_total {}",
        app.metrics.revisions_saved.load(Ordering::Relaxed)
    );

    let _ = writeln!(
        o,
        "# HELP understudy_reload_problems Problems of the last refused hot reload of an integration."
    );
    let _ = writeln!(o, "# TYPE understudy_reload_problems gauge");
    for name in app.integrations.keys() {
        let _ = writeln!(
            o,
            "understudy_reload_problems{{integration=\"{}\"}} {}",
            escape(name),
            app.integrations.problems(name).len()
        );
    }

    let _ = writeln!(
        o,
        "# HELP understudy_connections_total Accepted connections."
    );
    let _ = writeln!(o, "# TYPE understudy_connections_total counter");
    let _ = writeln!(
        o,
        "understudy_connections_total {}",
        app.metrics.connections.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        o,
        "# HELP understudy_store_flushes_total Group flushes of the store."
    );
    let _ = writeln!(o, "# TYPE understudy_store_flushes_total counter");
    let _ = writeln!(
        o,
        "understudy_store_flushes_total {}",
        app.store.flush_count()
    );
    let _ = writeln!(
        o,
        "# HELP understudy_admin_refusals_total Requests to /_understudy refused by the control-plane gate, by code."
    );
    let _ = writeln!(o, "# TYPE understudy_admin_refusals_total counter");
    for (code, n) in app.metrics.refusals() {
        let _ = writeln!(o, "understudy_admin_refusals_total{{code=\"{code}\"}} {n}");
    }
    if let Some(otel) = &app.otel {
        let _ = writeln!(
            o,
            "# HELP understudy_otel_spans_exported_total Spans the OpenTelemetry collector accepted."
        );
        let _ = writeln!(o, "# TYPE understudy_otel_spans_exported_total counter");
        let _ = writeln!(
            o,
            "understudy_otel_spans_exported_total {}",
            otel.exported()
        );
        let _ = writeln!(
            o,
            "# HELP understudy_otel_spans_dropped_total Spans lost to a full export queue, a failed or a timed-out export."
        );
        let _ = writeln!(o, "# TYPE understudy_otel_spans_dropped_total counter");
        let _ = writeln!(o, "understudy_otel_spans_dropped_total {}", otel.dropped());
    }
    if let Some(f) = &app.otel_forward {
        let _ = writeln!(
            o,
            "# HELP understudy_otel_forwarded_total Agent OTLP bodies the --otel-forward collector accepted."
        );
        let _ = writeln!(o, "# TYPE understudy_otel_forwarded_total counter");
        let _ = writeln!(o, "understudy_otel_forwarded_total {}", f.forwarded());
        let _ = writeln!(
            o,
            "# HELP understudy_otel_forward_failed_total Agent OTLP bodies not forwarded: refused, failed (TLS, connect), timed out or dropped."
        );
        let _ = writeln!(o, "# TYPE understudy_otel_forward_failed_total counter");
        let _ = writeln!(o, "understudy_otel_forward_failed_total {}", f.failed());
    }
    Ok(o)
}

/// `GET /metrics`.
pub(crate) fn render(app: &App) -> Result<Reply, ApiError> {
    let body = text(app)?;
    Ok(Reply::Http(
        Response::builder()
            .status(StatusCode::OK)
            .header(hyper::header::CONTENT_TYPE, CONTENT_TYPE)
            .body(full(body))
            .expect("static response"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape("plain"), "plain");
    }
}
