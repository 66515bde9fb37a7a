//! What a forwarded call leaves behind: its evidence `result` (the real answer as an
//! envelope, [`http_result`]), scrubbed of secrets — the request's secret set is computed
//! once per call ([`secret_values`], carried in `CallInfo::secrets`) and cut out of every
//! string ([`scrub`]) — and, in the record modes, the [`Exchange`] kept for the drafts.

use hyper::http::HeaderMap;
use serde_json::{json, Map, Value};

use super::relay::BodyEnd;
use crate::app::App;
use crate::author::record::{self, Call, Exchange, HttpCall};
use crate::http::{is_sse, Request};
use crate::util::json::cut_secrets;

/// Bodies up to this size are kept in evidence; larger ones are summarized.
pub const EVIDENCE_BODY_LIMIT: usize = 256 * 1024;

/// What a recorded call needs besides the request and the response.
#[derive(Debug, Clone)]
pub(crate) struct Capture {
    pub integration: String,
    pub profile: crate::contract::ProfileKind,
    pub matched_operation: Option<String>,
    pub order: u64,
    /// The raw path after the integration prefix (no query).
    pub path: String,
    /// Held while the call is in flight: a flush of the drafts waits for it
    /// ([`crate::app::recorder::Recorder::settle`]).
    _flight: crate::app::recorder::Flight,
}

impl Capture {
    /// The capture of a call of `integ` starting now (its place in the recording's order).
    pub fn new(
        app: &App,
        integ: &crate::app::Integration,
        matched_operation: Option<String>,
        path: String,
    ) -> Capture {
        Capture {
            integration: integ.name().to_string(),
            profile: integ.config.profile,
            matched_operation,
            order: app.forwarding.next_order(),
            path,
            _flight: app.forwarding.recorder.flight(),
        }
    }
}

/// The envelope of a real response for evidence (module doc).
pub(crate) fn http_result(status: u16, headers: &HeaderMap, end: &BodyEnd) -> Value {
    let mut m = Map::new();
    m.insert("status".into(), json!(status));
    if end.total > 0 || !end.complete {
        m.insert("data".into(), body_summary(headers, end));
    }
    Value::Object(m)
}

fn body_summary(headers: &HeaderMap, end: &BodyEnd) -> Value {
    let ct = headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let summary = || json!({"bytes": end.total, "content_type": ct, "complete": end.complete});
    if !end.complete || end.truncated || end.total as usize > EVIDENCE_BODY_LIMIT {
        return summary();
    }
    if is_sse(headers) {
        let events: Vec<Value> = crate::profile::mcp::sse::parse_events(&end.bytes)
            .into_iter()
            .map(|(_, data)| serde_json::from_str(&data).unwrap_or(Value::String(data)))
            .collect();
        return json!({ "events": events });
    }
    record::parse_body(&end.bytes).unwrap_or_else(summary)
}

/// The exchange of a forwarded HTTP call.
pub(crate) fn http_exchange(
    c: &Capture,
    req: &Request,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
) -> Exchange {
    Exchange {
        integration: c.integration.clone(),
        profile: c.profile,
        matched_operation: c.matched_operation.clone(),
        at_ms: c.order,
        call: Call::Http(HttpCall {
            method: req.method.clone(),
            path: c.path.clone(),
            query: req.query.clone(),
            request_headers: header_pairs(&req.headers),
            request_body: request_body(req),
            status,
            response_headers: header_pairs(headers),
            response_body: record::parse_body(body),
        }),
    }
}

/// The request body of an exchange: the request's one JSON parse when it has one (within
/// [`crate::util::json::MAX_BODY_DEPTH`], so within what [`record::parse_body`] keeps too),
/// else what `parse_body` makes of the bytes (text, or nothing).
fn request_body(req: &Request) -> Option<Value> {
    match req.json() {
        Ok(v) => v.cloned(),
        Err(_) => record::parse_body(&req.body),
    }
}

pub(crate) fn header_pairs(h: &HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// Scrub an exchange and keep it for the drafts.
pub(crate) fn keep_exchange(app: &App, mut ex: Exchange) {
    record::scrub_exchange(&mut ex, &app.config.scrub);
    app.forwarding.recorder.push(ex);
}

/// The secret values a request carries, at least 8 characters long: secret headers (whole,
/// and the credential after a scheme such as `Bearer `; each cookie value), secret query
/// parameters and secret fields of a JSON body (the denylist of [`crate::author::record::scrub`] plus
/// the project's `scrub`).
pub(crate) fn secret_values(app: &App, req: &Request) -> Vec<String> {
    let mut out = Vec::new();
    let fields = &app.config.scrub.fields;
    for (k, v) in &req.query {
        if record::is_secret_field(k, fields) && v.len() >= 8 {
            out.push(v.clone());
        }
    }
    if let Ok(Some(body)) = req.json() {
        secret_fields(body, fields, &mut out);
    }
    for (k, v) in &req.headers {
        if !record::is_secret_header(k.as_str(), &app.config.scrub.headers) {
            continue;
        }
        let Ok(v) = v.to_str() else { continue };
        let v = v.trim();
        for part in std::iter::once(v).chain(v.split_once(' ').map(|(_, t)| t.trim())) {
            if part.len() >= 8 && !out.iter().any(|o| o == part) {
                out.push(part.to_string());
            }
        }
        // Cookies: each value.
        if k == hyper::header::COOKIE {
            for c in v.split(';') {
                if let Some((_, val)) = c.split_once('=') {
                    let val = val.trim();
                    if val.len() >= 8 {
                        out.push(val.to_string());
                    }
                }
            }
        }
    }
    // Longest first, so a value containing another is cut whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// The values of secret fields anywhere in `v`.
fn secret_fields(v: &Value, fields: &[String], out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if record::is_secret_field(k, fields) {
                    let text = match x {
                        Value::String(s) => s.clone(),
                        Value::Null => continue,
                        other => other.to_string(),
                    };
                    if text.len() >= 8 {
                        out.push(text);
                    }
                } else {
                    secret_fields(x, fields, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| secret_fields(x, fields, out)),
        _ => {}
    }
}

/// Scrub a value for evidence: the one scrubber (`crate::util::scrub`: names, shapes, known
/// secrets, so an echo of a named secret gets the same mark), then the request's secret
/// values.
pub(crate) fn scrub(app: &App, secrets: &[String], v: &mut Value) {
    app.store.scrubber().json(v);
    cut_secrets(v, secrets);
}
