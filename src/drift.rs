//! `understudy drift` (SPEC 19): where a real answer's shape (and, on request, values)
//! differs from what the mock renders for the same input.
//!
//! # The run ([`run`])
//! For every operation with a mock that is not a write, every example of its mock becomes a
//! request ([`request_for`]: the inverse of SPEC 5 step 2 — path captures and query captures
//! rendered into the `match` template, the rest of the input as the JSON body of a method
//! that carries one), which must route back to the same operation with the same captures
//! before it is sent. It goes through the upstream client dry-run uses
//! ([`crate::upstream::Upstream`], `--upstream-ca`); the answer becomes the envelope record
//! mode makes (`{"status","data"?}`, [`envelope`]), is validated against the output schema
//! and the profile's envelope rule, and is diffed against the example's result rendered by
//! the call core ([`crate::operation::call::execute`]).
//!
//! **A write is never sent**: an operation whose `write` (else its method, by the profile's
//! default) makes it a write is reported `write` and none of its examples leave the
//! process; a read operation's request that the profile classifies as a write (a composite
//! with a write subrequest) is not sent either. An example whose request cannot be built (a
//! `*` path segment, a capture missing from the input) is reported `skipped` with why.
//!
//! # The diff ([`diff`])
//! Both sides are the native envelope (`{"status","data"}`). Paths are JSONPath-like:
//! `$.data.records[0].FirstName`. Objects are compared member by member (a member only in
//! the real answer is `added`, only in the mock `removed`); arrays element by element over
//! their common length (a length difference is a value difference); a JSON type that differs
//! (`string` → `number`, `object` → `null`) is `changed_type` and its inside is not compared
//! further. Integers and other numbers are one type, `number`. Values (scalars that differ,
//! array lengths) are reported only when asked; `status` is always compared.

use crate::contract::template::{parse_query, path_segments};
use crate::contract::{MatchSpec, RequestView};
use crate::operation::call::execute;
use crate::operation::check::schema_errors;
use crate::operation::Operation;
use crate::profile::envelope::envelope_problem;
use crate::profile::Profile;
use crate::upstream::Upstream;
use serde_json::{json, Value};

/// One difference.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub path: String,
    pub kind: Kind,
    /// The mock's value there (`None` for `added`).
    pub mock: Option<Value>,
    /// The real value there (`None` for `removed`).
    pub real: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Added,
    Removed,
    ChangedType,
    ChangedValue,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Added => "added",
            Kind::Removed => "removed",
            Kind::ChangedType => "changed_type",
            Kind::ChangedValue => "changed_value",
        }
    }
}

impl Difference {
    pub fn to_json(&self) -> Value {
        json!({"path": self.path, "kind": self.kind.as_str(), "mock": self.mock, "real": self.real})
    }

    /// One line: `$.data.x: changed type: string → number`.
    pub fn describe(&self) -> String {
        let ty = |v: &Option<Value>| v.as_ref().map(type_name).unwrap_or("-");
        match self.kind {
            Kind::Added => format!("{}: added ({})", self.path, ty(&self.real)),
            Kind::Removed => format!("{}: removed (was {})", self.path, ty(&self.mock)),
            Kind::ChangedType => format!(
                "{}: changed type: {} → {}",
                self.path,
                ty(&self.mock),
                ty(&self.real)
            ),
            Kind::ChangedValue => format!(
                "{}: changed value: {} → {}",
                self.path,
                short(self.mock.as_ref()),
                short(self.real.as_ref())
            ),
        }
    }
}

fn short(v: Option<&Value>) -> String {
    let s = v.map(Value::to_string).unwrap_or_default();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

/// The JSON type name (`number` for every number).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every difference between the mock's rendered result and the real answer (module doc).
pub fn diff(mock: &Value, real: &Value, values: bool) -> Vec<Difference> {
    let mut out = Vec::new();
    // The status is part of the contract's behaviour: always compared.
    if let (Some(a), Some(b)) = (mock.get("status"), real.get("status")) {
        if !crate::mock::path::json_equal(a, b) {
            out.push(Difference {
                path: "$.status".into(),
                kind: Kind::ChangedValue,
                mock: Some(a.clone()),
                real: Some(b.clone()),
            });
        }
    }
    match (mock.get("data"), real.get("data")) {
        (Some(a), Some(b)) => walk(a, b, "$.data".into(), values, &mut out),
        (Some(a), None) => out.push(Difference {
            path: "$.data".into(),
            kind: Kind::Removed,
            mock: Some(a.clone()),
            real: None,
        }),
        (None, Some(b)) => out.push(Difference {
            path: "$.data".into(),
            kind: Kind::Added,
            mock: None,
            real: Some(b.clone()),
        }),
        (None, None) => {}
    }
    out
}

fn member_path(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !key.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", Value::String(key.to_string()))
    }
}

fn walk(a: &Value, b: &Value, path: String, values: bool, out: &mut Vec<Difference>) {
    if type_name(a) != type_name(b) {
        out.push(Difference {
            path,
            kind: Kind::ChangedType,
            mock: Some(a.clone()),
            real: Some(b.clone()),
        });
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                let p = member_path(&path, k);
                match y.get(k) {
                    Some(vb) => walk(va, vb, p, values, out),
                    None => out.push(Difference {
                        path: p,
                        kind: Kind::Removed,
                        mock: Some(va.clone()),
                        real: None,
                    }),
                }
            }
            for (k, vb) in y {
                if !x.contains_key(k) {
                    out.push(Difference {
                        path: member_path(&path, k),
                        kind: Kind::Added,
                        mock: None,
                        real: Some(vb.clone()),
                    });
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                walk(va, vb, format!("{path}[{i}]"), values, out);
            }
            if values && x.len() != y.len() {
                out.push(Difference {
                    path: format!("{path}.length"),
                    kind: Kind::ChangedValue,
                    mock: Some(json!(x.len())),
                    real: Some(json!(y.len())),
                });
            }
        }
        _ => {
            if values && !crate::mock::path::json_equal(a, b) {
                out.push(Difference {
                    path,
                    kind: Kind::ChangedValue,
                    mock: Some(a.clone()),
                    real: Some(b.clone()),
                });
            }
        }
    }
}

// ---- the request an example stands for, and the run against the real upstream ----------

/// The HTTP request an example's input stands for: the inverse of SPEC 5 step 2 (captures
/// into the `match` template, the rest of the input as the JSON body of a non-GET).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRequest {
    pub method: String,
    /// Percent-encoded path, relative to the integration's upstream base.
    pub path: String,
    /// Decoded query parameters (encoded by [`PlannedRequest::rest`]).
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
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
fn capture_text(input: &Value, name: &str) -> Result<String, String> {
    match input.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(v.to_string()),
        Some(v) => Err(format!(
            "capture `{{{name}}}`: the example's input holds {} there, not text",
            type_name(v)
        )),
        None => Err(format!(
            "capture `{{{name}}}`: the example's input has no `{name}`"
        )),
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

/// The request for `input` under `spec` (the inverse of the proxy's input building: path
/// captures, query captures, then — for a method that carries one — the other members of
/// the input as the JSON body; an input that is only `{"body": X}` besides its captures sends
/// `X`). A `*` path segment has no value the mock knows: an error naming it.
pub fn request_for(spec: &MatchSpec, input: &Value) -> Result<PlannedRequest, String> {
    let method = spec.method.trim().to_ascii_uppercase();
    let mut used = Vec::new();
    let mut path = String::new();
    for (i, seg) in spec.path.split('/').filter(|s| !s.is_empty()).enumerate() {
        path.push('/');
        if seg == "*" {
            return Err(format!(
                "path segment {} of `{}` is `*`: the mock does not say what the real system expects there",
                i + 1,
                spec.path
            ));
        }
        if let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            path.push_str(&encode(&capture_text(input, name)?));
            used.push(name.to_string());
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
    let body = if matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS") {
        None
    } else {
        let mut rest = input.as_object().cloned().unwrap_or_default();
        for n in &used {
            rest.remove(n);
        }
        match rest.get("body") {
            Some(b) if rest.len() == 1 && !b.is_object() => Some(b.clone()),
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
    })
}

/// Whether the proxy would treat `req` to `op` as a write: the operation's `write`, else the
/// profile's rule on that very request (composite subrequests included). Fail closed.
pub fn is_write(op: &Operation, profile: Option<&Profile>, req: &PlannedRequest) -> bool {
    if let Some(w) = op.op.write {
        return w;
    }
    let Some(profile) = profile else {
        return true;
    };
    let segments = path_segments(&req.path);
    profile.is_write(&req.method, &segments, req.body.as_ref())
}

/// The request goes where the proxy would route it: the operation's own `match` accepts it
/// and captures the input's values.
fn routes_back(op: &Operation, req: &PlannedRequest, input: &Value) -> Result<(), String> {
    let Some(m) = &op.matcher else {
        return Err("the operation has no `match`".into());
    };
    let rest = req.rest();
    let (p, q) = rest.split_once('?').unwrap_or((rest.as_str(), ""));
    let segments = path_segments(p);
    let query = parse_query(q);
    let mut headers = hyper::http::HeaderMap::new();
    for (k, v) in &req.headers {
        if let (Ok(k), Ok(v)) = (
            hyper::http::HeaderName::from_bytes(k.as_bytes()),
            hyper::http::HeaderValue::from_str(v),
        ) {
            headers.insert(k, v);
        }
    }
    let view = RequestView {
        method: &req.method,
        segments: &segments,
        query: &query,
        headers: &headers,
    };
    let caps = m.matches(&view).map_err(|e| {
        format!("the request built from the example does not match the operation's `match`: {e}")
    })?;
    for (k, v) in caps {
        let want = capture_text(input, &k).ok();
        if v.as_str() != want.as_deref() {
            return Err(format!(
                "capture `{{{k}}}` does not come back as the example's value (got {v})"
            ));
        }
    }
    Ok(())
}

/// What happened to one example.
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleReport {
    pub index: usize,
    pub variant: String,
    /// `GET /path?query`, when one could be built.
    pub request: Option<String>,
    /// `ok` (same shape), `drifted` (differences), `violation` (the real answer fails the
    /// output schema), `skipped` (no request could be built), `write` (not sent: the request
    /// is a write), `unavailable` (no answer from the upstream), `mock_error` (the mock did
    /// not render).
    pub outcome: &'static str,
    pub real: Option<Value>,
    pub expected: Option<Value>,
    pub schema_errors: Vec<String>,
    pub differences: Vec<Difference>,
    pub message: Option<String>,
}

impl ExampleReport {
    pub fn to_json(&self) -> Value {
        json!({
            "example": self.index,
            "variant": self.variant,
            "request": self.request,
            "outcome": self.outcome,
            "schema_errors": self.schema_errors,
            "differences": self.differences.iter().map(Difference::to_json).collect::<Vec<_>>(),
            "message": self.message,
            "real": self.real,
            "expected": self.expected,
        })
    }
}

/// What happened to one operation.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationReport {
    pub operation_id: String,
    /// `checked` (its examples were sent), `write` (never sent), `no_mock` (nothing to
    /// compare against).
    pub status: &'static str,
    pub examples: Vec<ExampleReport>,
}

impl OperationReport {
    pub fn to_json(&self) -> Value {
        json!({
            "operation_id": self.operation_id,
            "status": self.status,
            "examples": self.examples.iter().map(ExampleReport::to_json).collect::<Vec<_>>(),
        })
    }
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    pub integration: String,
    pub upstream: String,
    pub operations: Vec<OperationReport>,
}

impl Report {
    /// Examples with this outcome, over every operation.
    pub fn count(&self, outcome: &str) -> usize {
        self.operations
            .iter()
            .flat_map(|o| &o.examples)
            .filter(|e| e.outcome == outcome)
            .count()
    }

    /// Operations with this status.
    pub fn count_ops(&self, status: &str) -> usize {
        self.operations
            .iter()
            .filter(|o| o.status == status)
            .count()
    }

    /// A real answer violated its schema, the upstream could not be asked, or a mock did not
    /// render (fail closed).
    pub fn failed(&self) -> bool {
        self.count("violation") > 0 || self.count("unavailable") > 0 || self.count("mock_error") > 0
    }

    pub fn to_json(&self) -> Value {
        json!({
            "integration": self.integration,
            "upstream": self.upstream,
            "ok": !self.failed(),
            "operations": self.operations.iter().map(OperationReport::to_json).collect::<Vec<_>>(),
            "summary": {
                "operations_checked": self.count_ops("checked"),
                "writes_not_sent": self.count_ops("write"),
                "without_mock": self.count_ops("no_mock"),
                "ok": self.count("ok"),
                "drifted": self.count("drifted"),
                "violations": self.count("violation"),
                "skipped": self.count("skipped") + self.count("write"),
                "unavailable": self.count("unavailable"),
                "mock_errors": self.count("mock_error"),
            },
        })
    }
}

/// The largest real answer drift reads.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// The envelope of a real answer (as record mode makes it: `{"status","data"?}`).
pub fn envelope(status: u16, body: &[u8]) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("status".into(), json!(status));
    if let Some(d) = crate::author::record::parse_body(body) {
        m.insert("data".into(), d);
    }
    Value::Object(m)
}

/// Send every example of every read operation of `ops` with a mock to `base` (the
/// integration's upstream) and compare (module doc). A write — the operation's `write`, else
/// the profile's rule on the built request — is never sent.
pub async fn run(
    integration: &str,
    ops: &[Operation],
    profile: Option<&Profile>,
    upstream: &Upstream,
    base: &str,
    values: bool,
) -> Report {
    let mut report = Report {
        integration: integration.to_string(),
        upstream: base.to_string(),
        operations: Vec::new(),
    };
    for op in ops {
        let mut r = OperationReport {
            operation_id: op.id().to_string(),
            status: "checked",
            examples: Vec::new(),
        };
        // `ops` were checked when loaded, so their mocks compile: only a missing one fails.
        let Ok(Some(engine)) = op.engine() else {
            r.status = "no_mock";
            report.operations.push(r);
            continue;
        };
        if op.op.write == Some(true) || (op.op.write.is_none() && op.is_write) {
            // The method alone already makes it a write (or the file says so).
            r.status = "write";
            report.operations.push(r);
            continue;
        }
        for (index, ex) in engine.definition().examples.iter().enumerate() {
            let mut e = ExampleReport {
                index,
                variant: ex.variant.clone(),
                request: None,
                outcome: "skipped",
                real: None,
                expected: None,
                schema_errors: Vec::new(),
                differences: Vec::new(),
                message: None,
            };
            let planned = op
                .op
                .match_spec
                .as_ref()
                .ok_or_else(|| "the operation has no `match`".to_string())
                .and_then(|m| request_for(m, &ex.input))
                .and_then(|p| routes_back(op, &p, &ex.input).map(|_| p));
            let planned = match planned {
                Ok(p) => p,
                Err(m) => {
                    e.message = Some(m);
                    r.examples.push(e);
                    continue;
                }
            };
            e.request = Some(planned.line());
            if is_write(op, profile, &planned) {
                e.outcome = "write";
                e.message = Some("this request is a write: never sent".into());
                r.examples.push(e);
                continue;
            }
            let rendered = execute(op, &ex.input, Some(&ex.variant), ex.state.as_ref());
            let Some(expected) = rendered.result else {
                e.outcome = "mock_error";
                e.message = rendered.error.map(|c| c.to_string());
                r.examples.push(e);
                continue;
            };
            match send(upstream, base, &planned).await {
                Err(m) => {
                    e.outcome = "unavailable";
                    e.message = Some(m);
                }
                Ok(real) => {
                    let mut errs = schema_errors(&op.output_validator, &real);
                    if let Some(p) = envelope_problem(op.profile, op.op.result_form, &real) {
                        errs.push(format!("the answer {p}"));
                    }
                    e.differences = diff(&expected, &real, values);
                    e.outcome = if !errs.is_empty() {
                        "violation"
                    } else if e.differences.is_empty() {
                        "ok"
                    } else {
                        "drifted"
                    };
                    e.schema_errors = errs;
                    e.real = Some(real);
                }
            }
            e.expected = Some(expected);
            r.examples.push(e);
        }
        report.operations.push(r);
    }
    report
}

async fn send(upstream: &Upstream, base: &str, req: &PlannedRequest) -> Result<Value, String> {
    use http_body_util::BodyExt;
    use hyper::http::{header, HeaderMap, HeaderName, HeaderValue, Method};
    let method = Method::from_bytes(req.method.as_bytes()).map_err(|e| e.to_string())?;
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    for (k, v) in &req.headers {
        let k = HeaderName::from_bytes(k.as_bytes()).map_err(|e| e.to_string())?;
        let v = HeaderValue::from_str(v).map_err(|e| e.to_string())?;
        headers.insert(k, v);
    }
    let body = match &req.body {
        Some(b) => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            bytes::Bytes::from(b.to_string())
        }
        None => bytes::Bytes::new(),
    };
    let resp = upstream
        .forward_parts(&method, base, &req.rest(), &headers, body)
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let limited = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER_BYTES);
    let bytes = tokio::time::timeout(upstream.timeout(), limited.collect())
        .await
        .map_err(|_| "the answer's body did not arrive in time".to_string())?
        .map_err(|e| format!("the answer's body could not be read: {e}"))?
        .to_bytes();
    Ok(envelope(status, &bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let mock = json!({"status": 200, "data": {"id": "1", "n": 2, "gone": true, "list": [{"a": 1}], "o": {"x": 1}}});
        let real = json!({"status": 200, "data": {"id": 1, "n": 3.5, "new": null, "list": [{"a": 2, "b": 1}, {"a": 3}], "o": {"x": 1}}});
        let d = diff(&mock, &real, false);
        let got: Vec<String> = d.iter().map(Difference::describe).collect();
        assert_eq!(
            got,
            vec![
                "$.data.gone: removed (was boolean)",
                "$.data.id: changed type: string → number",
                "$.data.list[0].b: added (number)",
                "$.data.new: added (null)",
            ]
        );
        let v = diff(&mock, &real, true);
        assert!(v
            .iter()
            .any(|d| d.path == "$.data.n" && d.kind == Kind::ChangedValue));
        assert!(v.iter().any(|d| d.path == "$.data.list.length"));
        assert!(v.iter().any(|d| d.path == "$.data.list[0].a"));
    }

    #[test]
    fn status_and_odd_keys() {
        let d = diff(
            &json!({"status": 200, "data": {"a b": 1}}),
            &json!({"status": 404}),
            false,
        );
        assert_eq!(d[0].path, "$.status");
        assert_eq!(d[1].kind, Kind::Removed);
        let d = diff(&json!({"data": {"a b": 1}}), &json!({"data": {}}), false);
        assert_eq!(d[0].path, "$.data[\"a b\"]");
        assert!(diff(
            &json!({"status": 200, "data": 1}),
            &json!({"status": 200, "data": 1.0}),
            true
        )
        .is_empty());
    }

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
}
