//! `understudy drift` (docs/src/reference/import-drift.md): where a real answer's shape (and, on request, values)
//! differs from what the mock renders for the same input.
//!
//! # The run ([`run`])
//! For every operation with a mock that is not a write, every example of its mock becomes a
//! request ([`crate::upstream::request::build`]: the inverse of the proxy's input building —
//! path captures and query captures rendered into the `match` template, the rest of the
//! input as the body of a method that carries one: JSON, or a form-encoded / multipart form
//! when the `match` says `"body": "form"` / `"multipart"`), which must route back to the same operation with the same captures
//! before it is sent. It goes through the upstream client dry-run uses
//! ([`crate::upstream::Upstream`], `--upstream-ca`); the answer becomes the envelope record
//! mode makes (`{"status","data"?}`, [`crate::upstream::answer::envelope`]), is validated against the output schema
//! and the profile's envelope rule, and is diffed against the example's result rendered by
//! the call core ([`crate::operation::call::execute`]).
//!
//! **A write is never sent**: an operation whose `write` (else its method, by the profile's
//! default) makes it a write is reported `write` and none of its examples leave the
//! process; a read operation's request that the profile classifies as a write (a composite
//! with a write subrequest) is not sent either. An example whose request cannot be built (a
//! `*` path segment outside Salesforce, a capture missing from the input) is reported
//! `skipped` with why.
//!
//! # The diff ([`crate::upstream::diff::diff`])
//! Both sides are the native envelope (`{"status","data"}`); the rules are the one diff's.
//!
//! # Secrets
//! The report is made here and only here, so the one scrubber ([`crate::util::scrub`]) is
//! applied here, to each example as it is added ([`ExampleReport::scrub`]): the request line
//! (a query's `access_token=…`), the real answer and the rendered mock, each difference's
//! values (a value under a secret name goes whole: the diff shows it without its name), the
//! schema errors and messages; the upstream's base URL loses its user information. Neither
//! the text nor the JSON output can show a secret of a real request or answer.

use crate::contract::template::{parse_query, path_segments};
use crate::contract::RequestView;
use crate::operation::call::execute;
use crate::operation::check::schema_errors;
use crate::operation::Operation;
use crate::profile::envelope::envelope_problem;
use crate::profile::Profile;
use crate::upstream::answer::envelope;
use crate::upstream::diff::{diff, Difference};
use crate::upstream::request::{self, build, capture_text, Limits, PlannedRequest};
use crate::upstream::Upstream;
use crate::util::scrub::{url_without_userinfo, Scrubber};
use serde_json::{json, Value};

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
    /// Scrub everything the example shows (module doc, "Secrets"). The real answer first:
    /// the secrets it holds under secret names are then cut wherever else they appear.
    pub fn scrub(&mut self, s: &Scrubber) {
        for v in [&mut self.real, &mut self.expected].into_iter().flatten() {
            s.json(v);
        }
        if let Some(r) = &mut self.request {
            if let Some(t) = s.text(r) {
                *r = t;
            }
        }
        if let Some(m) = &mut self.message {
            if let Some(t) = s.text(m) {
                *m = t;
            }
        }
        for e in &mut self.schema_errors {
            if let Some(t) = s.text(e) {
                *e = t;
            }
        }
        for d in &mut self.differences {
            let names: Vec<String> = d
                .pointer
                .split('/')
                .map(|p| p.replace("~1", "/").replace("~0", "~"))
                .collect();
            for v in [&mut d.mock, &mut d.real].into_iter().flatten() {
                s.json_at(names.iter().map(String::as_str), v);
            }
        }
    }

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

/// Send every example of every read operation of `ops` with a mock to `base` (the
/// integration's upstream) and compare (module doc). A write — the operation's `write`, else
/// the profile's rule on the built request — is never sent. Every example passes `scrubber`
/// before it joins the report (module doc, "Secrets").
pub async fn run(
    integration: &str,
    ops: &[Operation],
    profile: Option<&Profile>,
    upstream: &Upstream,
    base: &str,
    values: bool,
    scrubber: &Scrubber,
) -> Report {
    let shown_base = url_without_userinfo(base);
    let mut report = Report {
        integration: integration.to_string(),
        upstream: scrubber.text(&shown_base).unwrap_or(shown_base),
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
                .and_then(|m| build(m, &ex.input, Some(op.profile)))
                .and_then(|p| routes_back(op, &p, &ex.input).map(|_| p));
            let planned = match planned {
                Ok(p) => p,
                Err(m) => {
                    e.message = Some(m);
                    push(&mut r, e, scrubber);
                    continue;
                }
            };
            e.request = Some(planned.line());
            if is_write(op, profile, &planned) {
                e.outcome = "write";
                e.message = Some("this request is a write: never sent".into());
                push(&mut r, e, scrubber);
                continue;
            }
            let rendered = execute(op, &ex.input, Some(&ex.variant), ex.state.as_ref());
            let Some(expected) = rendered.result else {
                e.outcome = "mock_error";
                e.message = rendered.error.map(|c| c.to_string());
                push(&mut r, e, scrubber);
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
            push(&mut r, e, scrubber);
        }
        report.operations.push(r);
    }
    report
}

/// Add an example to its operation, scrubbed.
fn push(r: &mut OperationReport, mut e: ExampleReport, s: &Scrubber) {
    e.scrub(s);
    r.examples.push(e);
}

/// Send one planned read and make its answer the envelope the mock's result is compared
/// with (`crate::upstream`: the one request, the one envelope).
async fn send(upstream: &Upstream, base: &str, req: &PlannedRequest) -> Result<Value, String> {
    let headers = req.header_map(None)?;
    let limits = Limits {
        read_timeout: upstream.timeout(),
        max_body: MAX_ANSWER_BYTES,
    };
    let answer = request::send(upstream, base, req, &headers, limits, false)
        .await
        .map_err(|f| f.message)?;
    Ok(envelope(answer.status, &answer.body))
}
