//! Secret scrubbing (docs/src/guides/record.md): what must never reach a draft file, the evidence or a log.
//!
//! Applied to every captured [`Exchange`] before anything touches disk ([`scrub_exchange`]),
//! and usable on its own by the server's evidence path ([`is_secret_header`], [`scrub_json`]).
//! A scrubbed value becomes the string [`SCRUBBED`] (`"[scrubbed]"`); the functions return
//! the places they scrubbed (`request.headers.authorization`, `response.body.records.0.sessionId`)
//! so the caller can say so — the places, never the values.
//!
//! # The names (one set of rules: `crate::util::scrub`)
//! Which header, field or query parameter holds a secret is decided by the one scrubber's
//! rules, never by a list of this module: the built-in names
//! ([`crate::util::scrub::SECRET_NAMES`], compared case-insensitively with `_` and `-`
//! ignored: `sessionId` = `session_id` = `SESSION-ID`), the header patterns
//! ([`crate::util::scrub::secret_header_pattern`]: `…-token`, `…api-key…`, `x-auth…`), and
//! the project's own names — `redact`, `scrub.fields` and `scrub.headers` of
//! `understudy.json`, each a secret name for headers, fields and parameters alike (the
//! `extra` of these functions: [`crate::config::Scrub::names`]). A name added there
//! once is scrubbed here, in the evidence, the reports, the logs and `drift`'s output.
//! - A field's value is scrubbed whatever its type (an object under `password` goes whole);
//!   `null` and `""` hold no secret and are kept.
//! - Strings that hold JSON (an MCP text block carrying the result as JSON text) are scrubbed
//!   inside; a form-encoded request or response body (`grant_type=password&password=…`) too.
//! - Secret values seen in a scrubbed place (the bearer token, a cookie value, a scrubbed
//!   field's string) are also cut out of every other string of the exchange — the path, query
//!   values, other headers, bodies — when they are at least 8 characters long (a token echoed in
//!   a `Location` header or a `nextRecordsUrl` does not leak).

use crate::author::record::{Call, Exchange, ToolOutcome};
use crate::config::Scrub;
use crate::util::scrub::SCRUBBED;
use serde_json::Value;

/// Secret values shorter than this are not searched for in other strings (too likely to
/// match innocent text).
const MIN_PROPAGATED_SECRET: usize = 8;

/// Whether `name` is one of the project's names `extra` (compared as the one scrubber does).
fn is_extra(name: &str, extra: &[String]) -> bool {
    let n = crate::util::scrub::normalize(name);
    !n.is_empty() && extra.iter().any(|e| crate::util::scrub::normalize(e) == n)
}

/// Whether a header carries a secret: the one scrubber's rules (module doc) or a name of
/// `extra`.
pub fn is_secret_header(name: &str, extra: &[String]) -> bool {
    crate::util::scrub::is_secret_header(name) || is_extra(name, extra)
}

/// Whether a body/query field carries a secret: the one scrubber's names (module doc) or a
/// name of `extra`.
pub fn is_secret_field(name: &str, extra: &[String]) -> bool {
    crate::util::scrub::is_secret_name(name) || is_extra(name, extra)
}

/// Scrub the secret fields of a JSON value in place, at any depth (see the module doc).
/// Returns the dot paths scrubbed (`records.0.sessionId`; `""` never occurs).
pub fn scrub_json(v: &mut Value, extra_fields: &[String]) -> Vec<String> {
    let mut s = Scrubber::new(extra_fields);
    s.json(v, "");
    s.paths
}

/// Scrub one exchange in place: headers, query, bodies (HTTP) or arguments and result (MCP),
/// then every other string that repeats a scrubbed secret. Returns the places scrubbed, e.g.
/// `request.headers.authorization`, `request.query.access_token`, `request.body.password`,
/// `response.body.records.0.sessionId`, `request.path (a scrubbed secret)`.
pub fn scrub_exchange(ex: &mut Exchange, scrub: &Scrub) -> Vec<String> {
    let names = scrub.names();
    let mut s = Scrubber::new(&names);
    match &mut ex.call {
        Call::Http(h) => {
            s.headers(&mut h.request_headers, "request.headers");
            s.headers(&mut h.response_headers, "response.headers");
            for (k, v) in &mut h.query {
                if s.is_field(k) && !v.is_empty() && v != SCRUBBED {
                    s.secret(v);
                    *v = SCRUBBED.to_string();
                    s.paths.push(format!("request.query.{k}"));
                }
            }
            if let Some(b) = &mut h.request_body {
                s.body(b, "request.body");
            }
            if let Some(b) = &mut h.response_body {
                s.body(b, "response.body");
            }
            // Second pass: the secret values found above, wherever else they occur.
            s.propagate_str(&mut h.path, "request.path");
            for (k, v) in &mut h.query {
                s.propagate_str(v, &format!("request.query.{k}"));
            }
            for (k, v) in &mut h.request_headers {
                s.propagate_str(v, &format!("request.headers.{}", k.to_ascii_lowercase()));
            }
            for (k, v) in &mut h.response_headers {
                s.propagate_str(v, &format!("response.headers.{}", k.to_ascii_lowercase()));
            }
            if let Some(b) = &mut h.request_body {
                s.propagate(b, "request.body");
            }
            if let Some(b) = &mut h.response_body {
                s.propagate(b, "response.body");
            }
        }
        Call::Tool(t) => {
            // Every JSON part of the call, with the name its scrubbed places get.
            let mut parts: Vec<(&mut Value, String)> = vec![(&mut t.arguments, "arguments".into())];
            parts.push(outcome_part(&mut t.outcome, ""));
            for (i, n) in t.notifications.iter_mut().enumerate() {
                parts.push((n, format!("notifications.{i}")));
            }
            for (i, a) in t.asks.iter_mut().enumerate() {
                parts.push((&mut a.params, format!("asks.{i}.params")));
                if let Some(answer) = &mut a.answer {
                    parts.push(outcome_part(answer, &format!("asks.{i}.")));
                }
            }
            s.parts(parts);
        }
        Call::Mcp(m) => {
            let outcome = outcome_part(&mut m.outcome, "");
            s.parts(vec![(&mut m.params, "params".into()), outcome]);
        }
    }
    s.paths.sort();
    s.paths.dedup();
    s.paths
}

/// An outcome as a scrubbed part: `<prefix>result` or `<prefix>error`.
fn outcome_part<'v>(o: &'v mut ToolOutcome, prefix: &str) -> (&'v mut Value, String) {
    match o {
        ToolOutcome::Result(v) => (v, format!("{prefix}result")),
        ToolOutcome::Error(v) => (v, format!("{prefix}error")),
    }
}

struct Scrubber<'a> {
    extra_fields: &'a [String],
    /// Secret values seen, for the second pass.
    secrets: Vec<String>,
    paths: Vec<String>,
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

impl<'a> Scrubber<'a> {
    fn new(extra_fields: &'a [String]) -> Self {
        Scrubber {
            extra_fields,
            secrets: Vec::new(),
            paths: Vec::new(),
        }
    }

    fn is_field(&self, name: &str) -> bool {
        is_secret_field(name, self.extra_fields)
    }

    fn secret(&mut self, value: &str) {
        let v = value.trim();
        if v.chars().count() >= MIN_PROPAGATED_SECRET && v != SCRUBBED {
            self.secrets.push(v.to_string());
        }
    }

    /// Remember the secret parts of a header value: the whole value, the credentials after an
    /// auth scheme (`Bearer X`), cookie values.
    fn header_secrets(&mut self, name: &str, value: &str) {
        self.secret(value);
        if let Some((_, cred)) = value.trim().split_once(' ') {
            self.secret(cred);
        }
        let n = name.to_ascii_lowercase();
        if n == "cookie" || n == "set-cookie" {
            for part in value.split(';') {
                if let Some((_, v)) = part.split_once('=') {
                    self.secret(v.trim_matches(|c: char| c == '"' || c.is_whitespace()));
                }
            }
        }
    }

    fn headers(&mut self, headers: &mut [(String, String)], at: &str) {
        for (k, v) in headers.iter_mut() {
            if is_secret_header(k, self.extra_fields) && !v.is_empty() && v != SCRUBBED {
                self.header_secrets(k, v);
                *v = SCRUBBED.to_string();
                self.paths.push(format!("{at}.{}", k.to_ascii_lowercase()));
            }
        }
    }

    /// A body: JSON, or a string that may be form-encoded.
    fn body(&mut self, v: &mut Value, at: &str) {
        if let Value::String(s) = v {
            if let Some(scrubbed) = self.form(s, at) {
                *s = scrubbed;
                return;
            }
        }
        self.json(v, at);
    }

    /// `a=1&password=x` → `a=1&password=[scrubbed]`; `None` when `s` is not form-encoded or
    /// holds no secret.
    fn form(&mut self, s: &str, at: &str) -> Option<String> {
        let t = s.trim();
        if t.is_empty()
            || !t.contains('=')
            || t.chars().any(char::is_whitespace)
            || t.starts_with(['{', '['])
        {
            return None;
        }
        let mut changed = false;
        let parts: Vec<String> = t
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) => {
                    let key = crate::contract::template::parse_query(k)
                        .first()
                        .map(|(k, _)| k.clone())
                        .unwrap_or_default();
                    if self.is_field(&key) && !v.is_empty() {
                        let decoded = crate::contract::template::parse_query(&format!("x={v}"));
                        if let Some((_, d)) = decoded.first() {
                            self.secret(d);
                        }
                        self.secret(v);
                        self.paths.push(join(at, &key));
                        changed = true;
                        format!("{k}={}", "%5Bscrubbed%5D")
                    } else {
                        pair.to_string()
                    }
                }
                None => pair.to_string(),
            })
            .collect();
        changed.then(|| parts.join("&"))
    }

    /// Scrub JSON parts of one call: the secret fields of each, then every secret value found
    /// in any of them wherever it repeats.
    fn parts(&mut self, mut parts: Vec<(&mut Value, String)>) {
        for (v, at) in parts.iter_mut() {
            self.json(v, at);
        }
        for (v, at) in parts.iter_mut() {
            self.propagate(v, at);
        }
    }

    fn json(&mut self, v: &mut Value, at: &str) {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    let p = join(at, k);
                    if self.is_field(k) {
                        let empty = child.is_null() || child.as_str() == Some("");
                        if !empty && child.as_str() != Some(SCRUBBED) {
                            self.collect_strings(child);
                            *child = Value::String(SCRUBBED.to_string());
                            self.paths.push(p);
                        }
                    } else {
                        self.json(child, &p);
                    }
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter_mut().enumerate() {
                    self.json(child, &join(at, &i.to_string()));
                }
            }
            Value::String(s) => {
                if let Some(mut inner) = embedded_json(s) {
                    let before = self.paths.len();
                    self.json(&mut inner, at);
                    if self.paths.len() != before {
                        *s = inner.to_string();
                    }
                }
            }
            _ => {}
        }
    }

    fn collect_strings(&mut self, v: &Value) {
        match v {
            Value::String(s) => self.secret(s),
            Value::Number(n) => self.secret(&n.to_string()),
            Value::Array(a) => a.iter().for_each(|c| self.collect_strings(c)),
            Value::Object(m) => m.values().for_each(|c| self.collect_strings(c)),
            _ => {}
        }
    }

    fn propagate_str(&mut self, s: &mut String, at: &str) {
        if self.secrets.is_empty() || s == SCRUBBED {
            return;
        }
        let mut changed = false;
        for secret in &self.secrets {
            if s.contains(secret.as_str()) {
                *s = s.replace(secret.as_str(), SCRUBBED);
                changed = true;
            }
        }
        if changed {
            self.paths.push(format!("{at} (a scrubbed secret)"));
        }
    }

    fn propagate(&mut self, v: &mut Value, at: &str) {
        if self.secrets.is_empty() {
            return;
        }
        match v {
            Value::String(s) => self.propagate_str(s, at),
            Value::Array(a) => {
                for (i, c) in a.iter_mut().enumerate() {
                    self.propagate(c, &join(at, &i.to_string()));
                }
            }
            Value::Object(m) => {
                for (k, c) in m.iter_mut() {
                    self.propagate(c, &join(at, k));
                }
            }
            _ => {}
        }
    }
}

/// A string that is itself a JSON object or array (MCP text content), parsed.
fn embedded_json(s: &str) -> Option<Value> {
    let t = s.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<Value>(s)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::author::record::HttpCall;
    use crate::contract::ProfileKind;
    use serde_json::json;

    #[test]
    fn secret_headers() {
        for h in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "Set-Cookie",
            "X-API-Key",
            "api-key",
            "X-Sfdc-Session",
            "X-Csrf-Token",
            "x-goog-api-key",
            "X-Auth-Email",
            "Understudy-Attempt",
        ] {
            assert!(is_secret_header(h, &[]), "{h}");
        }
        for h in [
            "Content-Type",
            "traceparent",
            "Sforce-Limit-Info",
            "Location",
            "Mcp-Session-Id",
        ] {
            assert!(!is_secret_header(h, &[]), "{h}");
        }
        assert!(is_secret_header("X-Tenant", &["x-tenant".into()]));
    }

    #[test]
    fn the_names_are_the_one_scrubbers() {
        // Every built-in name of the one scrubber is a secret here, as a field and as a header.
        for n in crate::util::scrub::SECRET_NAMES {
            assert!(is_secret_field(n, &[]), "{n}");
            assert!(is_secret_header(n, &[]), "{n}");
        }
        for n in ["signature", "assertion", "set_cookie", "x_api_key"] {
            assert!(is_secret_field(n, &[]), "{n}");
        }
        // A project name, given once, is a secret name for headers, fields and parameters.
        let scrub = Scrub {
            fields: vec!["tax_ref".into()],
            ..Scrub::default()
        };
        let mut ex = Exchange {
            integration: "crm".into(),
            profile: ProfileKind::Rest,
            matched_operation: None,
            at_ms: 0,
            call: Call::Http(HttpCall {
                method: "GET".into(),
                path: "/p".into(),
                query: vec![("taxRef".into(), "q1".into())],
                request_headers: vec![("Tax-Ref".into(), "h1".into())],
                request_body: None,
                status: 200,
                response_headers: vec![],
                response_body: Some(json!({"TAX_REF": "b1", "signature": "s1"})),
            }),
        };
        let paths = scrub_exchange(&mut ex, &scrub);
        let text = serde_json::to_string(&ex).unwrap();
        for raw in ["q1", "h1", "b1", "s1"] {
            assert!(!text.contains(&format!("\"{raw}\"")), "{raw}: {text}");
        }
        assert_eq!(paths.len(), 4, "{paths:?}");
    }

    #[test]
    fn secret_fields_ignore_case_and_separators() {
        for f in [
            "access_token",
            "sessionId",
            "SESSION-ID",
            "refresh_token",
            "client_secret",
            "Password",
            "token",
        ] {
            assert!(is_secret_field(f, &[]), "{f}");
        }
        for f in ["Id", "progressToken", "nextRecordsUrl", "Phone", ""] {
            assert!(!is_secret_field(f, &[]), "{f}");
        }
        assert!(is_secret_field("SSN", &["ssn".into()]));
    }

    #[test]
    fn json_is_scrubbed_recursively_and_in_embedded_json() {
        let mut v = json!({
            "records": [{"Id": "1", "sessionId": "abc"}],
            "auth": {"Access_Token": {"nested": true}, "password": null},
            "content": [{"type": "text", "text": "{\"refresh_token\":\"r-123456789\",\"ok\":1}"}]
        });
        let paths = scrub_json(&mut v, &[]);
        assert_eq!(v["records"][0]["sessionId"], SCRUBBED);
        assert_eq!(v["auth"]["Access_Token"], SCRUBBED);
        assert_eq!(v["auth"]["password"], Value::Null);
        let text: Value = serde_json::from_str(v["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, json!({"refresh_token": SCRUBBED, "ok": 1}));
        assert!(
            paths.contains(&"records.0.sessionId".to_string()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"content.0.text.refresh_token".to_string()),
            "{paths:?}"
        );
    }

    #[test]
    fn exchange_scrubbing_covers_every_place_and_echoes() {
        let mut ex = Exchange {
            integration: "crm".into(),
            profile: ProfileKind::Rest,
            matched_operation: None,
            at_ms: 0,
            call: Call::Http(HttpCall {
                method: "POST".into(),
                path: "/login/SECRET-TOKEN-42".into(),
                query: vec![
                    ("access_token".into(), "SECRET-TOKEN-42".into()),
                    ("a".into(), "1".into()),
                ],
                request_headers: vec![
                    ("Authorization".into(), "Bearer SECRET123456".into()),
                    ("Cookie".into(), "sid=COOKIEVALUE99; theme=dark".into()),
                    ("X-Echo".into(), "token SECRET123456 again".into()),
                ],
                request_body: Some(json!(
                    "grant_type=password&password=hunter2hunter2&user=bob"
                )),
                status: 200,
                response_headers: vec![("Location".into(), "/x?sid=COOKIEVALUE99".into())],
                response_body: Some(json!({"instance": "x", "note": "hunter2hunter2"})),
            }),
        };
        let paths = scrub_exchange(&mut ex, &Scrub::default());
        let text = serde_json::to_string(&ex).unwrap();
        for secret in [
            "SECRET123456",
            "COOKIEVALUE99",
            "SECRET-TOKEN-42",
            "hunter2hunter2",
        ] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert!(text.contains("theme") || !text.contains("dark"));
        assert!(
            paths.contains(&"request.headers.authorization".to_string()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"request.query.access_token".to_string()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"request.body.password".to_string()),
            "{paths:?}"
        );
        let Call::Http(h) = &ex.call else {
            unreachable!()
        };
        assert_eq!(h.query[1], ("a".to_string(), "1".to_string()));
        assert!(h
            .request_body
            .as_ref()
            .unwrap()
            .as_str()
            .unwrap()
            .contains("user=bob"));
    }
}
