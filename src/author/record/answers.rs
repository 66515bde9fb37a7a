//! What a recorded answer becomes in a mock: the native envelope of an HTTP answer
//! (`status`, `data`, the headers worth keeping) or a tool call's result in the operation's
//! result form, and when two answers count as the same.

use super::ctx::Ctx;
use super::scrub::is_secret_header;
use super::{HttpCall, ToolCall, ToolOutcome};
use crate::contract::ResultForm;
use crate::mock::path::json_equal;
use crate::util::scrub::SCRUBBED;
use serde_json::{json, Map, Value};

/// Response headers worth keeping in an envelope (lowercase name, spelling written).
const KEPT_HEADERS: &[(&str, &str)] = &[
    ("location", "Location"),
    ("content-location", "Content-Location"),
    ("sforce-limit-info", "Sforce-Limit-Info"),
    // Bulk API 2.0 result pages: the next page's locator and this page's row count.
    ("sforce-locator", "Sforce-Locator"),
    ("sforce-numberofrecords", "Sforce-NumberOfRecords"),
    ("retry-after", "Retry-After"),
    ("etag", "ETag"),
    ("last-modified", "Last-Modified"),
    ("link", "Link"),
    ("www-authenticate", "WWW-Authenticate"),
    ("deprecation", "Deprecation"),
    ("sunset", "Sunset"),
];

fn kept_header(name: &str) -> Option<String> {
    let n = name.to_ascii_lowercase();
    if let Some((_, spelled)) = KEPT_HEADERS.iter().find(|(l, _)| *l == n) {
        return Some((*spelled).to_string());
    }
    (n.starts_with("x-ratelimit-") || n.starts_with("ratelimit")).then_some(n)
}

/// The native envelope of an HTTP answer (see the module doc).
pub(super) fn envelope(h: &HttpCall) -> Value {
    let mut m = Map::new();
    m.insert("status".into(), json!(h.status));
    let no_body = crate::profile::no_content(h.status);
    if !no_body {
        if let Some(b) = &h.response_body {
            m.insert("data".into(), b.clone());
        }
    }
    let mut headers = Map::new();
    for (k, v) in &h.response_headers {
        if is_secret_header(k, &[]) || v.contains(SCRUBBED) {
            continue;
        }
        // A text answer that is not JSON (a Bulk API 2.0 CSV result) keeps its media type,
        // so replay sends the text as it is.
        let text_type = k.eq_ignore_ascii_case("content-type")
            && !v.to_ascii_lowercase().contains("json")
            && matches!(h.response_body, Some(Value::String(_)));
        let kept = if text_type {
            Some("Content-Type".to_string())
        } else {
            kept_header(k)
        };
        if let Some(name) = kept {
            if crate::profile::header_problem(&name, v).is_none() {
                headers
                    .entry(name)
                    .or_insert_with(|| Value::String(v.clone()));
            }
        }
    }
    if !headers.is_empty() {
        m.insert("headers".into(), Value::Object(headers));
    }
    Value::Object(m)
}

/// Equal as answers: status and data (headers ignored).
pub(super) fn same_answer(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| match v {
        Value::Object(m) if m.contains_key("status") => {
            let mut m = m.clone();
            m.remove("headers");
            Value::Object(m)
        }
        other => other.clone(),
    };
    json_equal(&strip(a), &strip(b))
}

impl Ctx<'_> {
    /// The answer of one tool call in the operation's result form, or `None` (noted).
    pub(super) fn tool_answer(
        &self,
        t: &ToolCall,
        form: ResultForm,
        id: &str,
        notes: &mut Vec<String>,
    ) -> Option<Value> {
        let result = match &t.outcome {
            ToolOutcome::Error(e) => {
                self.note(
                    notes,
                    id,
                    format!(
                        "a call answered with the JSON-RPC error {} was skipped: mocks answer tool results, not protocol errors",
                        e.get("code").cloned().unwrap_or(Value::Null)
                    ),
                );
                return None;
            }
            ToolOutcome::Result(r) => r,
        };
        match form {
            ResultForm::CallToolResult => {
                let mut m = Map::new();
                for k in ["content", "structuredContent", "isError"] {
                    if let Some(v) = result.get(k) {
                        m.insert(k.to_string(), v.clone());
                    }
                }
                if !m.contains_key("content") {
                    m.insert("content".into(), json!([]));
                }
                Some(Value::Object(m))
            }
            ResultForm::Structured => {
                if result.get("isError") == Some(&Value::Bool(true)) {
                    self.note(notes, id, "a call that ended with `isError: true` was skipped: the operation's result form is structured output, which has no place for a tool error (use \"result_form\": \"call_tool_result\" to record those)");
                    return None;
                }
                if let Some(s) = result.get("structuredContent").filter(|s| s.is_object()) {
                    return Some(s.clone());
                }
                let from_text = result
                    .get("content")
                    .and_then(Value::as_array)
                    .filter(|c| c.len() == 1)
                    .and_then(|c| c[0].get("text"))
                    .and_then(Value::as_str)
                    .and_then(|t| serde_json::from_str::<Value>(t).ok())
                    .filter(Value::is_object);
                if from_text.is_none() {
                    self.note(notes, id, "a call without `structuredContent` (nor one JSON text block) was skipped: the operation's result form is structured output");
                }
                from_text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_keeps_meaningful_headers_only() {
        let h = HttpCall {
            method: "POST".into(),
            path: "/x".into(),
            query: vec![],
            request_headers: vec![],
            request_body: None,
            status: 201,
            response_headers: vec![
                ("location".into(), "/x/1".into()),
                ("Sforce-Limit-Info".into(), "api-usage=1/15000".into()),
                ("Set-Cookie".into(), "[scrubbed]".into()),
                ("Date".into(), "Mon".into()),
                ("Content-Type".into(), "application/json".into()),
            ],
            response_body: Some(json!({"id": "1"})),
        };
        assert_eq!(
            envelope(&h),
            json!({"status": 201, "data": {"id": "1"}, "headers": {"Location": "/x/1", "Sforce-Limit-Info": "api-usage=1/15000"}})
        );
        let h = HttpCall {
            status: 204,
            response_headers: vec![],
            response_body: Some(json!("")),
            ..h
        };
        assert_eq!(envelope(&h), json!({"status": 204}));
    }
}
