//! What a forwarded call leaves behind: its evidence `result` (the real answer as an
//! envelope, [`http_result`]), scrubbed of secrets (`crate::proxy::call::scrub`, with the
//! request's secret set computed once per call) — and, in the record modes, the
//! [`Exchange`] kept for the drafts.

use hyper::http::HeaderMap;
use serde_json::{json, Map, Value};

use super::relay::BodyEnd;
use crate::app::App;
use crate::author::record::{self, Call, Exchange, HttpCall};
use crate::http::{is_sse, Request};

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
