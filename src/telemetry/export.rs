//! Traces out: understudy's own spans sent to the user's OTLP/HTTP collector
//! (docs/src/guides/traces.md#traces-out).
//!
//! The span exporter is `opentelemetry-otlp`'s OTLP/HTTP protobuf exporter, sending through
//! [`Client`] (hyper-util over the rustls stack the upstream client already uses — no reqwest,
//! no tonic, no second TLS stack). Nothing here runs on a call's path but
//! [`Exporter::send`], a `try_send` into a bounded queue: a dedicated thread (its own
//! current-thread runtime) batches the queue and exports. A full queue, an export that
//! fails or one that outlives the timeout costs the spans it carried — counted in
//! [`Exporter::dropped`] (`understudy_otel_spans_dropped_total` in `/metrics`) — and never
//! the latency of an answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};
use opentelemetry_sdk::Resource;
use tokio::sync::{mpsc, oneshot};

/// Spans waiting for export at most; beyond it a span is dropped (and counted).
pub const QUEUE: usize = 4096;
/// Spans per export request at most.
pub const MAX_BATCH: usize = 512;
/// How long a span waits for its batch to fill before it is sent anyway.
pub const BATCH_DELAY: Duration = Duration::from_millis(500);
/// An export (its retries included) that takes longer is abandoned and its spans counted as
/// dropped (default; `OTEL_EXPORTER_OTLP_TIMEOUT` / `_TRACES_TIMEOUT` in ms override it).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer body read from a collector.
const MAX_ANSWER: usize = 64 * 1024;

/// Where and how to export, resolved from the project file's `"otel"` and the standard
/// `OTEL_*` variables ([`Settings::resolve`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The full OTLP/HTTP traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// `OTEL_EXPORTER_OTLP_HEADERS` / `_TRACES_HEADERS` (`k=v,k2=v2`, values URL-decoded).
    pub headers: HashMap<String, String>,
    /// `service.name` of every span's resource.
    pub service_name: String,
    /// Arguments and results on the spans (scrubbed).
    pub content: bool,
    pub timeout: Duration,
    /// `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` / `OTEL_EXPORTER_OTLP_CERTIFICATE`: a PEM file
    /// of certificates trusted beside the web PKI roots for an `https://` collector.
    pub certificate: Option<Trust>,
}

/// A PEM file of CA certificates to trust, and the variable that named it (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    pub variable: &'static str,
    pub path: std::path::PathBuf,
}

/// The variables an OTLP client reads its trust file from, the specific one first.
pub const CERTIFICATE_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
];
/// The variables an OTLP client reads its headers from, the general one first (the specific
/// one's values win).
pub const HEADER_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
];

/// The trust file of the environment, if any.
pub fn trust(env: impl Fn(&str) -> Option<String>) -> Option<Trust> {
    CERTIFICATE_VARS.into_iter().find_map(|v| {
        env(v).filter(|p| !p.trim().is_empty()).map(|p| Trust {
            variable: v,
            path: p.trim().into(),
        })
    })
}

/// The export headers of the environment (`k=v,k2=v2`, values percent-decoded). `Err` names
/// the variable.
pub fn headers(env: impl Fn(&str) -> Option<String>) -> Result<HashMap<String, String>, String> {
    let mut headers = HashMap::new();
    for var in HEADER_VARS {
        if let Some(h) = env(var).filter(|v| !v.trim().is_empty()) {
            for (k, v) in parse_headers(&h).map_err(|m| format!("{var}: {m}"))? {
                headers.insert(k, v);
            }
        }
    }
    Ok(headers)
}

/// The project file's `"otel"` section as the resolver reads it (`crate::config::Otel`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileSettings<'a> {
    pub endpoint: Option<&'a str>,
    pub service_name: Option<&'a str>,
    pub content: bool,
}

impl Settings {
    /// `None` when no endpoint is configured anywhere (export off: the default). The file's
    /// `endpoint` wins over `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (a full URL, taken as is),
    /// which wins over `OTEL_EXPORTER_OTLP_ENDPOINT` (a base: `/v1/traces` appended).
    /// `OTEL_SERVICE_NAME` wins over the file's `service_name` (default `understudy`), as the
    /// OpenTelemetry environment rules say. `Err` names the setting and what was expected.
    pub fn resolve(
        file: &FileSettings<'_>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Settings>, String> {
        let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let endpoint = if let Some(e) = file.endpoint {
            traces_url(e, true).map_err(|m| format!("otel.endpoint: {m}"))?
        } else if let Some(e) = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            traces_url(&e, false).map_err(|m| format!("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {m}"))?
        } else if let Some(e) = env("OTEL_EXPORTER_OTLP_ENDPOINT") {
            traces_url(&e, true).map_err(|m| format!("OTEL_EXPORTER_OTLP_ENDPOINT: {m}"))?
        } else {
            return Ok(None);
        };
        let headers = headers(env)?;
        let timeout = [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]
        .iter()
        .find_map(|k| env(k).map(|v| (k, v)))
        .map(|(k, v)| {
            v.trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| format!("{k}: expected milliseconds, got `{v}`"))
        })
        .transpose()?
        .unwrap_or(DEFAULT_TIMEOUT);
        let service_name = env("OTEL_SERVICE_NAME")
            .or_else(|| file.service_name.map(str::to_string))
            .unwrap_or_else(|| "understudy".to_string());
        Ok(Some(Settings {
            endpoint,
            headers,
            service_name,
            content: file.content,
            timeout,
            certificate: trust(env),
        }))
    }
}

/// An `http://` or `https://` OTLP/HTTP URL; `base`: `/v1/traces` is appended unless the
/// path already ends with it.
fn traces_url(url: &str, base: bool) -> Result<String, String> {
    let u = url.trim().trim_end_matches('/');
    let rest = u
        .strip_prefix("http://")
        .or_else(|| u.strip_prefix("https://"))
        .ok_or_else(|| {
            format!("expected an http:// or https:// URL (e.g. http://127.0.0.1:4318), got `{url}`")
        })?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("`{url}` names no host"));
    }
    if u.parse::<hyper::Uri>().is_err() {
        return Err(format!("`{url}` is not a valid URL"));
    }
    Ok(if base && !u.ends_with("/v1/traces") {
        format!("{u}/v1/traces")
    } else {
        u.to_string()
    })
}

/// `k=v,k2=v2` (W3C baggage form, values percent-decoded).
fn parse_headers(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else {
            return Err("expected `name=value[,name=value…]`".to_string());
        };
        let v = percent_decode(v.trim());
        let k = k.trim().to_ascii_lowercase();
        if hyper::header::HeaderName::from_bytes(k.as_bytes()).is_err()
            || hyper::header::HeaderValue::from_str(&v).is_err()
        {
            return Err(format!("`{k}` is not a valid header"));
        }
        out.push((k, v));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
            if let Ok(x) = u8::from_str_radix(hex, 16) {
                out.push(x);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The HTTP client the OTLP exporter (and `--otel-forward`) sends through: hyper-util's
/// pooled client over hyper-rustls (ring), HTTP/1.1, answers bounded to 64 KiB, each request
/// bounded by the export timeout. An `https://` collector must present a certificate that
/// chains to the web PKI roots or to the trust file ([`Trust`]); there is no way to skip the
/// check. A failure is described with its causes, and a certificate failure says where a
/// private CA goes.
#[derive(Debug, Clone)]
pub struct Client {
    inner: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    timeout: Duration,
}

/// Every certificate of a PEM file (at least one); the error names the variable and the file.
fn read_trust(t: &Trust) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let at = format!("{}: {}", t.variable, t.path.display());
    let bytes = std::fs::read(&t.path).map_err(|e| format!("{at}: cannot read it: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{at}: not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{at}: no certificate found: expected one or more PEM `-----BEGIN CERTIFICATE-----` blocks"
        ));
    }
    Ok(certs)
}

impl Client {
    /// `Err` names what is wrong (the trust file and its variable first).
    pub fn new(timeout: Duration, trust: Option<&Trust>) -> Result<Client, String> {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        if let Some(t) = trust {
            for cert in read_trust(t)? {
                roots.add(cert).map_err(|e| {
                    format!(
                        "{}: {}: a certificate cannot be used as a trust anchor: {e}",
                        t.variable,
                        t.path.display()
                    )
                })?;
            }
        }
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("the OTLP client's TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .build();
        let inner =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(https);
        Ok(Client { inner, timeout })
    }
}

/// An error and its causes in words; a TLS certificate failure ends with where a private
/// collector's CA goes.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let t = err.to_string();
        if !t.is_empty() && !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = err.source();
    }
    let mut s = parts.join(": ");
    // rustls says `invalid peer certificate: …` (UnknownIssuer, NotValidForName, Expired…).
    if s.contains("peer certificate") {
        s.push_str(&format!(
            " (a collector with a private CA: put the CA's PEM file in {})",
            CERTIFICATE_VARS[1]
        ));
    }
    s
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let req = hyper::Request::from_parts(parts, Full::new(body));
        let work = async {
            let resp = self
                .inner
                .request(req)
                .await
                .map_err(|e| -> HttpError { describe(&e).into() })?;
            let (parts, body) = resp.into_parts();
            let body = Limited::new(body, MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| -> HttpError {
                    format!("reading the collector's answer: {e}").into()
                })?
                .to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        match tokio::time::timeout(self.timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis()).into()),
        }
    }
}

enum Msg {
    Span(Box<SpanData>),
    Flush(oneshot::Sender<()>),
}

/// The running exporter of a server: the queue's sending end, the counters, and what a
/// call span needs to know about its attempt.
#[derive(Debug)]
pub struct Exporter {
    tx: mpsc::Sender<Msg>,
    dropped: Arc<AtomicU64>,
    exported: Arc<AtomicU64>,
    pub settings: Settings,
    /// The first caller span each attempt's calls carried (trace id, span id): the parent of
    /// its attempt span. Bounded ([`MAX_PARENTS`]); an attempt's entry goes at its end.
    parents: Mutex<HashMap<String, (TraceId, SpanId)>>,
    /// Work that will send a span soon (an ended attempt's verdict, read off the answer's
    /// path); [`Exporter::flush`] waits for it.
    pending: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Span(s) => write!(f, "Span({})", s.name),
            Msg::Flush(_) => f.write_str("Flush"),
        }
    }
}

/// Attempts whose first caller span is remembered at most.
pub const MAX_PARENTS: usize = 10_000;

impl Exporter {
    /// Build the OTLP exporter and start its thread. `Err` names what is wrong.
    pub fn start(settings: Settings) -> Result<Exporter, String> {
        let client = Client::new(settings.timeout, settings.certificate.as_ref())?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.clone())
            .with_timeout(settings.timeout)
            .with_headers(settings.headers.clone())
            .build()
            .map_err(|e| format!("the OTLP exporter for {}: {e}", settings.endpoint))?;
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name(settings.service_name.clone())
                .with_attribute(opentelemetry::KeyValue::new(
                    "service.version",
                    env!("CARGO_PKG_VERSION"),
                ))
                .build(),
        );
        let (tx, rx) = mpsc::channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let exported = Arc::new(AtomicU64::new(0));
        let (d, x, timeout) = (dropped.clone(), exported.clone(), settings.timeout);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("the OTLP exporter's runtime: {e}"))?;
        std::thread::Builder::new()
            .name("otel-export".into())
            .spawn(move || rt.block_on(run(rx, exporter, d, x, timeout)))
            .map_err(|e| format!("the OTLP exporter's thread: {e}"))?;
        Ok(Exporter {
            tx,
            dropped,
            exported,
            settings,
            parents: Mutex::new(HashMap::new()),
            pending: Mutex::new(Vec::new()),
        })
    }

    /// Queue one span; never waits. A full queue drops it (counted).
    pub fn send(&self, span: SpanData) {
        if self.tx.try_send(Msg::Span(Box::new(span))).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Spans dropped so far: queue full, export failed or timed out.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Spans the collector accepted so far.
    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    /// Remember `attempt`'s first caller span (the parent of its attempt span).
    pub fn note_parent(&self, attempt: &str, parent: (TraceId, SpanId)) {
        let mut p = self.parents.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() < MAX_PARENTS && !p.contains_key(attempt) {
            p.insert(attempt.to_string(), parent);
        }
    }

    /// `attempt`'s first caller span, forgotten.
    pub fn take_parent(&self, attempt: &str) -> Option<(TraceId, SpanId)> {
        self.parents
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(attempt)
    }

    /// Keep `task` (it will [`Exporter::send`]) for the next [`Exporter::flush`].
    pub fn pending(&self, task: tokio::task::JoinHandle<()>) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.retain(|t| !t.is_finished());
        p.push(task);
    }

    /// Wait (at most `within`) for the pending work and for every span queued before now to
    /// be exported or dropped: at shutdown, so the last spans are not lost.
    pub async fn flush(&self, within: Duration) {
        let tasks: Vec<_> =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        let work = async {
            for t in tasks {
                let _ = t.await;
            }
            let (done, wait) = oneshot::channel();
            if self.tx.send(Msg::Flush(done)).await.is_ok() {
                let _ = wait.await;
            }
        };
        if tokio::time::timeout(within, work).await.is_err() {
            tracing::warn!(
                endpoint = %self.settings.endpoint,
                "OpenTelemetry export not flushed within {} ms: the spans left are dropped",
                within.as_millis()
            );
        }
    }
}

/// The export thread: batches of at most [`MAX_BATCH`] spans, sent when full, after
/// [`BATCH_DELAY`], or on a flush.
async fn run(
    mut rx: mpsc::Receiver<Msg>,
    exporter: opentelemetry_otlp::SpanExporter,
    dropped: Arc<AtomicU64>,
    exported: Arc<AtomicU64>,
    timeout: Duration,
) {
    let mut batch: Vec<SpanData> = Vec::new();
    let mut deadline = tokio::time::Instant::now();
    let mut failing = false;
    let mut export = Export {
        exporter: &exporter,
        dropped: &dropped,
        exported: &exported,
        failing: &mut failing,
        timeout,
    };
    loop {
        let msg = if batch.is_empty() {
            rx.recv().await
        } else {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(m) => m,
                Err(_) => {
                    export.send(std::mem::take(&mut batch)).await;
                    continue;
                }
            }
        };
        match msg {
            None => {
                export.send(std::mem::take(&mut batch)).await;
                return;
            }
            Some(Msg::Span(s)) => {
                if batch.is_empty() {
                    deadline = tokio::time::Instant::now() + BATCH_DELAY;
                }
                batch.push(*s);
                if batch.len() >= MAX_BATCH {
                    export.send(std::mem::take(&mut batch)).await;
                }
            }
            Some(Msg::Flush(done)) => {
                export.send(std::mem::take(&mut batch)).await;
                let _ = done.send(());
            }
        }
    }
}

/// One export of the thread, counted.
struct Export<'a> {
    exporter: &'a opentelemetry_otlp::SpanExporter,
    dropped: &'a AtomicU64,
    exported: &'a AtomicU64,
    /// The last export failed (warn once per failing streak).
    failing: &'a mut bool,
    timeout: Duration,
}

impl Export<'_> {
    async fn send(&mut self, batch: Vec<SpanData>) {
        let n = batch.len() as u64;
        if n == 0 {
            return;
        }
        // The exporter's retries end at its own timeout; this bound is the backstop.
        let r = tokio::time::timeout(
            self.timeout + Duration::from_secs(1),
            self.exporter.export(batch),
        )
        .await;
        match r {
            Ok(Ok(())) => {
                self.exported.fetch_add(n, Ordering::Relaxed);
                if std::mem::take(self.failing) {
                    tracing::info!("OpenTelemetry export works again");
                }
            }
            Ok(Err(e)) => {
                self.dropped.fetch_add(n, Ordering::Relaxed);
                if !std::mem::replace(self.failing, true) {
                    tracing::warn!(error = %e, spans = n, "OpenTelemetry export failed: spans dropped (counted in understudy_otel_spans_dropped_total)");
                }
            }
            Err(_) => {
                self.dropped.fetch_add(n, Ordering::Relaxed);
                if !std::mem::replace(self.failing, true) {
                    tracing::warn!(spans = n, "OpenTelemetry export timed out: spans dropped (counted in understudy_otel_spans_dropped_total)");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn settings_from_the_file_and_the_environment() {
        let none = FileSettings::default();
        assert_eq!(Settings::resolve(&none, env(&[])).unwrap(), None);
        let s = Settings::resolve(
            &none,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "Authorization=Bearer%20abc, x-k = v",
                ),
                ("OTEL_SERVICE_NAME", "svc"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(s.headers["authorization"], "Bearer abc");
        assert_eq!(s.headers["x-k"], "v");
        assert_eq!(s.service_name, "svc");
        assert_eq!(s.timeout, Duration::from_millis(250));
        assert!(!s.content);
        // The traces variable is a full URL; the file's endpoint wins over both.
        let s = Settings::resolve(
            &none,
            env(&[
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "https://c.example/otlp",
                ),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4318"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.endpoint, "https://c.example/otlp");
        let file = FileSettings {
            endpoint: Some("http://phoenix:6006"),
            service_name: Some("desk-mocks"),
            content: true,
        };
        let s = Settings::resolve(&file, env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:1")]))
            .unwrap()
            .unwrap();
        assert_eq!(s.endpoint, "http://phoenix:6006/v1/traces");
        assert_eq!(s.service_name, "desk-mocks");
        assert!(s.content);
        // Bad values name the setting.
        let e = Settings::resolve(
            &FileSettings {
                endpoint: Some("phoenix:6006"),
                ..Default::default()
            },
            env(&[]),
        )
        .unwrap_err();
        assert!(
            e.starts_with("otel.endpoint: expected an http:// or https:// URL"),
            "{e}"
        );
        let e = Settings::resolve(
            &none,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:1"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "nokey"),
            ]),
        )
        .unwrap_err();
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_HEADERS:"), "{e}");
        let e = Settings::resolve(
            &none,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:1"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
            ]),
        )
        .unwrap_err();
        assert!(e.contains("expected milliseconds"), "{e}");
    }

    #[test]
    fn a_certificate_failure_says_where_the_ca_goes() {
        use std::io::{Error, ErrorKind};
        let e = Error::new(
            ErrorKind::InvalidData,
            "invalid peer certificate: UnknownIssuer",
        );
        assert!(
            describe(&e).ends_with("put the CA's PEM file in OTEL_EXPORTER_OTLP_CERTIFICATE)"),
            "{}",
            describe(&e)
        );
        let e = Error::new(ErrorKind::ConnectionRefused, "connection refused");
        assert_eq!(describe(&e), "connection refused");
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("Bearer%20a%2Cb"), "Bearer a,b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
