//! The upstream client (docs/src/reference/modes.md, docs/src/reference/https.md): how `record`, `record-missing`, `dry-run` and
//! `passthrough` reach the real system.
//!
//! - [`Upstream`]: one pooled hyper-util client over hyper-rustls, HTTP/1.1 and HTTP/2 chosen
//!   by ALPN (plain `http://` upstreams speak HTTP/1.1), trusting the web PKI roots plus the
//!   certificates of `--upstream-ca` / `"upstream_ca"` (a PEM file that may hold several).
//!   [`Upstream::forward`] returns as soon as the response head arrives: the body is the
//!   connection's [`Incoming`] stream, never buffered, so SSE and chunked answers reach the
//!   agent event by event.
//! - [`prepare_forward`]: the request as the upstream must see it — URL joined from the
//!   integration's upstream base and the path after the integration prefix, every
//!   `Understudy-*` header and every hop-by-hop header removed, `Host` set to the upstream.
//! - [`tee`]: a body wrapper for record mode that streams every frame through unchanged and
//!   hands a copy of the bytes (up to a limit) to the recorder when the stream ends.
//! - [`UpstreamError`]: connect refused, DNS, TLS failure, timeout… each naming the upstream
//!   host; [`UpstreamError::to_harness`] is the harness error `upstream_unavailable` (docs/src/concepts/errors.md).
//!
//! # Decisions
//! - Request headers removed: `Connection`, `Keep-Alive`, `Proxy-Connection`, `TE`,
//!   `Trailer`, `Transfer-Encoding`, `Upgrade`, every `Proxy-*` (the forward proxy's
//!   credentials carry the attempt token), every header named in `Connection`, every
//!   `Understudy-*` (the attempt token must never leave understudy), `Host`, `Content-Length`
//!   (recomputed from the body) and `Expect` (the body was already read). Kept unchanged:
//!   everything else, notably `Authorization` (the real system needs it), `traceparent` and
//!   `tracestate`, `Mcp-*`, `Accept`, `Content-Type`. `Accept-Encoding` becomes `identity`:
//!   recorded bodies must be readable JSON and SSE must not sit in a compressor's buffer.
//!   The caller adds `Understudy-Source: tool_test` *after* [`prepare_forward`] for tagged
//!   writes (docs/src/concepts/errors.md `tag`).
//! - Response headers: [`strip_response_headers`] removes the hop-by-hop ones (and those named
//!   in `Connection`) before the server relays the response; `Content-Length` is kept.
//! - Timeouts: connecting (TCP) is bounded by `min(timeout, 10 s)`; the whole wait for the
//!   response head (connect + TLS + upstream think time) by `timeout`
//!   ([`DEFAULT_TIMEOUT`] 30 s). A streaming body has no overall deadline: SSE streams may
//!   stay open for as long as the agent keeps them.
//! - The TLS configuration takes the `ring` provider explicitly, so it works whether or not a
//!   process default was installed; [`init_crypto`] installs it anyway for other clients.

use bytes::{Bytes, BytesMut};
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::http::uri::{Authority, PathAndQuery, Scheme};
use hyper::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::error::Error as StdError;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::oneshot;

use crate::error::{HarnessCode, HarnessError};

pub use crate::tls::init_crypto;

/// The default bound on the wait for an upstream's response head.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// TCP connect never waits longer than this (nor longer than the overall timeout).
pub const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an upstream call failed before a response head arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamErrorKind {
    /// The upstream base or the joined URL is not usable.
    BadTarget,
    /// DNS, refused, unreachable, reset while connecting.
    Connect,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// Connect or response head timed out.
    Timeout,
    /// The connection broke after it was made (closed before a response, HTTP error).
    Protocol,
}

/// An upstream call that got no response (docs/src/concepts/errors.md `upstream_unavailable`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("upstream {host} is unavailable: {cause}")]
pub struct UpstreamError {
    /// `host[:port]` of the upstream (or the base as given, for a bad target).
    pub host: String,
    pub kind: UpstreamErrorKind,
    /// What happened, in words: "connection refused", "TLS handshake failed: …".
    pub cause: String,
}

impl UpstreamError {
    fn new(host: impl Into<String>, kind: UpstreamErrorKind, cause: impl Into<String>) -> Self {
        UpstreamError {
            host: host.into(),
            kind,
            cause: cause.into(),
        }
    }

    /// The harness error `upstream_unavailable` with this error's message.
    pub fn to_harness(&self) -> HarnessError {
        HarnessError::new(HarnessCode::UpstreamUnavailable, self.to_string())
    }
}

impl From<UpstreamError> for HarnessError {
    fn from(e: UpstreamError) -> Self {
        e.to_harness()
    }
}

/// The pooled upstream client. Cheap to clone (the pool is shared); `Send + Sync`.
#[derive(Clone)]
pub struct Upstream {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// A client trusting the web PKI roots plus every certificate of `upstream_ca` (PEM), whose
    /// wait for a response head is bounded by `timeout`. The error names the CA file and what
    /// is wrong with it.
    pub fn new(upstream_ca: Option<&Path>, timeout: Duration) -> Result<Upstream, String> {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        if let Some(path) = upstream_ca {
            for cert in read_ca_file(path)? {
                roots.add(cert).map_err(|e| {
                    format!(
                        "{}: a certificate cannot be used as a trust anchor: {e}",
                        path.display()
                    )
                })?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS configuration failed: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(timeout.min(MAX_CONNECT_TIMEOUT)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(https);
        Ok(Upstream { client, timeout })
    }

    /// The bound on the wait for a response head.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Send one request (absolute URI, as [`Prepared::into_request`] builds it) and return
    /// the response as soon as its head arrived; the body streams from the connection.
    pub async fn forward(
        &self,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let host = req
            .uri()
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_else(|| req.uri().to_string());
        if req.uri().scheme().is_none() || req.uri().authority().is_none() {
            return Err(UpstreamError::new(
                host,
                UpstreamErrorKind::BadTarget,
                "the request URI is not absolute (expected http(s)://host/…)",
            ));
        }
        match tokio::time::timeout(self.timeout, self.client.request(req)).await {
            Err(_) => Err(UpstreamError::new(
                host,
                UpstreamErrorKind::Timeout,
                format!("no response within {}", show_duration(self.timeout)),
            )),
            Ok(Err(e)) => Err(classify(host, &e)),
            Ok(Ok(resp)) => Ok(resp),
        }
    }

    /// [`prepare_forward`] + [`Upstream::forward`] in one call.
    pub async fn forward_parts(
        &self,
        method: &Method,
        upstream_base: &str,
        rest: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let p = prepare_forward(method, upstream_base, rest, headers)?;
        self.forward(p.into_request(body)).await
    }
}

fn show_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Every certificate of a PEM file (at least one).
fn read_ca_file(path: &Path) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let bytes = std::fs::read(path)
        .map_err(|e| format!("{}: cannot read the upstream CA file: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate file: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: no certificate found: expected one or more PEM `-----BEGIN CERTIFICATE-----` blocks",
            path.display()
        ));
    }
    Ok(certs)
}

/// Turn a client error into words, walking its causes (TLS first, then the socket's).
fn classify(host: String, e: &hyper_util::client::legacy::Error) -> UpstreamError {
    let mut chain = Vec::new();
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    let mut tls: Option<String> = None;
    let mut io_kind: Option<std::io::ErrorKind> = None;
    while let Some(err) = cur {
        let text = err.to_string();
        if !text.is_empty() && !chain.contains(&text) {
            chain.push(text);
        }
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            tls.get_or_insert_with(|| t.to_string());
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if let Some(t) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                tls.get_or_insert_with(|| t.to_string());
            }
            io_kind.get_or_insert(io.kind());
        }
        cur = err.source();
    }
    let detail = chain.join(": ");
    if let Some(t) = tls {
        let hint = if t.contains("UnknownIssuer") || t.contains("certificate") {
            " (is the upstream's CA in --upstream-ca / \"upstream_ca\"?)"
        } else {
            ""
        };
        return UpstreamError::new(
            host,
            UpstreamErrorKind::Tls,
            format!("TLS handshake failed: {t}{hint}"),
        );
    }
    use std::io::ErrorKind as K;
    if e.is_connect() {
        let (kind, cause) = match io_kind {
            Some(K::ConnectionRefused) => {
                (UpstreamErrorKind::Connect, "connection refused".to_string())
            }
            Some(K::TimedOut) => (UpstreamErrorKind::Timeout, "connect timed out".to_string()),
            _ if detail.contains("dns error") => (
                UpstreamErrorKind::Connect,
                format!("DNS lookup failed ({detail})"),
            ),
            _ if detail.contains("tls")
                || detail.contains("TLS")
                || detail.contains("certificate") =>
            {
                (
                    UpstreamErrorKind::Tls,
                    format!("TLS handshake failed ({detail})"),
                )
            }
            _ => (
                UpstreamErrorKind::Connect,
                format!("connect failed ({detail})"),
            ),
        };
        return UpstreamError::new(host, kind, cause);
    }
    UpstreamError::new(
        host,
        UpstreamErrorKind::Protocol,
        format!("the connection failed before a response ({detail})"),
    )
}

/// A request ready to go upstream (see [`prepare_forward`]).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub method: Method,
    /// Absolute: scheme, upstream authority, joined path and query.
    pub uri: Uri,
    pub headers: HeaderMap,
}

impl Prepared {
    /// `host[:port]` of the upstream.
    pub fn host(&self) -> String {
        self.uri
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_default()
    }

    /// The hyper request with `body`.
    pub fn into_request(self, body: Bytes) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = self.method;
        *req.uri_mut() = self.uri;
        *req.headers_mut() = self.headers;
        req
    }
}

/// The request as the upstream must see it (module doc): `upstream_base` is the integration's
/// `upstream` (`https://acme.my.salesforce.com`, `http://127.0.0.1:9000/mcp`); `rest` the raw
/// path and query after the integration prefix (`/services/data/v60.0/query?q=…`, `""`, or
/// `?x=1`), percent-escapes kept as received; `headers` the agent's request headers.
pub fn prepare_forward(
    method: &Method,
    upstream_base: &str,
    rest: &str,
    headers: &HeaderMap,
) -> Result<Prepared, UpstreamError> {
    let bad = |msg: String| UpstreamError::new(upstream_base, UpstreamErrorKind::BadTarget, msg);
    let base: Uri = upstream_base
        .parse()
        .map_err(|e| bad(format!("`{upstream_base}` is not a URL: {e}")))?;
    let scheme = base.scheme().cloned().unwrap_or(Scheme::HTTP);
    if base.scheme().is_none() || !(scheme == Scheme::HTTP || scheme == Scheme::HTTPS) {
        return Err(bad(format!(
            "`{upstream_base}` must start with http:// or https://"
        )));
    }
    let authority = base
        .authority()
        .cloned()
        .ok_or_else(|| bad(format!("`{upstream_base}` has no host")))?;
    if base.query().is_some() {
        return Err(bad(format!(
            "`{upstream_base}` must not carry a query string"
        )));
    }
    let (rest_path, rest_query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    let mut path = base.path().trim_end_matches('/').to_string();
    if !rest_path.is_empty() && !rest_path.starts_with('/') {
        path.push('/');
    }
    path.push_str(rest_path);
    if path.is_empty() {
        path.push('/');
    }
    if let Some(q) = rest_query {
        path.push('?');
        path.push_str(q);
    }
    let pq: PathAndQuery = path
        .parse()
        .map_err(|e| bad(format!("the joined path `{path}` is not valid: {e}")))?;
    let uri = Uri::builder()
        .scheme(scheme.clone())
        .authority(authority.clone())
        .path_and_query(pq)
        .build()
        .map_err(|e| bad(format!("cannot build the upstream URL: {e}")))?;
    Ok(Prepared {
        method: method.clone(),
        uri,
        headers: forward_headers(headers, &scheme, &authority),
    })
}

/// Hop-by-hop headers (RFC 9110 7.6.1) and their relatives.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Names listed in `Connection` headers (lowercase).
fn connection_listed(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The request headers to send upstream (module doc).
pub fn forward_headers(headers: &HeaderMap, scheme: &Scheme, authority: &Authority) -> HeaderMap {
    let listed = connection_listed(headers);
    let mut out = HeaderMap::with_capacity(headers.len() + 2);
    for (name, value) in headers {
        let n = name.as_str();
        let drop = HOP_BY_HOP.contains(&n)
            || n.starts_with("proxy-")
            || n.starts_with("understudy-")
            || listed.iter().any(|l| l == n)
            || matches!(n, "host" | "content-length" | "expect" | "accept-encoding");
        if !drop {
            out.append(name.clone(), value.clone());
        }
    }
    let default_port = if *scheme == Scheme::HTTPS { 443 } else { 80 };
    let host = match authority.port_u16() {
        Some(p) if p != default_port => format!("{}:{p}", authority.host()),
        _ => authority.host().to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&host) {
        out.insert(header::HOST, v);
    }
    out.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    out
}

/// Remove the hop-by-hop headers of an upstream response (and those named in its
/// `Connection`) before relaying it.
pub fn strip_response_headers(headers: &mut HeaderMap) {
    let listed = connection_listed(headers);
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|n| {
            let n = n.as_str();
            HOP_BY_HOP.contains(&n) || n.starts_with("proxy-") || listed.iter().any(|l| l == n)
        })
        .cloned()
        .collect();
    for n in names {
        headers.remove(&n);
    }
}

/// What [`tee`] captured of a streamed body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The first `limit` bytes of the body.
    pub bytes: Bytes,
    /// More bytes than `limit` went through.
    pub truncated: bool,
    /// The stream ended normally (false: the reader dropped it early, or it failed).
    pub complete: bool,
    /// The body's error, when it failed.
    pub error: Option<String>,
}

/// A body that streams every frame of `inner` unchanged and copies the data (up to a limit)
/// for the recorder. See [`tee`].
pub struct TeeBody<B> {
    inner: B,
    buf: BytesMut,
    limit: usize,
    truncated: bool,
    tx: Option<oneshot::Sender<Captured>>,
}

/// Wrap `body`: the returned body yields the same frames; the receiver gets the captured
/// bytes once the stream ends (or is dropped: `complete: false`). Trailers pass through.
pub fn tee<B>(body: B, limit: usize) -> (TeeBody<B>, oneshot::Receiver<Captured>) {
    let (tx, rx) = oneshot::channel();
    (
        TeeBody {
            inner: body,
            buf: BytesMut::new(),
            limit,
            truncated: false,
            tx: Some(tx),
        },
        rx,
    )
}

impl<B> TeeBody<B> {
    fn finish(&mut self, complete: bool, error: Option<String>) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Captured {
                bytes: std::mem::take(&mut self.buf).freeze(),
                truncated: self.truncated,
                complete,
                error,
            });
        }
    }
}

impl<B> Drop for TeeBody<B> {
    fn drop(&mut self) {
        self.finish(false, None);
    }
}

impl<B> Body for TeeBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                this.finish(true, None);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                this.finish(false, Some(e.to_string()));
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let room = this.limit.saturating_sub(this.buf.len());
                    if data.len() > room {
                        this.truncated = true;
                    }
                    this.buf.extend_from_slice(&data[..data.len().min(room)]);
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn urls_are_joined_under_the_upstream_base() {
        let m = Method::GET;
        let h = HeaderMap::new();
        let p = prepare_forward(
            &m,
            "https://acme.my.salesforce.com",
            "/services/data/v60.0/query?q=SELECT+Id",
            &h,
        )
        .unwrap();
        assert_eq!(
            p.uri.to_string(),
            "https://acme.my.salesforce.com/services/data/v60.0/query?q=SELECT+Id"
        );
        let p = prepare_forward(&m, "http://127.0.0.1:9000/mcp", "", &h).unwrap();
        assert_eq!(p.uri.to_string(), "http://127.0.0.1:9000/mcp");
        let p = prepare_forward(&m, "http://127.0.0.1:9000/mcp/", "?x=1", &h).unwrap();
        assert_eq!(p.uri.to_string(), "http://127.0.0.1:9000/mcp?x=1");
        let p = prepare_forward(&m, "http://h", "", &h).unwrap();
        assert_eq!(p.uri.to_string(), "http://h/");
        let p = prepare_forward(&m, "http://h/api", "/a%20b/", &h).unwrap();
        assert_eq!(p.uri.path(), "/api/a%20b/");
        for bad in ["ftp://h", "/relative", "http://h/?q=1", "not a url"] {
            let e = prepare_forward(&m, bad, "/x", &h).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadTarget, "{bad}");
            assert_eq!(e.to_harness().code, HarnessCode::UpstreamUnavailable);
        }
    }

    #[test]
    fn understudy_and_hop_by_hop_headers_are_stripped() {
        let h = headers(&[
            ("host", "127.0.0.1:7777"),
            ("understudy-attempt", "tok"),
            ("Understudy-Variant", "x"),
            ("connection", "keep-alive, x-private"),
            ("keep-alive", "timeout=5"),
            ("x-private", "1"),
            ("proxy-authorization", "Basic dG9rOg=="),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("trailer", "x-sum"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("content-length", "12"),
            ("expect", "100-continue"),
            ("accept-encoding", "gzip, br"),
            ("authorization", "Bearer real"),
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
            ("tracestate", "a=1,b=2"),
            ("accept", "application/json"),
            ("x-custom", "a"),
            ("x-custom", "b"),
        ]);
        let p = prepare_forward(
            &Method::POST,
            "https://api.example.com:443/v1",
            "/items",
            &h,
        )
        .unwrap();
        let out = &p.headers;
        for gone in [
            "understudy-attempt",
            "understudy-variant",
            "connection",
            "keep-alive",
            "x-private",
            "proxy-authorization",
            "proxy-connection",
            "te",
            "trailer",
            "transfer-encoding",
            "upgrade",
            "content-length",
            "expect",
        ] {
            assert!(out.get(gone).is_none(), "{gone} kept");
        }
        assert_eq!(out["host"], "api.example.com");
        assert_eq!(out["accept-encoding"], "identity");
        assert_eq!(out["authorization"], "Bearer real");
        assert_eq!(
            out["traceparent"],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(out["tracestate"], "a=1,b=2");
        assert_eq!(out.get_all("x-custom").iter().count(), 2);
        assert_eq!(p.host(), "api.example.com:443");
        let p = prepare_forward(&Method::GET, "http://127.0.0.1:9000", "/", &h).unwrap();
        assert_eq!(p.headers["host"], "127.0.0.1:9000");
    }

    #[test]
    fn response_hop_by_hop_headers_are_stripped() {
        let mut h = headers(&[
            ("connection", "close, x-hop"),
            ("x-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("content-type", "text/event-stream"),
            ("mcp-session-id", "s1"),
            ("content-length", "5"),
        ]);
        strip_response_headers(&mut h);
        let mut names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            vec!["content-length", "content-type", "mcp-session-id"]
        );
    }

    #[test]
    fn ca_file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let e = Upstream::new(Some(&missing), DEFAULT_TIMEOUT).unwrap_err();
        assert!(e.contains("nope.pem"), "{e}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "hello").unwrap();
        let e = Upstream::new(Some(&empty), DEFAULT_TIMEOUT).unwrap_err();
        assert!(e.contains("no certificate"), "{e}");
    }

    #[tokio::test]
    async fn tee_streams_and_captures() {
        let body = Full::new(Bytes::from_static(b"hello world"));
        let (tee_body, rx) = tee(body, 5);
        let collected = tee_body.collect().await.unwrap().to_bytes();
        assert_eq!(&collected[..], b"hello world");
        let c = rx.await.unwrap();
        assert_eq!(&c.bytes[..], b"hello");
        assert!(c.truncated && c.complete && c.error.is_none());
        let (early, rx) = tee(Full::new(Bytes::from_static(b"x")), 10);
        drop(early);
        assert!(!rx.await.unwrap().complete);
    }
}
