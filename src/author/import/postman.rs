//! Postman import (`--from postman`): Postman Collection v2.0 / v2.1 saved example responses
//! → exchanges → the record draft builder, exactly as HAR entries are ([`super::har`]).
//!
//! # What maps
//! - Every saved response (`item[…].response[j]`, folders walked in order) with a `code` is
//!   one exchange: the request is its `originalRequest` (else the item's `request`) — method,
//!   `url.path` (`:name` segments take the value of `url.variable`), enabled `url.query`
//!   entries, enabled headers, a `raw` body (JSON, else text) or a `urlencoded` / `formdata`
//!   body (its enabled fields as an object, repeated keys an array, as record mode sees a
//!   form body; `file` fields are noted and left out; the draft's `match.body` says
//!   `form` / `multipart`, so `drift` sends it that way); the answer is `code`, `header`
//!   and `body` (JSON, else text).
//! - `{{name}}` is replaced by the collection's `variable` value, in URLs, headers and
//!   bodies. A URL whose host is one `{{variable}}` (`{{baseUrl}}/pets`) is relative to the
//!   integration's base; a literal URL loses the path of the integration's `upstream` when
//!   it starts with it.
//! - The draft builder then does what record mode does (templated ids, variants per outcome,
//!   examples, inferred schemas, state sequences, scrubbing of secrets — `Authorization`,
//!   cookies, API keys, the project's `scrub` list).
//!
//! # What does not (each listed in the report with its JSON path)
//! - requests without a saved response (nothing says what they answer), saved responses
//!   without `code` (`default` responses of converted OpenAPI documents), `file` /
//!   `graphql` bodies, `file` fields of a `formdata` body, `auth` blocks (credentials are never imported),
//!   pre-request and test scripts (`event`), variables the collection does not define.
//!
//! The collection is read as `serde_json::Value` with its JSON path tracked by hand rather
//! than with the `postman_collection` crate: the subset above is small, and that crate
//! reports a malformed item without its position.

use super::{from_exchanges, Imported, Note};
use crate::author::record::{parse_body, Call, Exchange, HttpCall};
use crate::config::Scrub;
use crate::contract::ProfileKind;
use serde_json::{Map, Value};
use std::path::Path;

struct Cx<'a> {
    file: &'a Path,
    vars: Map<String, Value>,
    prefix: String,
    notes: Vec<Note>,
    exchanges: Vec<Exchange>,
    /// The JSON path of each exchange's saved response (`at_ms` indexes it).
    places: Vec<String>,
    integration: &'a str,
    profile: ProfileKind,
}

/// Read one collection (module doc).
pub fn import(
    file: &Path,
    text: &str,
    integration: &str,
    profile: ProfileKind,
    scrub: &Scrub,
    upstream: Option<&str>,
) -> Result<Imported, String> {
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| format!("{}: not a Postman collection (JSON): {e}", file.display()))?;
    let schema = doc
        .pointer("/info/schema")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !schema.contains("/v2.0") && !schema.contains("/v2.1") {
        return Err(format!(
            "{}: info/schema: `{schema}`: expected a Postman Collection v2.0 or v2.1 schema URL",
            file.display()
        ));
    }
    let vars = doc
        .get("variable")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v.get("key")?.as_str()?.to_string(), v.get("value")?.clone())))
        .collect();
    let prefix = upstream
        .and_then(|u| u.split_once("://"))
        .map(|(_, rest)| match rest.find('/') {
            Some(i) => rest[i..].trim_end_matches('/').to_string(),
            None => String::new(),
        })
        .unwrap_or_default();
    let mut cx = Cx {
        file,
        vars,
        prefix,
        notes: Vec::new(),
        exchanges: Vec::new(),
        places: Vec::new(),
        integration,
        profile,
    };
    for k in ["auth", "event"] {
        if nonempty(doc.get(k)) {
            cx.note(k, "not imported (credentials and scripts never are)");
        }
    }
    if let Some(items) = doc.get("item").and_then(Value::as_array) {
        cx.items(items, "item");
    }
    if cx.exchanges.is_empty() {
        cx.note("item", "no saved response could be imported");
    }
    let Cx {
        notes,
        exchanges,
        places,
        ..
    } = cx;
    Ok(from_exchanges(
        &exchanges,
        &|at| places.get(at as usize).cloned().unwrap_or_default(),
        profile,
        scrub,
        notes,
        file,
    ))
}

impl Cx<'_> {
    fn note(&mut self, at: &str, msg: impl Into<String>) {
        self.notes.push(Note::new(self.file, at, msg));
    }

    /// A `urlencoded` / `formdata` body's enabled `{key, value}` entries as the object a form
    /// body becomes in record mode (`crate::http::form`): repeated keys an array, variables
    /// replaced. A `file` entry's content is not in the collection: noted, left out.
    fn form_fields(&mut self, list: Option<&Value>, at: &str) -> Value {
        let mut m = Map::new();
        for (i, f) in list
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let fat = format!("{at}/{i}");
            if f.get("disabled").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let Some(key) = f.get("key").and_then(Value::as_str) else {
                self.note(&fat, "a form field without `key`: left out");
                continue;
            };
            if f.get("type").and_then(Value::as_str) == Some("file") {
                self.note(
                    &fat,
                    format!("file field `{key}`: its content is not in the collection: left out of the input"),
                );
                continue;
            }
            let raw = f.get("value").and_then(Value::as_str).unwrap_or("");
            let v = Value::String(self.subst(raw, &format!("{fat}/value")));
            let key = self.subst(key, &format!("{fat}/key"));
            crate::http::form::insert_field(&mut m, key, v);
        }
        Value::Object(m)
    }

    /// `{{name}}` → the collection variable's value (text).
    fn subst(&mut self, s: &str, at: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("{{") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let Some(j) = after.find("}}") else {
                out.push_str(&rest[i..]);
                return out;
            };
            let name = &after[..j];
            match self.vars.get(name) {
                Some(Value::String(v)) => out.push_str(v),
                Some(v) => out.push_str(&v.to_string()),
                None => {
                    self.note(
                        at,
                        format!("variable `{{{{{name}}}}}` is not defined by the collection: kept as written"),
                    );
                    out.push_str(&rest[i..i + 4 + j]);
                }
            }
            rest = &after[j + 2..];
        }
        out.push_str(rest);
        out
    }

    fn items(&mut self, items: &[Value], at: &str) {
        for (i, item) in items.iter().enumerate() {
            let iat = format!("{at}/{i}");
            if let Some(sub) = item.get("item").and_then(Value::as_array) {
                self.items(sub, &format!("{iat}/item"));
                continue;
            }
            if nonempty(item.get("event")) {
                self.note(&format!("{iat}/event"), "scripts are not imported");
            }
            let responses = item
                .get("response")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if responses.is_empty() {
                self.note(
                    &iat,
                    "a request without a saved response: nothing says what it answers",
                );
            }
            for (j, resp) in responses.iter().enumerate() {
                let rat = format!("{iat}/response/{j}");
                let Some(code) = resp.get("code").and_then(Value::as_u64) else {
                    self.note(
                        &rat,
                        "a saved response without `code`: not an answer that can be replayed",
                    );
                    continue;
                };
                let (req, qat) = match resp.get("originalRequest") {
                    Some(r) => (r.clone(), format!("{rat}/originalRequest")),
                    None => (
                        item.get("request").cloned().unwrap_or(Value::Null),
                        format!("{iat}/request"),
                    ),
                };
                if let Some(ex) = self.exchange(&req, &qat, code as u16, resp, &rat) {
                    self.exchanges.push(ex);
                    self.places.push(rat);
                }
            }
        }
    }

    fn exchange(
        &mut self,
        req: &Value,
        qat: &str,
        status: u16,
        resp: &Value,
        rat: &str,
    ) -> Option<Exchange> {
        // v2.x allows a request to be just its URL string.
        let (method, url) = match req {
            Value::String(u) => ("GET".to_string(), Value::String(u.clone())),
            Value::Object(m) => (
                m.get("method")
                    .and_then(Value::as_str)
                    .unwrap_or("GET")
                    .to_ascii_uppercase(),
                m.get("url").cloned().unwrap_or(Value::Null),
            ),
            _ => {
                self.note(qat, "no request: not imported");
                return None;
            }
        };
        if nonempty(req.get("auth")) {
            self.note(&format!("{qat}/auth"), "credentials are not imported");
        }
        let (path, query) = self.url(&url, &format!("{qat}/url"))?;
        let mut request_headers = self.headers(req.get("header"), &format!("{qat}/header"));
        // Postman sends a form body with its media type when the request does not name one.
        let form_type = match req.pointer("/body/mode").and_then(Value::as_str) {
            Some("urlencoded") => Some("application/x-www-form-urlencoded"),
            Some("formdata") => Some("multipart/form-data"),
            _ => None,
        };
        if let Some(t) = form_type {
            if !request_headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                request_headers.push(("Content-Type".into(), t.into()));
            }
        }
        let request_body = match req.get("body") {
            None | Some(Value::Null) => None,
            Some(b) => match b.get("mode").and_then(Value::as_str) {
                Some("raw") => {
                    let raw = b.get("raw").and_then(Value::as_str).unwrap_or("");
                    let raw = self.subst(raw, &format!("{qat}/body/raw"));
                    parse_body(raw.as_bytes())
                }
                Some(mode @ ("urlencoded" | "formdata")) => {
                    Some(self.form_fields(b.get(mode), &format!("{qat}/body/{mode}")))
                }
                None => None,
                Some(other) => {
                    self.note(
                        &format!("{qat}/body"),
                        format!("a `{other}` body is not imported (only `raw`, `urlencoded` and `formdata`)"),
                    );
                    None
                }
            },
        };
        let response_headers = self.headers(resp.get("header"), &format!("{rat}/header"));
        let response_body = resp
            .get("body")
            .and_then(Value::as_str)
            .and_then(|b| parse_body(b.as_bytes()));
        Some(Exchange {
            integration: self.integration.to_string(),
            profile: self.profile,
            matched_operation: None,
            at_ms: self.exchanges.len() as u64,
            call: Call::Http(HttpCall {
                method,
                path,
                query,
                request_headers,
                request_body,
                status,
                response_headers,
                response_body,
            }),
        })
    }

    /// The path (relative to the integration's base) and the query of a URL (module doc).
    #[allow(clippy::type_complexity)]
    fn url(&mut self, url: &Value, at: &str) -> Option<(String, Vec<(String, String)>)> {
        match url {
            Value::String(raw) => {
                let raw = raw.clone();
                let relative = raw.trim_start().starts_with("{{");
                let s = self.subst(&raw, at);
                let (p, q) = s.split_once('?').unwrap_or((&s, ""));
                let path = match p.split_once("://") {
                    Some((_, rest)) => rest.find('/').map(|i| &rest[i..]).unwrap_or("/"),
                    None => p,
                };
                let path = if relative {
                    // The base variable's own path is the integration's base.
                    let base = raw
                        .trim_start()
                        .split("}}")
                        .next()
                        .map(|v| v.trim_start_matches("{{").to_string())
                        .and_then(|v| {
                            self.vars
                                .get(&v)
                                .and_then(Value::as_str)
                                .map(str::to_string)
                        })
                        .and_then(|b| b.split_once("://").map(|(_, r)| r.to_string()))
                        .and_then(|r| {
                            r.find('/')
                                .map(|i| r[i..].trim_end_matches('/').to_string())
                        })
                        .unwrap_or_default();
                    path.strip_prefix(base.as_str()).unwrap_or(path).to_string()
                } else {
                    self.strip_prefix(path)
                };
                Some((path, crate::contract::template::parse_query(q)))
            }
            Value::Object(m) => {
                let vars: Map<String, Value> = m
                    .get("variable")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| {
                        Some((v.get("key")?.as_str()?.to_string(), v.get("value")?.clone()))
                    })
                    .collect();
                let host: Vec<String> = match m.get("host") {
                    Some(Value::Array(h)) => h
                        .iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect(),
                    Some(Value::String(h)) => vec![h.clone()],
                    _ => Vec::new(),
                };
                let relative =
                    host.len() == 1 && host[0].starts_with("{{") && host[0].ends_with("}}");
                let segs: Vec<String> = match m.get("path") {
                    Some(Value::Array(p)) => p
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            let s = s
                                .as_str()
                                .map(str::to_string)
                                .or_else(|| s.get("value").and_then(Value::as_str).map(str::to_string))
                                .unwrap_or_default();
                            match s.strip_prefix(':') {
                                Some(name) => match vars.get(name) {
                                    Some(Value::String(v)) => v.clone(),
                                    Some(v) => v.to_string(),
                                    None => {
                                        self.note(
                                            &format!("{at}/path/{i}"),
                                            format!("path variable `:{name}` has no value: kept as written"),
                                        );
                                        s.clone()
                                    }
                                },
                                None => self.subst(&s, &format!("{at}/path/{i}")),
                            }
                        })
                        .collect(),
                    Some(Value::String(p)) => p.split('/').map(str::to_string).collect(),
                    _ => Vec::new(),
                };
                let path = format!(
                    "/{}",
                    segs.iter()
                        .filter(|s| !s.is_empty())
                        .map(|s| encode_segment(s))
                        .collect::<Vec<_>>()
                        .join("/")
                );
                let path = if relative {
                    path
                } else {
                    self.strip_prefix(&path)
                };
                let mut query = Vec::new();
                for (i, q) in m
                    .get("query")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    if q.get("disabled").and_then(Value::as_bool) == Some(true) {
                        continue;
                    }
                    let Some(k) = q.get("key").and_then(Value::as_str) else {
                        continue;
                    };
                    let v = q.get("value").and_then(Value::as_str).unwrap_or("");
                    let qa = format!("{at}/query/{i}");
                    let k = self.subst(k, &qa);
                    let v = self.subst(v, &qa);
                    query.push((k, v));
                }
                Some((path, query))
            }
            _ => {
                self.note(at, "no URL: not imported");
                None
            }
        }
    }

    fn strip_prefix(&self, path: &str) -> String {
        if !self.prefix.is_empty() {
            if let Some(rest) = path.strip_prefix(self.prefix.as_str()) {
                if rest.is_empty() || rest.starts_with('/') {
                    return rest.to_string();
                }
            }
        }
        path.to_string()
    }

    fn headers(&mut self, h: Option<&Value>, at: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (i, x) in h
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if x.get("disabled").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let (Some(k), Some(v)) = (
                x.get("key").and_then(Value::as_str),
                x.get("value").and_then(Value::as_str),
            ) else {
                continue;
            };
            let v = self.subst(v, &format!("{at}/{i}"));
            out.push((k.to_string(), v));
        }
        out
    }
}

/// Present and not `null`, `[]` or `{}`.
fn nonempty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    }
}

/// Percent-encode what a path segment cannot hold as it is.
fn encode_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:@%".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_variables() {
        let text = serde_json::json!({
            "info": {"schema": "https://schema.getpostman.com/json/collection/v2.0.0/collection.json"},
            "variable": [{"key": "base", "value": "https://x.test/api"}],
            "item": [{"name": "a", "request": "{{base}}/v/list",
                      "response": [{"code": 200, "body": "{\"a\":1}", "originalRequest": "{{base}}/v/list?x={{nope}}"}]}]
        })
        .to_string();
        let got = import(
            Path::new("c.json"),
            &text,
            "api",
            ProfileKind::Rest,
            &Scrub::default(),
            None,
        )
        .unwrap();
        assert_eq!(got.drafts.len(), 1, "{got:?}");
        assert_eq!(
            got.drafts[0].op.match_spec.as_ref().unwrap().path,
            "/v/list"
        );
        assert!(
            got.notes.iter().any(|n| n.message.contains("`{{nope}}`")
                && n.path == "item/0/response/0/originalRequest/url"),
            "{:?}",
            got.notes
        );
    }
}
