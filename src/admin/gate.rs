//! The control-plane gate: who may drive `/_understudy/…` (the API, the UI pages and the
//! metrics). The security model and its threat model are in `docs/src/operations/security.md`.
//!
//! Three rules run before any route, in this order, each refusal a 403 in the shape
//! `{"understudy_error":{"code","message","host"?|"origin"?|"content_type"?}}`:
//! 1. **`forbidden_host`** — the `Host` (or HTTP/2 `:authority`) is not one of the
//!    listener's own names: `localhost`, `127.0.0.1`, `[::1]` and the listen address, each
//!    with the listen port (bare when the port is the scheme's default), plus the project's
//!    `allowed_hosts` (`name` = any port, `name:port` = that port). Defeats DNS rebinding:
//!    a page on `evil.test` whose name now resolves to 127.0.0.1 still sends
//!    `Host: evil.test:PORT`.
//! 2. **`forbidden_origin`** — an `Origin` is present and is not `http(s)://` one of those
//!    names, nor in `allowed_origins` (`null`, several `Origin`s, anything unreadable:
//!    refused). Defeats a page the developer happens to visit, on any other origin —
//!    including another port of localhost.
//! 3. **`content_type`** — a POST, PUT, PATCH or DELETE with a non-empty body whose
//!    `Content-Type` is not `application/json` (or, on the OTLP traces route only,
//!    `application/x-protobuf`): the "simple request" (`text/plain`, form-encoded,
//!    multipart) a browser sends cross-site without a preflight.
//!
//! Then the caller is authenticated ([`authenticate`]): a bearer token (`--admin-token` /
//! `UNDERSTUDY_ADMIN_TOKEN`: every scope; an `admin_tokens` entry: its scopes, compared by
//! SHA-256 in constant time), or — when no token is configured at all — a loopback peer,
//! unless the request carries `Forwarded`, `X-Forwarded-For` or `X-Real-IP` (a reverse proxy
//! on the same host forwards the world from loopback) or the project sets
//! `"trust_loopback": false`. Each route then needs its scope (the table of [`super`]).
//!
//! No `Access-Control-Allow-*` header is ever sent, except to an origin that
//! `allowed_origins` names ([`cors`]; its preflight `OPTIONS` is answered 204 here).
//! Every refusal is counted (`understudy_admin_refusals_total{code}`) and logged with the
//! method, path, peer and the offending header — never the body.

use std::net::SocketAddr;

use hyper::http::{HeaderValue, StatusCode};
use serde_json::json;

use super::ApiError;
use crate::app::App;
use crate::config::Scope;
use crate::http::{json_response, HttpResponse, Request};

/// The proxy headers that make a loopback peer untrusted.
pub const PROXY_HEADERS: [&str; 3] = ["forwarded", "x-forwarded-for", "x-real-ip"];

/// A refusal of the gate's three rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
    /// The header (name, value as sent) that caused it.
    pub header: Option<(&'static str, String)>,
}

impl Refusal {
    fn new(code: &'static str, message: String, header: Option<(&'static str, String)>) -> Self {
        Refusal {
            code,
            message,
            header,
        }
    }

    /// The 403 answer.
    pub fn response(&self) -> HttpResponse {
        let mut err = json!({ "code": self.code, "message": self.message });
        if let Some((name, value)) = &self.header {
            err[*name] = json!(value);
        }
        json_response(StatusCode::FORBIDDEN, &json!({ "understudy_error": err }))
    }
}

/// What the listener answers to.
struct Names {
    /// Lower-case host names (IPv6 in brackets).
    hosts: Vec<String>,
    port: u16,
    /// `https` under `--tls`.
    tls: bool,
}

fn names(app: &App) -> Names {
    let listen = app.config.listen.to_ascii_lowercase();
    let (listen_host, listen_port) = listen
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.parse::<u16>().unwrap_or(0)))
        .unwrap_or((listen.clone(), 0));
    let local: Option<SocketAddr> = app.local_addr();
    let port = local.map(|a| a.port()).unwrap_or(listen_port);
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "[::1]".to_string(),
        listen_host,
    ];
    if let Some(a) = local {
        hosts.push(match a {
            SocketAddr::V4(v) => v.ip().to_string(),
            SocketAddr::V6(v) => format!("[{}]", v.ip()),
        });
    }
    Names {
        hosts,
        port,
        tls: app.scheme() == "https",
    }
}

/// `host[:port]` → (lower-case host without a trailing dot, port).
fn split_authority(a: &str) -> Option<(String, Option<u16>)> {
    let a = a.trim().to_ascii_lowercase();
    if a.is_empty() || a.contains(['/', '?', '#', '@', ' ']) {
        return None;
    }
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?.parse().ok()?),
        };
        (format!("[{h}]"), port)
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.parse().ok()?)),
            None => (a.clone(), None),
        }
    };
    Some((host.trim_end_matches('.').to_string(), port))
}

/// Whether `authority` (a `Host` value or the authority of an origin of `scheme`) names
/// this listener.
fn own_authority(app: &App, n: &Names, authority: &str, scheme_https: bool) -> bool {
    let Some((host, port)) = split_authority(authority) else {
        return false;
    };
    let default_port = if scheme_https { 443 } else { 80 };
    let port_ok = port.unwrap_or(default_port) == n.port;
    if n.hosts.contains(&host) && port_ok {
        return true;
    }
    app.config
        .control
        .allowed_hosts
        .iter()
        .any(|allowed| match split_authority(allowed) {
            Some((h, None)) => h == host,
            Some((h, Some(p))) => h == host && port.unwrap_or(default_port) == p,
            None => false,
        })
}

/// Whether `origin` is one of the project's `allowed_origins` (compared ASCII
/// case-insensitively, a trailing `/` ignored).
pub fn origin_configured(app: &App, origin: &str) -> bool {
    let o = origin.trim().trim_end_matches('/');
    app.config
        .control
        .allowed_origins
        .iter()
        .any(|a| a.trim().trim_end_matches('/').eq_ignore_ascii_case(o))
}

/// Rules 1–3 of the module doc.
pub fn check(app: &App, req: &Request) -> Result<(), Refusal> {
    let n = names(app);
    // Rule 1: Host (absent only from clients that are not browsers: every browser sends it).
    let hosts: Vec<_> = req.headers.get_all(hyper::header::HOST).iter().collect();
    if hosts.len() > 1 {
        return Err(Refusal::new(
            "forbidden_host",
            "several Host headers: send exactly one".into(),
            None,
        ));
    }
    if let Some(h) = hosts.first() {
        let h = h.to_str().unwrap_or("");
        if !own_authority(app, &n, h, n.tls) {
            return Err(Refusal::new(
                "forbidden_host",
                format!(
                    "Host `{h}` is not a name of this listener (localhost, 127.0.0.1 or [::1] with port {}): a page reaching understudy through another name (DNS rebinding) is refused; add the name to `allowed_hosts` in understudy.json to serve it deliberately",
                    n.port
                ),
                Some(("host", h.to_string())),
            ));
        }
    }
    // Rule 2: Origin.
    let origins: Vec<_> = req.headers.get_all(hyper::header::ORIGIN).iter().collect();
    if origins.len() > 1 {
        return Err(Refusal::new(
            "forbidden_origin",
            "several Origin headers: send at most one".into(),
            None,
        ));
    }
    if let Some(o) = origins.first() {
        let o = o.to_str().unwrap_or("").trim();
        let own = o
            .strip_prefix("http://")
            .map(|a| (a, false))
            .or_else(|| o.strip_prefix("https://").map(|a| (a, true)))
            .is_some_and(|(a, https)| own_authority(app, &n, a.trim_end_matches('/'), https));
        if !own && !origin_configured(app, o) {
            return Err(Refusal::new(
                "forbidden_origin",
                format!(
                    "Origin `{o}` may not drive understudy: only its own origin (http://127.0.0.1:{}) and the project's `allowed_origins` may; a web page of another origin is refused",
                    n.port
                ),
                Some(("origin", o.to_string())),
            ));
        }
    }
    // Rule 3: a change with a body must be JSON.
    let changes = matches!(req.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE");
    if changes && !req.body.is_empty() {
        let ct = req.header("content-type").unwrap_or("");
        let media = ct.split(';').next().unwrap_or("").trim();
        // OTLP/HTTP's protobuf is not a type a page can send without a preflight either.
        let otlp =
            req.path == super::otlp::PATH && media.eq_ignore_ascii_case("application/x-protobuf");
        if !media.eq_ignore_ascii_case("application/json") && !otlp {
            return Err(Refusal::new(
                "content_type",
                format!(
                    "{} with a body needs `Content-Type: application/json`, got `{}`: a text/plain, form or multipart body is what a web page can send without asking, so it is refused",
                    req.method,
                    if ct.is_empty() { "(none)" } else { ct }
                ),
                Some(("content_type", ct.to_string())),
            ));
        }
    }
    Ok(())
}

/// Whether the request came through a proxy on the same host (any of [`PROXY_HEADERS`]).
pub fn proxied(req: &Request) -> bool {
    PROXY_HEADERS.iter().any(|h| req.headers.contains_key(*h))
}

/// Who is calling, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name (`admin-token` for `--admin-token`, `loopback` for a trusted
    /// loopback peer).
    pub name: String,
    pub scopes: Vec<Scope>,
}

impl Caller {
    pub fn may(&self, s: Scope) -> bool {
        self.scopes.contains(&s)
    }
}

/// The bearer token or the trusted loopback peer (module doc).
pub fn authenticate(app: &App, req: &Request) -> Result<Caller, ApiError> {
    let tokens = &app.config.control.admin_tokens;
    let configured = app.admin_token.is_some() || !tokens.is_empty();
    let given = req.header("authorization").and_then(|h| {
        let (scheme, rest) = h.trim().split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| rest.trim())
            .filter(|t| !t.is_empty())
    });
    let unauthorized = |m: String| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
    if let Some(given) = given {
        // Compare digests, in constant time, against every configured token.
        let digest = crate::app::attempt::token_hash(given);
        let mut found: Option<Caller> = None;
        if let Some(expected) = &app.admin_token {
            let b = crate::app::attempt::token_hash(expected);
            if crate::app::attempt::ct_eq(digest.as_bytes(), b.as_bytes()) {
                found = Some(Caller {
                    name: "admin-token".into(),
                    scopes: Scope::ALL.to_vec(),
                });
            }
        }
        for t in tokens {
            if crate::app::attempt::ct_eq(digest.as_bytes(), t.sha256.as_bytes()) && found.is_none()
            {
                found = Some(Caller {
                    name: t.name.clone(),
                    scopes: t.scopes.clone(),
                });
            }
        }
        if let Some(c) = found {
            return Ok(c);
        }
        if configured {
            return Err(unauthorized(
                "the bearer token is not an admin token of this server".into(),
            ));
        }
        // No token configured: a bearer (an attempt's, say) is not an admin credential;
        // the loopback rule below decides.
    }
    if configured {
        return Err(unauthorized(
            "the admin API needs `Authorization: Bearer <admin token>`".into(),
        ));
    }
    if !req.peer.ip().is_loopback() {
        return Err(unauthorized(
            "without an admin token the admin API answers only loopback clients".into(),
        ));
    }
    if !app.config.control.trust_loopback {
        return Err(unauthorized(
            "the project sets \"trust_loopback\": false and no admin token is configured: configure `admin_tokens` in understudy.json or --admin-token".into(),
        ));
    }
    if proxied(req) {
        return Err(unauthorized(
            "this loopback request carries a proxy header (Forwarded, X-Forwarded-For or X-Real-IP): a reverse proxy on this host may be forwarding anyone, so loopback grants nothing; configure an admin token".into(),
        ));
    }
    Ok(Caller {
        name: "loopback".into(),
        scopes: Scope::ALL.to_vec(),
    })
}

/// 403 naming the scope a route needs.
pub fn forbidden_scope(caller: &Caller, need: Scope, what: &str) -> ApiError {
    let has: Vec<&str> = caller.scopes.iter().map(|s| s.as_str()).collect();
    ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden_scope",
        format!(
            "{what} needs the `{}` scope; token `{}` has: {}",
            need.as_str(),
            caller.name,
            if has.is_empty() {
                "(none)".to_string()
            } else {
                has.join(", ")
            }
        ),
    )
    .with_details(vec![
        json!({ "scope_needed": need.as_str(), "token": caller.name }),
    ])
}

/// Count and log a refusal (never the body).
pub fn note_refusal(app: &App, req: &Request, code: &'static str) {
    app.metrics.refused(code);
    tracing::warn!(
        code,
        method = %req.method,
        path = %req.public_path(),
        peer = %req.peer,
        host = req.header("host").unwrap_or(""),
        origin = req.header("origin").unwrap_or(""),
        content_type = req.header("content-type").unwrap_or(""),
        "control-plane request refused"
    );
}

/// `Access-Control-Allow-Origin` (and `Vary: Origin`) for an origin `allowed_origins`
/// names; nothing for any other.
pub fn cors(app: &App, req: &Request, resp: &mut HttpResponse) {
    let Some(origin) = req.header("origin") else {
        return;
    };
    if !origin_configured(app, origin) {
        return;
    }
    if let Ok(v) = HeaderValue::from_str(origin.trim()) {
        let h = resp.headers_mut();
        h.insert(hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        h.append(hyper::header::VARY, HeaderValue::from_static("Origin"));
    }
}

/// A CORS preflight (`OPTIONS` with `Access-Control-Request-Method`) from an origin that
/// `allowed_origins` names: 204 with the methods and headers the API uses.
pub fn preflight(app: &App, req: &Request) -> Option<HttpResponse> {
    if req.method != "OPTIONS" || !req.headers.contains_key("access-control-request-method") {
        return None;
    }
    let origin = req.header("origin")?;
    if !origin_configured(app, origin) {
        return None;
    }
    let mut r = hyper::Response::builder()
        .status(StatusCode::NO_CONTENT)
        .header("access-control-allow-methods", "GET, POST, DELETE")
        .header(
            "access-control-allow-headers",
            "authorization, content-type",
        )
        .header("access-control-max-age", "600")
        .body(crate::http::full(bytes::Bytes::new()))
        .ok()?;
    cors(app, req, &mut r);
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split() {
        assert_eq!(
            split_authority("LocalHost.:8080"),
            Some(("localhost".into(), Some(8080)))
        );
        assert_eq!(split_authority("[::1]:9"), Some(("[::1]".into(), Some(9))));
        assert_eq!(split_authority("a.test"), Some(("a.test".into(), None)));
        assert_eq!(split_authority("a@b:1"), None);
        assert_eq!(split_authority("a:x"), None);
        assert_eq!(split_authority("[::1]x"), None);
    }
}
