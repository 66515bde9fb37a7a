//! The one request built from an input, and the one way it is sent to the real system:
//! `understudy drift` (each read example of a mock) and the on-demand real call of
//! `POST /tools/execute` with `"target": "upstream"` (HTTP profiles).
//!
//! [`build`] is the inverse of the proxy's input building: `{name}` path segments and query
//! captures rendered from the input members of those names (strings as they are, numbers and
//! booleans spelled), the `match` template's literal headers as headers, and — for a method
//! that carries a body — the other members of the input as the body: JSON (an input that is
//! only `{"body": X}` besides its captures sends `X`; nothing left sends no body), or the
//! fields of a form when the `match` says `"body": "form"` / `"multipart"`
//! ([`crate::http::form::fields_of`]).
//!
//! # Decisions (the two former copies disagreed; each rule is decided once here)
//! - **A `*` path segment** matches anything, so the input does not say what to send there.
//!   The one `*` understudy writes itself is the Salesforce API version of recorded drafts
//!   (`/services/data/*/…`): for the `salesforce` profile it is [`SALESFORCE_API_VERSION`],
//!   which every Salesforce org answers; for any other profile (or none) the request cannot be
//!   built, and the error names the segment.
//! - **Methods without a body**: `GET`, `HEAD`, `DELETE` and `OPTIONS` send none (RFC 9110
//!   gives content in them no defined meaning, and servers may refuse it); every other method
//!   sends the rest of the input.
//! - **Reading the answer**: the body is read whole, bounded by [`Limits`] (size and time);
//!   a connection that fails before any answer (refused, reset) is retried up to twice, 100
//!   and 200 ms apart, only when the caller says the request is safe to repeat (a read).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use serde_json::Value;

use super::client::{strip_response_headers, Upstream, UpstreamErrorKind};
use crate::contract::ProfileKind;
use crate::contract::{BodyEncoding, MatchSpec};
use crate::util::json::type_name;

pub use super::mcp_client::Limits;

/// What a `*` path segment of a `salesforce` operation is sent as (module doc).
pub const SALESFORCE_API_VERSION: &str = "v62.0";

/// The HTTP request an input stands for: the inverse of the proxy's input building (captures
/// into the `match` template, the rest of the input as the JSON body of a method that
/// carries one).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRequest {
    pub method: String,
    /// Percent-encoded path, relative to the integration's upstream base.
    pub path: String,
    /// Decoded query parameters (encoded by [`PlannedRequest::rest`]).
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
    /// How the body is sent (`match.body`; JSON when the `match` does not say).
    pub encoding: BodyEncoding,
}

impl PlannedRequest {
    /// Path and encoded query, as [`crate::upstream::prepare_forward`] takes it.
    pub fn rest(&self) -> String {
        if self.query.is_empty() {
            return self.path.clone();
        }
        let q: Vec<String> = self
            .query
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        format!("{}?{}", self.path, q.join("&"))
    }

    /// `GET /contacts/1?x=y`.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.rest())
    }
}

/// Percent-encode everything but RFC 3986 unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A capture's value as request text: strings as they are, numbers and booleans spelled.
pub fn capture_text(input: &Value, name: &str) -> Result<String, String> {
    match input.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(v.to_string()),
        Some(v) => Err(format!(
            "capture `{{{name}}}`: the input holds {} there, not text",
            type_name(v)
        )),
        None => Err(format!("capture `{{{name}}}`: the input has no `{name}`")),
    }
}

/// Render a query value template (`{name}` captures, `{{`/`}}` literal braces) with the
/// input; the names it used are added to `used`.
fn render_value(template: &str, input: &Value, used: &mut Vec<String>) -> Result<String, String> {
    let chars: Vec<char> = template.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        if (c == '{' || c == '}') && chars.get(i + 1) == Some(&c) {
            out.push(c);
            i += 2;
        } else if c == '{'
            && chars
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_alphabetic() || *n == '_')
        {
            let mut j = i + 1;
            while j < chars.len() && ident(chars[j]) {
                j += 1;
            }
            if chars.get(j) != Some(&'}') {
                return Err(format!("template `{template}` is not well formed"));
            }
            let name: String = chars[i + 1..j].iter().collect();
            out.push_str(&capture_text(input, &name)?);
            used.push(name);
            i = j + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Ok(out)
}

/// The request for `input` under `spec` (module doc); `profile` decides what a `*` path
/// segment is sent as.
pub fn build(
    spec: &MatchSpec,
    input: &Value,
    profile: Option<ProfileKind>,
) -> Result<PlannedRequest, String> {
    let method = spec.method.trim().to_ascii_uppercase();
    let mut used = Vec::new();
    let mut path = String::new();
    for (i, seg) in spec.path.split('/').filter(|s| !s.is_empty()).enumerate() {
        path.push('/');
        if seg == "*" {
            if profile == Some(ProfileKind::Salesforce) {
                path.push_str(SALESFORCE_API_VERSION);
                continue;
            }
            return Err(format!(
                "path segment {} of `{}` is `*`: the mock does not say what the real system expects there",
                i + 1,
                spec.path
            ));
        }
        if let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            path.push_str(&encode(&capture_text(input, name)?));
            used.push(name.to_string());
        } else if seg.contains('{') {
            // Text around captures inside one segment (`{Sid}.json`).
            path.push_str(&encode(&render_value(seg, input, &mut used)?));
        } else {
            path.push_str(seg);
        }
    }
    if path.is_empty() {
        path.push('/');
    }
    let mut query = Vec::new();
    for (k, t) in &spec.query {
        query.push((k.clone(), render_value(t, input, &mut used)?));
    }
    let headers: Vec<(String, String)> = spec
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.trim().to_string()))
        .collect();
    let encoding = spec.body.unwrap_or(BodyEncoding::Json);
    let body = if !carries_body(&method) {
        None
    } else {
        let mut rest = input.as_object().cloned().unwrap_or_default();
        for n in &used {
            rest.remove(n);
        }
        match rest.get("body") {
            // A form's fields are members: a field named `body` stays one.
            Some(b) if rest.len() == 1 && !b.is_object() && encoding == BodyEncoding::Json => {
                Some(b.clone())
            }
            _ if rest.is_empty() => None,
            _ => Some(Value::Object(rest)),
        }
    };
    Ok(PlannedRequest {
        method,
        path,
        query,
        headers,
        body,
        encoding,
    })
}

/// [`build`] without a profile: a `*` path segment cannot be built.
pub fn request_for(spec: &MatchSpec, input: &Value) -> Result<PlannedRequest, String> {
    build(spec, input, None)
}

/// Whether a request of `method` (upper case) sends the rest of the input as its body
/// (module doc).
pub fn carries_body(method: &str) -> bool {
    !matches!(method, "GET" | "HEAD" | "DELETE" | "OPTIONS")
}

/// Why a real call got no answer to report: a code (`cannot_build_request`,
/// `upstream_unavailable`, `upstream_error`), what happened, and how many retries were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    pub code: String,
    pub message: String,
    pub retries: u32,
}

impl CallFailure {
    pub fn new(code: &str, message: impl Into<String>, retries: u32) -> CallFailure {
        CallFailure {
            code: code.to_string(),
            message: message.into(),
            retries,
        }
    }
}

/// A real answer read whole: its status, its headers (hop-by-hop ones removed), its body,
/// and the retries it took.
#[derive(Debug)]
pub struct RealAnswer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub retries: u32,
}

impl PlannedRequest {
    /// The headers sent: `Accept: application/json`, the `match` template's headers,
    /// `Authorization` when given, with a body its `Content-Type` (`application/json`,
    /// `application/x-www-form-urlencoded` or `multipart/form-data; boundary=…`).
    pub fn header_map(&self, authorization: Option<&str>) -> Result<HeaderMap, String> {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(a) = authorization.and_then(|a| HeaderValue::from_str(a).ok()) {
            h.insert(header::AUTHORIZATION, a);
        }
        for (k, v) in &self.headers {
            let k =
                HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header `{k}`: {e}"))?;
            let v = HeaderValue::from_str(v).map_err(|e| format!("header `{k}`: {e}"))?;
            h.insert(k, v);
        }
        if let Some(b) = &self.body {
            let ct = match self.encoding {
                BodyEncoding::Json => HeaderValue::from_static("application/json"),
                BodyEncoding::Form => HeaderValue::from_static("application/x-www-form-urlencoded"),
                BodyEncoding::Multipart => {
                    let (boundary, _) = crate::http::form::encode_multipart(b);
                    HeaderValue::from_str(&format!("multipart/form-data; boundary={boundary}"))
                        .map_err(|e| format!("multipart boundary: {e}"))?
                }
            };
            h.insert(header::CONTENT_TYPE, ct);
        }
        Ok(h)
    }

    /// The body's bytes (empty without one), encoded as [`PlannedRequest::encoding`] says.
    pub fn body_bytes(&self) -> Bytes {
        match &self.body {
            Some(b) => match self.encoding {
                BodyEncoding::Json => Bytes::from(b.to_string()),
                BodyEncoding::Form => Bytes::from(crate::http::form::encode_urlencoded(b)),
                BodyEncoding::Multipart => Bytes::from(crate::http::form::encode_multipart(b).1),
            },
            None => Bytes::new(),
        }
    }
}

/// Send `req` to `base` (the integration's upstream) with `headers`, and read the answer
/// whole within `limits`; `retry`: the request is safe to repeat (module doc).
pub async fn send(
    upstream: &Upstream,
    base: &str,
    req: &PlannedRequest,
    headers: &HeaderMap,
    limits: Limits,
    retry: bool,
) -> Result<RealAnswer, CallFailure> {
    let method = Method::from_bytes(req.method.as_bytes()).map_err(|e| {
        CallFailure::new(
            "cannot_build_request",
            format!("method `{}`: {e}", req.method),
            0,
        )
    })?;
    let body = req.body_bytes();
    let rest = req.rest();
    let mut retries = 0;
    loop {
        match upstream
            .forward_parts(&method, base, &rest, headers, body.clone())
            .await
        {
            Ok(resp) => {
                let (parts, b) = resp.into_parts();
                let read = tokio::time::timeout(
                    limits.read_timeout,
                    http_body_util::Limited::new(b, limits.max_body).collect(),
                )
                .await;
                let unavailable = |m: String| CallFailure::new("upstream_unavailable", m, retries);
                let body = match read {
                    Ok(Ok(c)) => c.to_bytes(),
                    Ok(Err(e)) => {
                        return Err(unavailable(format!(
                            "reading the upstream's answer failed: {e}"
                        )))
                    }
                    Err(_) => {
                        return Err(unavailable(
                            "the upstream's answer did not arrive in time".into(),
                        ))
                    }
                };
                let mut headers = parts.headers;
                strip_response_headers(&mut headers);
                return Ok(RealAnswer {
                    status: parts.status.as_u16(),
                    headers,
                    body,
                    retries,
                });
            }
            Err(e)
                if retry
                    && retries < 2
                    && matches!(
                        e.kind,
                        UpstreamErrorKind::Connect | UpstreamErrorKind::Protocol
                    ) =>
            {
                retries += 1;
                tokio::time::sleep(Duration::from_millis(100 * u64::from(retries))).await;
            }
            Err(e) => {
                return Err(CallFailure::new(
                    "upstream_unavailable",
                    e.to_string(),
                    retries,
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_are_the_inverse_of_the_match() {
        let spec: MatchSpec = serde_json::from_value(json!({"method": "post", "path": "/a/{id}/b",
            "query": {"q": "name = '{n}' {{x}}"}, "headers": {"X-K": " v "}}))
        .unwrap();
        let r = request_for(&spec, &json!({"id": "a b", "n": 7, "rest": true})).unwrap();
        assert_eq!(r.line(), "POST /a/a%20b/b?q=name%20%3D%20%277%27%20%7Bx%7D");
        assert_eq!(r.body, Some(json!({"rest": true})));
        assert_eq!(r.headers, vec![("X-K".to_string(), "v".to_string())]);
        let only = request_for(&spec, &json!({"id": "1", "n": 1, "body": [1]})).unwrap();
        assert_eq!(only.body, Some(json!([1])));
        let e = request_for(&spec, &json!({"n": 1})).unwrap_err();
        assert!(e.contains("no `id`"), "{e}");
        let star: MatchSpec =
            serde_json::from_value(json!({"method": "GET", "path": "/services/data/*/query"}))
                .unwrap();
        assert!(request_for(&star, &json!({})).unwrap_err().contains("`*`"));
    }

    #[test]
    fn form_operations_send_form_bodies() {
        let spec: MatchSpec = serde_json::from_value(json!({"method": "POST",
            "path": "/Accounts/{AccountSid}/Messages.json", "body": "form"}))
        .unwrap();
        let r = request_for(
            &spec,
            &json!({"AccountSid": "AC1", "To": "+1", "MediaUrl": ["a", "b"], "body": "x"}),
        )
        .unwrap();
        let h = r.header_map(None).unwrap();
        assert_eq!(h["content-type"], "application/x-www-form-urlencoded");
        assert_eq!(&r.body_bytes()[..], b"MediaUrl=a&MediaUrl=b&To=%2B1&body=x");
        // A lone `body` member of a form is the field `body`, not the whole body.
        let r = request_for(&spec, &json!({"AccountSid": "AC1", "body": "x"})).unwrap();
        assert_eq!(&r.body_bytes()[..], b"body=x");
        let spec: MatchSpec =
            serde_json::from_value(json!({"method": "POST", "path": "/f", "body": "multipart"}))
                .unwrap();
        let r = request_for(&spec, &json!({"title": "t"})).unwrap();
        let ct = r.header_map(None).unwrap()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        let crate::http::form::BodyKind::Multipart(b) = crate::http::form::body_kind(Some(&ct))
        else {
            panic!("{ct}")
        };
        assert_eq!(
            crate::http::form::parse_multipart(&r.body_bytes(), &b).unwrap(),
            json!({"title": "t"})
        );
        // Without `body` in the match: JSON, as before.
        let spec: MatchSpec =
            serde_json::from_value(json!({"method": "POST", "path": "/f"})).unwrap();
        let r = request_for(&spec, &json!({"title": "t"})).unwrap();
        assert_eq!(
            r.header_map(None).unwrap()["content-type"],
            "application/json"
        );
        assert_eq!(&r.body_bytes()[..], br#"{"title":"t"}"#);
        assert!(serde_json::from_value::<MatchSpec>(
            json!({"method": "POST", "path": "/f", "body": "xml"})
        )
        .is_err());
    }

    /// The former `admin::execute_upstream` builder's test, on the one builder.
    #[test]
    fn templates_fill_from_the_input() {
        let mut used = Vec::new();
        let v = render_value(
            "SELECT Id FROM Contact WHERE Phone = '{phone}' {{x}}",
            &json!({"phone": "+1"}),
            &mut used,
        )
        .unwrap();
        assert_eq!(v, "SELECT Id FROM Contact WHERE Phone = '+1' {x}");
        assert_eq!(used, vec!["phone"]);
        assert!(render_value("{nope}", &json!({}), &mut used).is_err());
        assert_eq!(encode("a b/ü"), "a%20b%2F%C3%BC");
    }
}
