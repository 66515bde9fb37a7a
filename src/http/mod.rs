//! What admin and proxy share of HTTP: the buffered [`Request`] every stage takes
//! ([`request`]; a form body parsed by [`form`]), the response body and response types of every handler, the conversion of
//! a profile's answer ([`NativeResponse`]) into HTTP, understudy's own JSON responses, the
//! connection and body [`Limits`] (enforced by `crate::server`, read by handlers too), and
//! what a fault puts on the wire instead of an answer ([`fault`]).

pub mod fault;
pub mod form;
pub mod request;

pub use request::Request;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::http::{HeaderValue, Response, StatusCode};

use serde_json::{json, Map, Value};

/// A response in the integration's wire format, before it becomes an HTTP response.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeResponse {
    pub status: u16,
    /// Extra headers (the envelope's `headers`, `Understudy-Error`…). `Content-Type:
    /// application/json` is added by the server when there is a body and none is given.
    pub headers: Vec<(String, String)>,
    /// The JSON body; `None` sends no body.
    pub body: Option<Value>,
}

impl NativeResponse {
    /// The envelope the agent saw, as recorded in evidence: `{"status","data"?,"headers"?}`.
    pub fn to_envelope(&self) -> Value {
        let mut m = Map::new();
        m.insert("status".into(), json!(self.status));
        if let Some(b) = &self.body {
            m.insert("data".into(), b.clone());
        }
        let extra: Map<String, Value> = self
            .headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("understudy-error"))
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        if !extra.is_empty() {
            m.insert("headers".into(), Value::Object(extra));
        }
        Value::Object(m)
    }
}

/// Connection and body limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub body_read_timeout: Duration,
    /// After a 413 on HTTP/1.1, at most this many bytes of the refused body are read and
    /// discarded before the connection closes (a lingering close, so that a client still
    /// sending reads the 413 instead of a reset); 40 MiB.
    pub drain_bytes: u64,
    /// … and for at most this long from the 413 on (5 s).
    pub drain_time: Duration,
    /// How long shutdown waits for in-flight calls (longer than the largest `delay_ms`).
    pub shutdown_grace: Duration,
    /// Between two `heartbeat` events of a streamed `POST /tools/execute` (1 s).
    pub sse_heartbeat: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_body: 10 * 1024 * 1024,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(60),
            drain_bytes: 40 * 1024 * 1024,
            drain_time: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(40),
            sse_heartbeat: Duration::from_secs(1),
        }
    }
}

/// The body of every response: boxed, so a handler can answer a buffered body ([`full`]) or
/// a stream (SSE events flushed one by one, for the MCP profile).
pub type HttpBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// The hyper response type of every handler.
pub type HttpResponse = Response<HttpBody>;

/// A buffered response body.
pub fn full(bytes: impl Into<Bytes>) -> HttpBody {
    Full::new(bytes.into()).boxed()
}

/// A [`NativeResponse`] as an HTTP response: the JSON body with Content-Type
/// `application/json`, and the extra headers. When the envelope sets a Content-Type that is
/// not JSON (`text/plain`, `text/csv`…) and `data` is a string, the string is sent as it is.
pub fn to_http(r: NativeResponse) -> HttpResponse {
    to_http_with(r, full)
}

/// [`to_http`] with the body bytes turned into the body by `body` (a fault's truncated or
/// slow body: [`fault`]).
pub fn to_http_with(r: NativeResponse, body: impl FnOnce(Bytes) -> HttpBody) -> HttpResponse {
    wire_response(r).map(body)
}

/// What [`to_http`] sends for `r`: the head, and the body as bytes. A static answer builds it
/// once and sends clones ([`send_prebuilt`]).
pub fn wire_response(r: NativeResponse) -> Response<Bytes> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    let mut has_type = false;
    let mut raw_text = false;
    for (k, v) in &r.headers {
        if k.eq_ignore_ascii_case("content-type") {
            has_type = true;
            raw_text = !v.to_ascii_lowercase().contains("json");
        }
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            b = b.header(name, value);
        }
    }
    let body_bytes = match r.body {
        Some(serde_json::Value::String(text)) if raw_text => Bytes::from(text),
        Some(v) => {
            if !has_type {
                b = b.header(hyper::header::CONTENT_TYPE, "application/json");
            }
            Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
        }
        None => Bytes::new(),
    };
    b.body(body_bytes).unwrap_or_else(|_| {
        Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Bytes::new())
            .expect("static response")
    })
}

/// A response built by [`wire_response`], sent again: its head cloned, its body bytes shared.
pub fn send_prebuilt(r: &Response<Bytes>) -> HttpResponse {
    r.clone().map(full)
}

/// A JSON response of understudy itself (not an integration's): `{"error":{"code","message"}}`.
pub fn json_response(status: StatusCode, body: &serde_json::Value) -> HttpResponse {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(full(Bytes::from(
            serde_json::to_vec(body).unwrap_or_default(),
        )))
        .expect("static response")
}

/// `Content-Type: text/event-stream`.
pub fn is_sse(headers: &hyper::http::HeaderMap) -> bool {
    headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("text/event-stream")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn body_of(r: HttpResponse) -> Vec<u8> {
        r.into_body().collect().await.unwrap().to_bytes().to_vec()
    }

    #[tokio::test]
    async fn native_responses_become_http() {
        let r = to_http(NativeResponse {
            status: 201,
            headers: vec![("Location".into(), "/x".into())],
            body: Some(json!({"id": 1})),
        });
        assert_eq!(r.status(), 201);
        assert_eq!(r.headers()["content-type"], "application/json");
        assert_eq!(r.headers()["location"], "/x");
        assert_eq!(body_of(r).await, b"{\"id\":1}");
        let r = to_http(NativeResponse {
            status: 204,
            headers: vec![],
            body: None,
        });
        assert!(r.headers().get("content-type").is_none());
        assert!(body_of(r).await.is_empty());
        let r = to_http(NativeResponse {
            status: 200,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: Some(json!("hello")),
        });
        assert_eq!(r.headers()["content-type"], "text/plain");
        assert_eq!(body_of(r).await, b"hello");
    }
}
