//! `understudy test --otel-forward URL` (docs/src/guides/traces.md#traces-in):
//! every OTLP body the traces route takes is also sent, unchanged, to the user's own
//! collector, `http://` or `https://`.
//!
//! Sent through the exporter's [`Client`] (hyper-util over rustls, ring — the one TLS stack
//! of the tree), with the same settings an OpenTelemetry SDK reads for its own collector:
//! `OTEL_EXPORTER_OTLP_HEADERS` / `_TRACES_HEADERS` (a collector's key) and
//! `OTEL_EXPORTER_OTLP_CERTIFICATE` / `_TRACES_CERTIFICATE` (a private CA, trusted beside the
//! web PKI roots). A certificate that chains to neither is refused — there is no switch that
//! skips the check — and the refusal is logged with where the CA goes.
//!
//! Off the answer's path: each body is a task of its own, at most [`MAX_IN_FLIGHT`] at once;
//! a body that finds them all busy is not sent. Forwarded bodies and failures are counted
//! (`understudy_otel_forwarded_total`, `understudy_otel_forward_failed_total` in `/metrics`);
//! a failing streak warns once. At shutdown [`Forwarder::flush`] waits for the bodies in
//! flight, so the agent's last export is not lost when `understudy test` ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_http::HttpClient;
use tokio::sync::Semaphore;

use super::export::{headers, trust, Client};

/// Bodies being sent at once at most; one more is dropped (and counted as failed).
pub const MAX_IN_FLIGHT: u32 = 16;
/// A send that takes longer is abandoned (counted as failed).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The URL `--otel-forward` sends to: an `http://` or `https://` OTLP/HTTP endpoint with a
/// host, `/v1/traces` appended unless it ends with it.
pub fn forward_url(url: &str) -> Result<String, String> {
    let u = url.trim().trim_end_matches('/');
    let Some(rest) = u
        .strip_prefix("http://")
        .or_else(|| u.strip_prefix("https://"))
    else {
        return Err(format!(
            "expected an http:// or https:// OTLP/HTTP endpoint (e.g. https://collector.example:4318), got `{url}`"
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("`{url}` names no host"));
    }
    if u.parse::<hyper::Uri>().is_err() {
        return Err(format!("`{url}` is not a valid URL"));
    }
    Ok(if u.ends_with("/v1/traces") {
        u.to_string()
    } else {
        format!("{u}/v1/traces")
    })
}

/// The running forwarder of a server.
#[derive(Debug)]
pub struct Forwarder {
    url: String,
    client: Client,
    headers: HashMap<String, String>,
    slots: Arc<Semaphore>,
    forwarded: AtomicU64,
    failed: AtomicU64,
    failing: AtomicBool,
}

impl Forwarder {
    /// A forwarder to `url` (already checked by [`forward_url`]) with the headers and trust
    /// file of `env`. `Err` names the variable or file that is wrong.
    pub fn new(url: &str, env: impl Fn(&str) -> Option<String>) -> Result<Forwarder, String> {
        let headers = headers(&env)?;
        let client = Client::new(TIMEOUT, trust(&env).as_ref())?;
        Ok(Forwarder {
            url: url.to_string(),
            client,
            headers,
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
            forwarded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            failing: AtomicBool::new(false),
        })
    }

    /// The collector's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Bodies the collector accepted (a 2xx answer).
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }

    /// Bodies not forwarded: refused, failed (TLS, connect), timed out, or dropped because
    /// [`MAX_IN_FLIGHT`] were on their way.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Send `body` (of `content_type`) in a task of its own; never waits.
    pub fn send(self: &Arc<Self>, content_type: &str, body: bytes::Bytes) {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            self.fail(&format!(
                "{MAX_IN_FLIGHT} bodies are already on their way: this one is dropped"
            ));
            return;
        };
        let mut req = hyper::Request::post(&self.url).header("content-type", content_type);
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = match req.body(body) {
            Ok(r) => r,
            Err(e) => {
                self.fail(&e.to_string());
                return;
            }
        };
        let me = self.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match me.client.send_bytes(req).await {
                Ok(r) if r.status().is_success() => {
                    me.forwarded.fetch_add(1, Ordering::Relaxed);
                    if me.failing.swap(false, Ordering::Relaxed) {
                        tracing::info!(url = %me.url, "OTLP forward works again");
                    }
                }
                Ok(r) => me.fail(&format!("the collector answered {}", r.status())),
                Err(e) => me.fail(&e.to_string()),
            }
        });
    }

    fn fail(&self, why: &str) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(url = %self.url, error = %why, "OTLP forward failed: the agent's spans did not reach the collector (counted in understudy_otel_forward_failed_total)");
        }
    }

    /// Wait (at most `within`) for the bodies on their way.
    pub async fn flush(&self, within: Duration) {
        if tokio::time::timeout(within, self.slots.acquire_many(MAX_IN_FLIGHT))
            .await
            .is_err()
        {
            tracing::warn!(url = %self.url, "OTLP forward not finished within {} ms", within.as_millis());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_urls() {
        assert_eq!(
            forward_url("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            forward_url("https://c.example/v1/traces").unwrap(),
            "https://c.example/v1/traces"
        );
        assert_eq!(
            forward_url("https://c.example:4318/otlp").unwrap(),
            "https://c.example:4318/otlp/v1/traces"
        );
        assert!(forward_url("ftp://c").unwrap_err().contains("https://"));
        assert!(forward_url("c.example:4318").is_err());
        assert!(forward_url("http:///x").is_err());
    }

    #[test]
    fn a_bad_trust_file_or_header_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let e = Forwarder::new("https://c/v1/traces", |k| {
            (k == "OTEL_EXPORTER_OTLP_CERTIFICATE").then(|| empty.display().to_string())
        })
        .unwrap_err();
        assert!(
            e.starts_with("OTEL_EXPORTER_OTLP_CERTIFICATE: ") && e.contains("empty.pem"),
            "{e}"
        );
        let e = Forwarder::new("https://c/v1/traces", |k| {
            (k == "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE").then(|| "/nonexistent/ca.pem".into())
        })
        .unwrap_err();
        assert!(
            e.starts_with(
                "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: /nonexistent/ca.pem: cannot read"
            ),
            "{e}"
        );
        let e = Forwarder::new("https://c/v1/traces", |k| {
            (k == "OTEL_EXPORTER_OTLP_HEADERS").then(|| "novalue".into())
        })
        .unwrap_err();
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_HEADERS:"), "{e}");
    }
}
