//! The counters of a running server ([`Metrics`]), rendered by `GET /metrics` (admin).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counters for a later `/metrics` (cheap: atomics and one small map).
#[derive(Debug, Default)]
pub struct Metrics {
    pub connections: AtomicU64,
    /// Revisions appended while serving (admin saves, hot reloads).
    pub revisions_saved: AtomicU64,
    pub requests: AtomicU64,
    /// (integration, operation, result_status) → count.
    calls: Mutex<BTreeMap<(String, String, String), u64>>,
    /// Latency histogram: bucket upper bounds in ms ([`Metrics::BUCKETS_MS`]) plus +Inf.
    latency: Mutex<([u64; 12], f64, u64)>,
    /// Control-plane refusals (`forbidden_host`, `forbidden_origin`, `content_type`,
    /// `unauthorized`, `forbidden_scope`, `upstream_writes_disabled`) → count.
    refusals: Mutex<BTreeMap<&'static str, u64>>,
}

impl Metrics {
    pub const BUCKETS_MS: [f64; 11] = [
        0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 1000.0, 5000.0,
    ];

    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn observe(&self, integration: &str, operation: &str, status: &str, latency_ms: f64) {
        *self
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((integration.into(), operation.into(), status.into()))
            .or_default() += 1;
        let mut l = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        let i = Self::BUCKETS_MS
            .iter()
            .position(|b| latency_ms <= *b)
            .unwrap_or(Self::BUCKETS_MS.len());
        l.0[i] += 1;
        l.1 += latency_ms;
        l.2 += 1;
    }

    /// A snapshot of the call counters.
    pub fn calls(&self) -> BTreeMap<(String, String, String), u64> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Count one refusal of the control plane, by its code.
    pub fn refused(&self, code: &'static str) {
        *self
            .refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(code)
            .or_default() += 1;
    }

    /// A snapshot of the refusal counters.
    pub fn refusals(&self) -> BTreeMap<&'static str, u64> {
        self.refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A snapshot of the latency histogram: (per-bucket counts, sum ms, count).
    pub fn latency(&self) -> ([u64; 12], f64, u64) {
        *self.latency.lock().unwrap_or_else(|p| p.into_inner())
    }
}
