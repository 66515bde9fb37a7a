//! The request every later stage sees (STYLE habit 3): buffered and normalized once at the
//! edge — method, raw and percent-decoded path segments, decoded query pairs, headers, body
//! bytes, peer address and arrival time. The body's JSON is parsed at most once per request
//! ([`Request::json`], cached): routing, the input, write classification, the evidence's
//! description and the secret set of a forwarded call all read that one parse. A form body
//! (`application/x-www-form-urlencoded`, `multipart/form-data`) is parsed there too, into
//! the same kind of value (`super::form`), so every stage treats it like JSON.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Instant;

use bytes::Bytes;
use hyper::http::HeaderMap;
use serde_json::{json, Map, Value};

use crate::contract::template::{parse_query, path_segments};
use crate::util::json::MAX_BODY_DEPTH;

/// One buffered request.
#[derive(Debug, Clone)]
pub struct Request {
    /// Upper-cased method as sent.
    pub method: String,
    /// The raw path (still percent-encoded), for messages.
    pub path: String,
    /// The raw query string without `?`, if any.
    pub raw_query: Option<String>,
    /// Percent-decoded path segments, empty segments dropped (`/a//b/` → `a`, `b`).
    pub segments: Vec<String>,
    /// Decoded query pairs in order, `+` meaning a space.
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub peer: SocketAddr,
    pub received: Instant,
    /// Set when the request came through the forward proxy (`super::connect`): its
    /// integration was selected by the target host, and `segments` were normalized to start
    /// with that integration's name (the upstream's base path removed), so routing reads it
    /// like `/<integration>/…`. `path` stays the upstream path as sent.
    pub via_proxy: Option<ViaProxy>,
    /// The body's JSON, parsed on first use ([`Request::json`]).
    json: OnceLock<Result<Option<Value>, BodyError>>,
}

/// Why a request body could not be read as JSON. A caller decides by the variant, never by
/// the message: [`BodyError::TooDeep`] is the input error `too_deep` on every listener.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The body nests more than `limit` arrays/objects (found on the bytes, before a parse).
    #[error("the request body is nested more than {limit} levels deep")]
    TooDeep { limit: usize },
    /// The body is not JSON (the parser's message).
    #[error("the request body is not valid JSON: {0}")]
    NotJson(String),
    /// A form body (form-encoded or multipart) that cannot be read (its parser's message).
    #[error("{0}")]
    Form(String),
}

impl BodyError {
    /// The evidence's and the API's error code: `too_deep` or `input_error`.
    pub fn code(&self) -> &'static str {
        match self {
            BodyError::TooDeep { .. } => "too_deep",
            BodyError::NotJson(_) | BodyError::Form(_) => "input_error",
        }
    }
}

impl Request {
    /// Normalize a request whose body has been read.
    pub fn new(
        method: &str,
        path: &str,
        raw_query: Option<&str>,
        headers: HeaderMap,
        body: Bytes,
        peer: SocketAddr,
        received: Instant,
    ) -> Request {
        Request {
            method: method.to_ascii_uppercase(),
            path: path.to_string(),
            raw_query: raw_query.map(str::to_string),
            segments: path_segments(path),
            query: raw_query.map(parse_query).unwrap_or_default(),
            headers,
            body,
            peer,
            received,
            via_proxy: None,
            json: OnceLock::new(),
        }
    }

    /// A header as text (`None` when absent or not visible ASCII).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// How many times a header occurs.
    pub fn header_count(&self, name: &str) -> usize {
        self.headers.get_all(name).iter().count()
    }

    /// The body as JSON: `Ok(None)` for an empty body, an error when it is not JSON or is
    /// nested deeper than [`MAX_BODY_DEPTH`]; a form body ([`Request::form_body`]) as the
    /// object of its fields (`super::form`). Parsed on the first call, then borrowed.
    pub fn json(&self) -> Result<Option<&Value>, &BodyError> {
        match self.json.get_or_init(|| match self.form_body() {
            Some(kind) => super::form::parse(&kind, &self.body).map_err(BodyError::Form),
            None => parse_json(&self.body),
        }) {
            Ok(v) => Ok(v.as_ref()),
            Err(e) => Err(e),
        }
    }

    /// The form kind of the body when its `Content-Type` is form-encoded or multipart.
    pub fn form_body(&self) -> Option<super::form::BodyKind> {
        match super::form::body_kind(self.header("content-type")) {
            super::form::BodyKind::Json => None,
            k => Some(k),
        }
    }

    /// [`Request::json`], owned (a copy of the one parse).
    pub fn json_body(&self) -> Result<Option<Value>, BodyError> {
        self.json().map(|v| v.cloned()).map_err(Clone::clone)
    }

    /// `GET /path?query`, for messages.
    pub fn line(&self) -> String {
        let path = self.public_path();
        match &self.raw_query {
            Some(q) => format!("{} {path}?{q}", self.method),
            None => format!("{} {path}", self.method),
        }
    }

    /// The path with an attempt token in it (`/~<token>/…`) spelled `/~[token]/…`: what
    /// messages and evidence name. The token is a capability: it never reaches an error
    /// message, the evidence, a report or a log.
    pub fn public_path(&self) -> std::borrow::Cow<'_, str> {
        hide_token(&self.path)
    }

    /// What an unmatched request is recorded with in evidence: method, path, query and body.
    pub fn describe(&self) -> Value {
        let mut q = Map::new();
        for (k, v) in &self.query {
            q.entry(k.clone())
                .or_insert_with(|| Value::String(v.clone()));
        }
        let body = match self.json() {
            Ok(b) => b.cloned().unwrap_or(Value::Null),
            Err(_) => Value::String(String::from_utf8_lossy(&self.body).into_owned()),
        };
        json!({ "method": self.method, "path": self.public_path(), "query": q, "body": body })
    }
}

/// `path` with the token of a leading `/~<token>` segment replaced by `[token]`.
pub fn hide_token(path: &str) -> std::borrow::Cow<'_, str> {
    let Some(rest) = path.strip_prefix("/~") else {
        return path.into();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    format!("/~[token]{}", &rest[end..]).into()
}

/// The body of [`Request::json`]. The depth is measured on the bytes before the parse
/// (brackets inside strings do not count), so a parsed value is never deeper than the limit.
fn parse_json(body: &[u8]) -> Result<Option<Value>, BodyError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if crate::util::json::text_deeper_than(body, MAX_BODY_DEPTH) {
        return Err(BodyError::TooDeep {
            limit: MAX_BODY_DEPTH,
        });
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| BodyError::NotJson(e.to_string()))
}

/// How a request came through the forward proxy (kept on [`Request::via_proxy`]; set by `crate::server::connect`).
#[derive(Debug, Clone, PartialEq)]
pub struct ViaProxy {
    /// `https` (a CONNECT tunnel) or the scheme of the absolute-form target.
    pub scheme: String,
    /// The target host, normalized (lowercase, no brackets, no trailing dot).
    pub host: String,
    pub port: u16,
    /// The integration the host (and path) selected.
    pub integration: String,
    /// The attempt token of the proxy credentials, if any.
    pub token: Option<String>,
    /// The raw path and query relative to the integration's upstream base, escapes as
    /// received (`/services/data/v60.0/query?q=…`): what is joined to `upstream` when the
    /// call is forwarded.
    pub rest: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(path: &str, q: Option<&str>, body: &str) -> Request {
        Request::new(
            "get",
            path,
            q,
            HeaderMap::new(),
            Bytes::from(body.to_string()),
            "127.0.0.1:1".parse().unwrap(),
            Instant::now(),
        )
    }

    #[test]
    fn normalizes_path_and_query() {
        let a = req(
            "/crm/services/data/v59.0/query/",
            Some("q=SELECT+Id+FROM+Contact"),
            "",
        );
        let b = req(
            "/crm/services/data/v59.0/query",
            Some("q=SELECT%20Id%20FROM%20Contact"),
            "",
        );
        assert_eq!(a.segments, b.segments);
        assert_eq!(a.query, b.query);
        assert_eq!(a.query[0].1, "SELECT Id FROM Contact");
        assert_eq!(a.method, "GET");
    }

    #[test]
    fn json_body() {
        assert_eq!(req("/", None, "").json_body(), Ok(None));
        assert_eq!(req("/", None, " \n").json_body(), Ok(None));
        assert_eq!(
            req("/", None, "{\"a\":1}").json_body(),
            Ok(Some(json!({"a": 1})))
        );
        assert!(matches!(
            req("/", None, "{nope").json_body(),
            Err(BodyError::NotJson(_))
        ));
        // Brackets inside strings do not count.
        let quoted = format!("{{\"a\":\"{}\"}}", "[".repeat(200));
        assert!(req("/", None, &quoted).json_body().is_ok());
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(req("/", None, &deep(MAX_BODY_DEPTH)).json_body().is_ok());
        let e = req("/", None, &deep(MAX_BODY_DEPTH + 1))
            .json_body()
            .unwrap_err();
        assert_eq!(e, BodyError::TooDeep { limit: 64 });
        assert_eq!(e.code(), "too_deep");
        assert!(e.to_string().contains("nested more than 64 levels"), "{e}");
        assert_eq!(
            req("/", None, &deep(100_000)).json_body(),
            Err(BodyError::TooDeep { limit: 64 })
        );
    }
}
