//! The forward proxy (docs/src/reference/https.md, `serve --forward-proxy`), on the same listener as the API: a
//! `CONNECT` request or an HTTP/1 absolute-form target naming another host is a proxy
//! request; everything else (the admin API included) is served as without the flag.
//!
//! **Host → integration.** An integration is reachable through the proxy at the host and port
//! of its `upstream` (`https://acme.my.salesforce.com` → `acme.my.salesforce.com:443`; the
//! port defaults from the scheme). Inside, the request path is the upstream's path: the
//! upstream's own base path (`https://api.example.com/v2`) is removed, and when several
//! integrations share a host the longest base path that prefixes the request wins. The
//! request is then normalized ([`ViaProxy`], `Request::via_proxy`) so that its segments read
//! `<integration>/<rest>`: routing, the pipeline and the MCP endpoint see the same request as
//! through `http://HOST:PORT/<integration>/<rest>`, and every mode behaves the same.
//!
//! **Never tunnelled blind.** A `CONNECT` to a host:port of no integration is answered 403
//! `unknown_upstream_host` (the body names the host and the configured upstream hosts; the
//! connection closes) *before* any 200, and understudy opens no connection of its own for a
//! CONNECT: after the 200 the tunnel is always terminated here. A plain absolute-form request
//! to such a host is refused the same way. Every such refusal is also evidence: the harness
//! error `unknown_host` naming the host, in the attempt of the proxy credentials (or the
//! `Understudy-Attempt` header), else the default attempt, so an agent that reached a system
//! the test does not cover cannot pass (`crate::proxy::forward::policy::refuse_unknown_host`).
//!
//! **The attempt token** may come as proxy credentials (`HTTPS_PROXY=http://<token>@HOST:PORT`,
//! i.e. `Proxy-Authorization: Basic base64("<token>:")`), where the `Understudy-Attempt`
//! header would otherwise carry it (the header still works inside a tunnel; the two naming
//! different attempts is a 401 like a path/header disagreement). Fail closed, never the
//! default attempt:
//! - `CONNECT` with credentials that cannot be read, or a token of no attempt: **407**
//!   (`Proxy-Authenticate: Basic`) with the JSON body of docs/src/concepts/attempts.md — the CONNECT answer is
//!   about the proxy credentials, and 407 is how clients report a refused proxy login;
//! - plain proxy request: unreadable credentials 407; a well-formed token of no attempt 401
//!   `unknown_attempt`, exactly as for the header (docs/src/concepts/attempts.md).
//!
//! The token is checked at CONNECT time and again for every request inside the tunnel (an
//! attempt ended meanwhile answers `lease_expired` as anywhere else). `Proxy-Authorization`
//! and `Proxy-Connection` are removed from the request: they never reach evidence or an
//! upstream.
//!
//! **TLS inside the tunnel.** The ClientHello is read first: its SNI name must be the CONNECT
//! host (clients send the same name; IP-literal targets send none, and the CONNECT host is
//! used). A different SNI name closes the tunnel before any certificate is made, so a tunnel
//! admitted for one host never serves another. The leaf comes from the server's
//! [`LeafCache`] (signed on the fly, cached); ALPN offers `h2` and `http/1.1`. The handshake is
//! bounded by the header read timeout, and the decrypted stream is served like a listener
//! connection (`super::transport::serve_io`: limits, watchdog, graceful shutdown). A tunnel
//! that does not start with a TLS ClientHello is closed.
//!
//! Not served: `CONNECT` without `--forward-proxy` (405, naming the flag), `CONNECT` inside a
//! tunnel (405), the admin API through the proxy (it lives on the listener's own origin).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{PROXY_AUTHENTICATE, PROXY_AUTHORIZATION};
use hyper::http::{HeaderValue, StatusCode, Uri, Version};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::Watcher;
use serde_json::json;
use tokio_rustls::LazyConfigAcceptor;

use super::transport::{self, Edge};
use crate::app::hosts::select;
use crate::app::{App, UpstreamHost};
use crate::http::request::ViaProxy;
use crate::http::{full, json_response, to_http, HttpResponse, Request};
use crate::proxy::call::CallInfo;
use crate::proxy::forward::policy::refuse_unknown_host;
use crate::proxy::route::ATTEMPT_HEADER;
use crate::tls::{self, LeafCache};

/// What every request of one CONNECT tunnel inherits.
#[derive(Debug, Clone, PartialEq)]
pub struct Tunnel {
    pub host: String,
    pub port: u16,
    pub token: Option<String>,
}

/// Normalize a request that came through the proxy (module doc) for `route`.
fn mark(mut req: Request, route: &UpstreamHost, scheme: &str, token: Option<String>) -> Request {
    let strip = if req.segments.starts_with(&route.base) {
        route.base.len()
    } else {
        0
    };
    let mut segments = Vec::with_capacity(req.segments.len() + 1 - strip);
    segments.push(route.integration.clone());
    segments.extend(req.segments.drain(strip..));
    req.segments = segments;
    let mut rest = raw_after_segments(&req.path, strip).to_string();
    if let Some(q) = &req.raw_query {
        rest.push('?');
        rest.push_str(q);
    }
    req.headers.remove(PROXY_AUTHORIZATION);
    req.headers.remove("proxy-connection");
    req.via_proxy = Some(ViaProxy {
        scheme: scheme.to_string(),
        host: route.host.clone(),
        port: route.port,
        integration: route.integration.clone(),
        token,
        rest,
    });
    req
}

/// The raw path after its first `n` non-empty segments (`""` when nothing is left).
fn raw_after_segments(path: &str, n: usize) -> &str {
    let mut rest = path;
    for _ in 0..n {
        rest = rest.trim_start_matches('/');
        rest = &rest[rest.find('/').unwrap_or(rest.len())..];
    }
    rest
}

/// The proxy step of every buffered request (called by the listener before dispatch): a
/// request of a tunnel, or an HTTP/1 absolute-form request to another host when the forward
/// proxy is on, is normalized for its integration; anything else passes unchanged.
/// `Err` is the refusal to send instead (boxed: it is rare, and the `Ok` path stays small);
/// a host of no integration is refused once its evidence is recorded ([`refuse_request`]).
pub async fn route_request(
    app: &App,
    edge: &Edge,
    tunnel: Option<&Tunnel>,
    uri: &Uri,
    version: Version,
    req: Request,
) -> Result<Request, Box<HttpResponse>> {
    let hosts = &app.hosts;
    if let Some(t) = tunnel {
        return match select(hosts, &t.host, t.port, &req.segments) {
            Some(route) => Ok(mark(req, route, "https", t.token.clone())),
            None => Err(Box::new(
                refuse_request(app, t.token.clone(), &req, &t.host, t.port).await,
            )),
        };
    }
    if edge.transport.forward_proxy.is_none() || version >= Version::HTTP_2 {
        return Ok(req);
    }
    let Some((scheme, host, port, _)) = tls::absolute_form(uri) else {
        return Ok(req);
    };
    if is_this_listener(app, &host, port) {
        return Ok(req);
    }
    let token = match tls::proxy_credentials_token(&req.headers) {
        Ok(t) => t,
        Err(m) => return Err(Box::new(proxy_auth_required("bad_proxy_credentials", &m))),
    };
    match select(hosts, &host, port, &req.segments) {
        Some(route) => Ok(mark(req, route, &scheme, token)),
        None => Err(Box::new(
            refuse_request(app, token, &req, &host, port).await,
        )),
    }
}

/// The refusal of a buffered proxy request to a host of no integration, recorded in the
/// attempt of `proxy_token`, else of the `Understudy-Attempt` header, else the default one.
/// The evidence keeps the method, host and path (not the query or body: another system's).
async fn refuse_request(
    app: &App,
    proxy_token: Option<String>,
    req: &Request,
    host: &str,
    port: u16,
) -> HttpResponse {
    let token = proxy_token.or_else(|| {
        req.header(ATTEMPT_HEADER)
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
    });
    let target = show_target(host, port);
    let info = CallInfo::new(
        req,
        "",
        json!({ "method": req.method, "target": target, "path": req.public_path() }),
    );
    refused_host(app, token.as_deref(), info, host, port).await
}

/// Records the refusal (`unknown_host`) and gives the answer: the 403 (the connection
/// closes), or the 500 `store_error` when it could not be recorded.
async fn refused_host(
    app: &App,
    token: Option<&str>,
    info: CallInfo,
    host: &str,
    port: u16,
) -> HttpResponse {
    let message = unknown_host_message(host, port, &app.hosts);
    to_http(refuse_unknown_host(app, token, info, message).await)
}

/// An absolute-form target naming this listener itself is an ordinary request (RFC 9112
/// 3.2.2), not a proxy request.
fn is_this_listener(app: &App, host: &str, port: u16) -> bool {
    let Some(addr) = app.local_addr() else {
        return false;
    };
    port == addr.port()
        && (tls::listen_hosts(&addr).iter().any(|h| h == host) || addr.ip().to_string() == host)
}

/// Answer a `CONNECT` (module doc): refuse, or answer 200 and terminate the tunnel here.
pub async fn connect(
    app: Arc<App>,
    edge: Arc<Edge>,
    peer: SocketAddr,
    inside: Option<&Tunnel>,
    req: hyper::Request<Incoming>,
) -> HttpResponse {
    let Some(cache) = edge.transport.forward_proxy.clone() else {
        return refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            "connect_not_enabled",
            "CONNECT is served only by `understudy serve --forward-proxy`",
        );
    };
    if inside.is_some() {
        return refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            "nested_connect",
            "CONNECT inside a CONNECT tunnel is not supported",
        );
    }
    let authority = req.uri().authority().map_or("", |a| a.as_str());
    let (host, port) = match tls::parse_connect_authority(authority) {
        Ok(hp) => hp,
        Err(m) => return refusal(StatusCode::BAD_REQUEST, "bad_connect_target", &m),
    };
    let hosts = &app.hosts;
    if select(hosts, &host, port, &[]).is_none() {
        tracing::warn!(%peer, %host, port, "CONNECT refused: no integration has this upstream host");
        // Credentials that cannot be read name no attempt: the default one records it.
        let token = tls::proxy_credentials_token(req.headers()).ok().flatten();
        let info = CallInfo::received_at(
            std::time::Instant::now(),
            "",
            json!({ "method": "CONNECT", "target": show_target(&host, port) }),
        );
        return refused_host(&app, token.as_deref(), info, &host, port).await;
    }
    let token = match tls::proxy_credentials_token(req.headers()) {
        Ok(t) => t,
        Err(m) => return proxy_auth_required("bad_proxy_credentials", &m),
    };
    if let Some(t) = &token {
        match app.attempts.by_token(&app.store, t) {
            Ok(Some(_)) => {}
            Ok(None) => {
                return proxy_auth_required(
                    "unknown_attempt",
                    "the attempt token of the proxy credentials is not known to this server",
                )
            }
            Err(e) => {
                return refusal(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "store_error",
                    &e.to_string(),
                )
            }
        }
    }
    let Some(watcher) = edge.watcher() else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down",
        );
    };
    let tunnel = Tunnel { host, port, token };
    tokio::spawn(run_tunnel(app, edge, peer, watcher, cache, tunnel, req));
    hyper::Response::new(full(bytes::Bytes::new()))
}

/// After the 200: take the connection over, terminate TLS for the CONNECT host, serve.
/// (Boxed: a tunnel's requests are handled by the listener's `handle`, which calls
/// [`connect`] — the future type would otherwise contain itself.)
fn run_tunnel(
    app: Arc<App>,
    edge: Arc<Edge>,
    peer: SocketAddr,
    watcher: Watcher,
    cache: Arc<LeafCache>,
    tunnel: Tunnel,
    req: hyper::Request<Incoming>,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(tunnel_task(app, edge, peer, watcher, cache, tunnel, req))
}

async fn tunnel_task(
    app: Arc<App>,
    edge: Arc<Edge>,
    peer: SocketAddr,
    watcher: Watcher,
    cache: Arc<LeafCache>,
    tunnel: Tunnel,
    req: hyper::Request<Incoming>,
) {
    let upgraded = match hyper::upgrade::on(req).await {
        Ok(u) => u,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "CONNECT: the connection was not handed over");
            return;
        }
    };
    let host = tunnel.host.clone();
    let handshake = async {
        let start =
            LazyConfigAcceptor::new(rustls::server::Acceptor::default(), TokioIo::new(upgraded))
                .await
                .map_err(|e| format!("no TLS ClientHello: {e}"))?;
        if let Some(sni) = start.client_hello().server_name() {
            let sni = tls::normalize_host(sni).map_err(|e| e.to_string())?;
            if sni != host {
                return Err(format!(
                    "the TLS server name `{sni}` is not the CONNECT host `{host}`"
                ));
            }
        }
        start
            .into_stream(tls::intercept_config(&cache, &host))
            .await
            .map_err(|e| format!("TLS handshake failed: {e}"))
    };
    let stream = match tokio::time::timeout(app.limits.header_read_timeout, handshake).await {
        Ok(Ok(s)) => s,
        Ok(Err(why)) => {
            tracing::warn!(%peer, host = %tunnel.host, "CONNECT tunnel closed: {why}");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, host = %tunnel.host, "CONNECT tunnel: TLS handshake not finished in time");
            return;
        }
    };
    tracing::debug!(%peer, host = %tunnel.host, port = tunnel.port, "CONNECT tunnel intercepted");
    // Not a socket of ours: a `reset` fault closes the tunnel's stream like `close`.
    transport::serve_io(
        stream,
        peer,
        app,
        edge,
        watcher,
        Some(Arc::new(tunnel)),
        |_| {},
    )
    .await;
}

/// At start: how to point an agent at the proxy, and which hosts it intercepts (stderr).
pub fn log_forward_proxy(app: &App, scheme: &str, addr: SocketAddr, ca_dir: &std::path::Path) {
    let hosts = &app.hosts;
    let ca = ca_dir.join(tls::CA_CERT_FILE);
    tracing::info!(
        "forward proxy: HTTPS_PROXY={scheme}://<token>@{addr} with SSL_CERT_FILE={} (no token: the default attempt)",
        ca.display()
    );
    if hosts.is_empty() {
        tracing::warn!(
            "forward proxy: no integration has an `upstream`, so every CONNECT will be refused"
        );
    }
    for h in hosts {
        tracing::info!("forward proxy intercepts {}", h.label());
    }
}

/// `{"understudy_error":{"kind":"proxy_error","code","message"}}` with `Understudy-Error`.
fn refusal(status: StatusCode, code: &str, message: &str) -> HttpResponse {
    let mut r = json_response(
        status,
        &json!({ "understudy_error": { "kind": "proxy_error", "code": code, "message": message } }),
    );
    if let Ok(v) = HeaderValue::from_str(code) {
        r.headers_mut().insert("understudy-error", v);
    }
    r
}

/// `host:port` as a client writes it (`[v6]:port`).
fn show_target(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Why a host of no integration is refused: the host and the configured upstream hosts.
fn unknown_host_message(host: &str, port: u16, hosts: &[UpstreamHost]) -> String {
    let shown = show_target(host, port);
    let configured = if hosts.is_empty() {
        "no integration has an `upstream`".to_string()
    } else {
        format!(
            "upstream hosts: {}",
            hosts
                .iter()
                .map(UpstreamHost::label)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "`{shown}` is not the upstream of any integration, and understudy never tunnels blind ({configured}); add an integration whose `upstream` is this host, or send this call directly"
    )
}

/// 407 with `Proxy-Authenticate: Basic`: the proxy credentials name no usable attempt.
fn proxy_auth_required(code: &str, message: &str) -> HttpResponse {
    let mut r = json_response(
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
        &json!({ "understudy_error": { "kind": "auth_error", "code": code, "message": message } }),
    );
    let h = r.headers_mut();
    h.insert(
        PROXY_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"understudy\""),
    );
    if let Ok(v) = HeaderValue::from_str(code) {
        h.insert("understudy-error", v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::template::path_segments;

    fn segs(path: &str) -> Vec<String> {
        path_segments(path)
    }

    fn hosts() -> Vec<UpstreamHost> {
        [
            ("crm", "https://Acme.My.Salesforce.com"),
            ("billing", "https://api.example.com/billing/"),
            ("api", "https://api.example.com"),
            ("v2", "https://api.example.com/billing/v2"),
            ("local", "http://[::1]:9000/mcp"),
        ]
        .iter()
        .map(|(n, u)| UpstreamHost::parse(n, u).unwrap())
        .collect()
    }

    #[test]
    fn upstreams_parse_to_host_port_and_base() {
        let h = hosts();
        assert_eq!(
            h[0],
            UpstreamHost {
                integration: "crm".into(),
                host: "acme.my.salesforce.com".into(),
                port: 443,
                base: vec![],
            }
        );
        assert_eq!(h[1].base, ["billing"]);
        assert_eq!((h[4].host.as_str(), h[4].port), ("::1", 9000));
        assert_eq!(h[4].label(), "[::1]:9000/mcp (local)");
        assert!(UpstreamHost::parse("x", "ftp://example.com").is_none());
        assert!(UpstreamHost::parse("x", "/relative").is_none());
    }

    #[test]
    fn the_longest_base_path_wins() {
        let h = hosts();
        let pick = |host: &str, port: u16, path: &str| {
            select(&h, host, port, &segs(path)).map(|u| u.integration.as_str())
        };
        assert_eq!(
            pick("acme.my.salesforce.com", 443, "/services/data"),
            Some("crm")
        );
        assert_eq!(pick("acme.my.salesforce.com", 8443, "/services/data"), None);
        assert_eq!(pick("api.example.com", 443, "/billing/v2/x"), Some("v2"));
        assert_eq!(pick("api.example.com", 443, "/billing/x"), Some("billing"));
        assert_eq!(pick("api.example.com", 443, "/items"), Some("api"));
        assert_eq!(pick("::1", 9000, "/mcp"), Some("local"));
        // On the host but outside every base: the first integration there.
        assert_eq!(pick("::1", 9000, "/other"), Some("local"));
        assert_eq!(pick("not-configured.invalid", 443, "/"), None);
    }

    #[test]
    fn raw_paths_after_the_base() {
        assert_eq!(raw_after_segments("/billing/v2/a%2Fb/c", 2), "/a%2Fb/c");
        assert_eq!(raw_after_segments("//billing//x", 1), "//x");
        assert_eq!(raw_after_segments("/mcp", 1), "");
        assert_eq!(raw_after_segments("/mcp/", 1), "/");
        assert_eq!(raw_after_segments("/a/b", 0), "/a/b");
    }

    #[test]
    fn marked_requests_read_like_integration_paths() {
        let h = hosts();
        let mut headers = hyper::http::HeaderMap::new();
        headers.insert(
            PROXY_AUTHORIZATION,
            HeaderValue::from_static("Basic dG9rOg=="),
        );
        headers.insert("proxy-connection", HeaderValue::from_static("keep-alive"));
        headers.insert("x-kept", HeaderValue::from_static("1"));
        let req = Request::new(
            "GET",
            "/billing/v2/items/a%20b",
            Some("q=1"),
            headers,
            bytes::Bytes::new(),
            "127.0.0.1:1".parse().unwrap(),
            std::time::Instant::now(),
        );
        let route = select(&h, "api.example.com", 443, &req.segments).unwrap();
        let req = mark(req, route, "https", Some("tok".into()));
        assert_eq!(req.segments, ["v2", "items", "a b"]);
        assert_eq!(
            req.path, "/billing/v2/items/a%20b",
            "the raw path stays as sent"
        );
        let via = req.via_proxy.as_ref().unwrap();
        assert_eq!(via.integration, "v2");
        assert_eq!(via.rest, "/items/a%20b?q=1");
        assert_eq!(via.token.as_deref(), Some("tok"));
        assert!(req.headers.get(PROXY_AUTHORIZATION).is_none());
        assert!(req.headers.get("proxy-connection").is_none());
        assert_eq!(req.headers["x-kept"], "1");
    }

    #[test]
    fn refusals_name_the_host_and_the_configured_ones() {
        let m = unknown_host_message("not-configured.invalid", 443, &hosts()[..1]);
        assert!(
            m.starts_with("`not-configured.invalid:443` is not the upstream"),
            "{m}"
        );
        assert_eq!(show_target("::1", 8443), "[::1]:8443");
        let r = to_http(crate::proxy::forward::policy::unknown_host_answer(&m));
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert_eq!(r.headers()["connection"], "close");
        assert_eq!(r.headers()["understudy-error"], "unknown_upstream_host");
        let r = proxy_auth_required("unknown_attempt", "x");
        assert_eq!(r.status(), StatusCode::PROXY_AUTHENTICATION_REQUIRED);
        assert!(r.headers()["proxy-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic"));
    }
}
