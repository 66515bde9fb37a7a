//! The one conversion of a real HTTP answer into the native envelope a mock renders
//! (`{"status","data"?}`): what `understudy drift` diffs and what an on-demand real call
//! (`POST /tools/execute` with `"target": "upstream"`) reports as its `result`.
//!
//! # Decision (the two former copies disagreed)
//! `data` is the body as record mode keeps it ([`parse_body`]: JSON, else the text; nothing for an empty
//! body or one nested deeper than the store keeps) — and is left out for a `1xx`, `204` or
//! `304` answer, which carries no content (RFC 9110), whatever bytes came with it: the same
//! rule record mode's drafts follow.

use serde_json::{json, Map, Value};

pub use crate::profile::no_content;

/// The envelope of a real answer (module doc).
pub fn envelope(status: u16, body: &[u8]) -> Value {
    let mut m = Map::new();
    m.insert("status".into(), json!(status));
    if !no_content(status) {
        if let Some(d) = parse_body(body) {
            m.insert("data".into(), d);
        }
    }
    Value::Object(m)
}

/// A body as the evidence and the drafts keep it: its JSON when it is JSON (unless nested
/// deeper than the store keeps, then `None`: the caller summarizes it), else its text when it
/// is UTF-8; `None` for an empty body.
pub fn parse_body(bytes: &[u8]) -> Option<Value> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        // Deeper than the store keeps: the caller's summary (bytes, content type) instead.
        return (!crate::util::json::deeper_than(&v, crate::util::json::MAX_STORED_DEPTH - 8))
            .then_some(v);
    }
    std::str::from_utf8(bytes)
        .ok()
        .map(|s| Value::String(s.to_string()))
}
