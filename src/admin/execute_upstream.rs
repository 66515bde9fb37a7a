//! One real call on demand (the tool-testing API's `execute` with `"target": "upstream"`):
//! [`execute_upstream`] builds the operation's request from its contract and an input, sends
//! it to the integration's `upstream`, and reports what the real system answered next to
//! what the pinned mock would have answered.
//!
//! # The answer
//! ```text
//! { "integration", "operation_id", "target": "upstream", "is_write",
//!   "dry_run", "source": "tool_test", "blocked_side_effects": [],  // seed 002's members
//!   "request": null | {"method", "url", …},      // the query's secret parameters scrubbed
//!   "status_code", "duration_ms", "retries",
//!   "raw_response": null | {"status", "headers", "body"},// secrets scrubbed
//!   "result",                                     // the native envelope / the tool's output
//!   "simulated_from": null | "mock" | "profile",  // a dry-run write: where `result` came from
//!   "validation_results": {"input_valid", "output_valid", "validation_errors"},
//!   "mock": null | {"revision", "variant", "rule", "result", "error"},
//!   "diff": null | [{"path", "mock", "upstream"}],// field by field, at most 100
//!   "error": null | {"code", "message", "path"}, "error_kind": null | "input_error" | "harness_error" | "blocked" }
//! ```
//!
//! # Decisions
//! - The input is validated against the operation's input schema first; invalid input is
//!   never sent (`error_kind: "input_error"`).
//! - A write is sent only with `allow_write` and without `dry_run`. Without `allow_write`
//!   nothing is sent and the call fails (`error.code: "write_blocked"`, `error_kind:
//!   "blocked"`). Under `dry_run` nothing is sent either, and the answer is the simulated one
//!   (`error: null`): the pinned mock's result (`simulated_from: "mock"`), else the profile's
//!   `simulate` answer for the operation / its method (`"profile"`, a fresh fake id; MCP:
//!   the profile's simulated tool result); when neither exists, the harness error
//!   `no_simulated_answer` saying why for each. Either way the write is listed in
//!   `blocked_side_effects` as `integration/operation_id`. Reads are sent as usual.
//! - `duration_ms` is the real call's round trip; when nothing was sent, the time spent
//!   answering.
//! - HTTP profiles: the request is the operation's `match` filled from the input — `{name}`
//!   path segments and query captures from the input members of those names, literal header
//!   constraints as headers, the other input members as the JSON body (a non-object input
//!   under `body` is the body itself) for methods other than GET/HEAD/DELETE. A `*` path
//!   segment is `v62.0` for Salesforce (the API version) and otherwise cannot be built
//!   (`cannot_build_request`).
//! - MCP: one `tools/call` through the one MCP client ([`crate::upstream::mcp_client`]),
//!   which negotiates exactly as `discover` does — `server/discover` (2026-07-28) first, else
//!   a short session (`initialize` proposing 2025-11-25, `notifications/initialized`,
//!   `tools/call`, then `DELETE` of the session). The result is
//!   the tool's structured output (`structuredContent`, else the JSON of its text) for
//!   `result_form: structured`, the whole CallToolResult otherwise.
//! - Credentials: understudy holds none of its own. The `Authorization` header sent is
//!   [`UpstreamOptions::authorization`] (the execute's `test_context.secrets.authorization`)
//!   when given, else the value of the environment variable
//!   `UNDERSTUDY_UPSTREAM_AUTH_<INTEGRATION>` (upper case, `-` as `_`) when set. It is never
//!   echoed: besides the name-based scrubbing of headers and fields, the value (and the
//!   credential after its scheme, each when at least 8 characters) is cut out of every string
//!   of the answer, so an upstream that echoes it does not leak it.
//! - Retries: reads are retried up to twice when the connection fails before an answer
//!   (refused, reset); writes never are. `retries` says how many were needed.
//! - The mock side is the operation's latest revision evaluated with its default variant and
//!   initial state (as `POST /tools/execute` without an attempt); `diff` lists the JSON paths
//!   where the real result and the mock's differ (a value, a type, a member present on one
//!   side only), arrays compared element by element.

use std::time::Instant;

use hyper::http::HeaderMap;
use serde_json::{json, Map, Value};

use crate::app::{App, Integration};
use crate::author::record;
use crate::contract::ProfileKind;
use crate::contract::ResultForm;
use crate::operation::call::{execute_with, validate_input};
use crate::operation::check::schema_errors;
use crate::operation::Operation;
use crate::profile::envelope::envelope_problem;
use crate::profile::Wire;
use crate::records::Pin;
use crate::upstream::call::{http_call, mcp_call, Reach};
use crate::upstream::diff::{diff, diff_value, Difference};
use crate::upstream::request::Limits;
use crate::util::json::cut_secrets;

/// At most this many differences are listed.
pub const MAX_DIFFS: usize = 100;

pub use crate::upstream::request::SALESFORCE_API_VERSION;

/// The shortest credential cut out of the answer by value (shorter ones would cut ordinary
/// text; name-based scrubbing still applies).
pub const MIN_CUT_SECRET: usize = 8;

/// How one upstream execute runs (module doc). No `Debug`: it holds a secret.
#[derive(Default)]
pub struct UpstreamOptions {
    /// Let a write reach the real system (never under `dry_run`).
    pub allow_write: bool,
    /// Hold back every write: simulate it instead of sending it.
    pub dry_run: bool,
    /// The `Authorization` header for this call; `None` → the environment variable.
    pub authorization: Option<String>,
}

/// Run one real call of `integration`/`operation_id` with `input` (module doc).
pub async fn execute_upstream(
    app: &App,
    integration: &str,
    operation_id: &str,
    input: &Value,
    opts: UpstreamOptions,
) -> Value {
    let started = Instant::now();
    let auth = opts
        .authorization
        .clone()
        .or_else(|| auth_header(integration));
    let mut out = run(
        app,
        integration,
        operation_id,
        input,
        &opts,
        auth.as_deref(),
    )
    .await;
    if out["duration_ms"].is_null() {
        out["duration_ms"] = json!(started.elapsed().as_secs_f64() * 1000.0);
    }
    if let Some(a) = &auth {
        let a = a.trim();
        let mut secrets: Vec<String> = std::iter::once(a)
            .chain(a.split_once(' ').map(|(_, cred)| cred.trim()))
            .filter(|s| s.len() >= MIN_CUT_SECRET)
            .map(str::to_string)
            .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        cut_secrets(&mut out, &secrets);
    }
    out
}

async fn run(
    app: &App,
    integration: &str,
    operation_id: &str,
    input: &Value,
    opts: &UpstreamOptions,
    auth: Option<&str>,
) -> Value {
    let mut out = json!({
        "integration": integration,
        "operation_id": operation_id,
        "target": "upstream",
        "is_write": null,
        "dry_run": opts.dry_run,
        "source": "tool_test",
        "blocked_side_effects": [],
        "request": null,
        "status_code": null,
        "duration_ms": null,
        "retries": 0,
        "raw_response": null,
        "result": null,
        "simulated_from": null,
        "validation_results": {"input_valid": null, "output_valid": null, "validation_errors": []},
        "mock": null,
        "diff": null,
        "error": null,
        "error_kind": null,
    });
    let fail = |out: &mut Value, kind: &str, code: &str, message: String| {
        out["error"] = json!({"code": code, "message": message, "path": null});
        out["error_kind"] = json!(kind);
    };
    let Some(integ) = app.integration(integration) else {
        let names: Vec<&str> = app.integrations.keys().map(String::as_str).collect();
        fail(
            &mut out,
            "harness_error",
            "unknown_integration",
            format!(
                "no integration named `{integration}` (known: {})",
                names.join(", ")
            ),
        );
        return out;
    };
    let Some(op) = integ.operation(operation_id).cloned() else {
        fail(
            &mut out,
            "harness_error",
            "unknown_operation",
            format!(
                "`{integration}` has no operation file `{operation_id}` in {}",
                integ.config.operations.display()
            ),
        );
        return out;
    };
    out["is_write"] = json!(op.is_write);
    if let Err(e) = validate_input(&op, input) {
        out["validation_results"]["input_valid"] = json!(false);
        out["validation_results"]["validation_errors"] = json!(e.details);
        out["error"] = crate::error::CallError::Input(e).to_json();
        out["error_kind"] = json!("input_error");
        return out;
    }
    out["validation_results"]["input_valid"] = json!(true);
    // The mock side first: it needs nothing from the network.
    let mock = mock_side(app, &op, input);
    out["mock"] = mock.clone();
    if op.is_write && (opts.dry_run || !opts.allow_write) {
        out["blocked_side_effects"] = json!([op.key()]);
        if !opts.dry_run {
            fail(
                &mut out,
                "blocked",
                "write_blocked",
                format!("`{operation_id}` is a write: nothing was sent to the real system (`allow_write: true` sends it; `dry_run: true` simulates it)"),
            );
            return out;
        }
        match simulated(integ, &op, &mock) {
            Ok((result, from)) => {
                validate_result(&mut out, &op, &result);
                out["result"] = result;
                out["simulated_from"] = json!(from);
            }
            Err(why) => fail(&mut out, "harness_error", "no_simulated_answer", why),
        }
        return out;
    }
    let Some(base) = integ.config.upstream.clone() else {
        fail(
            &mut out,
            "harness_error",
            "upstream_unavailable",
            format!("integration `{integration}` has no `upstream` in understudy.json (integrations.{integration}.upstream)"),
        );
        return out;
    };
    let started = Instant::now();
    let reach = Reach {
        upstream: &app.forwarding.upstream,
        base: &base,
        limits: Limits {
            read_timeout: app.limits.body_read_timeout,
            max_body: app.limits.max_body,
        },
        authorization: auth,
    };
    let call = if integ.config.profile == ProfileKind::Mcp {
        mcp_call(&reach, &op, input).await
    } else {
        http_call(&reach, &op, input).await
    };
    out["duration_ms"] = json!(started.elapsed().as_secs_f64() * 1000.0);
    let mut call = match call {
        Ok(c) => c,
        Err(f) => {
            out["retries"] = json!(f.retries);
            fail(&mut out, "harness_error", &f.code, f.message);
            return out;
        }
    };
    // The query's secret parameters are not shown.
    if let Some(q) = call.request.get_mut("query").and_then(Value::as_array_mut) {
        for pair in q {
            let secret = pair[0]
                .as_str()
                .is_some_and(|k| record::is_secret_field(k, &app.config.scrub.fields));
            if secret {
                pair[1] = json!(crate::util::scrub::SCRUBBED);
            }
        }
    }
    out["request"] = call.request;
    out["retries"] = json!(call.retries);
    out["status_code"] = json!(call.status);
    let mut raw_body = call.body.clone();
    if let Some(b) = &mut raw_body {
        record::scrub_json(b, &app.config.scrub.fields);
    }
    out["raw_response"] = json!({
        "status": call.status,
        "headers": scrub_headers(&call.headers, &app.config.scrub.headers),
        "body": raw_body,
    });
    let mut result = call.result;
    record::scrub_json(&mut result, &app.config.scrub.fields);
    validate_result(&mut out, &op, &result);
    if let Some(m) = mock.get("result").filter(|r| !r.is_null()) {
        // The one diff, values compared: an HTTP result is a native envelope, an MCP one the
        // tool's output.
        let diffs = match integ.wire {
            Wire::Http(_) => diff(m, &result, true),
            Wire::Mcp => diff_value(m, &result, true),
        };
        let shown: Vec<Value> = diffs
            .iter()
            .take(MAX_DIFFS)
            .map(Difference::to_api_json)
            .collect();
        out["diff"] = json!(shown);
    }
    out["result"] = result;
    out
}

/// `validation_results.output_valid` / `validation_errors` of `result`: the output schema
/// and the profile's envelope rule.
fn validate_result(out: &mut Value, op: &Operation, result: &Value) {
    let mut problems = schema_errors(&op.output_validator, result);
    if let Some(p) = envelope_problem(op.profile, op.op.result_form, result) {
        problems.push(format!("the result {p}"));
    }
    out["validation_results"]["output_valid"] = json!(problems.is_empty());
    out["validation_results"]["validation_errors"] = json!(problems);
}

/// What stands in for a dry-run write's answer (module doc): the mock's result, else the
/// profile's `simulate` answer; `Err` says why neither exists.
fn simulated(
    integ: &Integration,
    op: &Operation,
    mock: &Value,
) -> Result<(Value, &'static str), String> {
    if let Some(r) = mock.get("result").filter(|r| !r.is_null()) {
        return Ok((r.clone(), "mock"));
    }
    let no_mock = match mock.get("error").filter(|e| !e.is_null()) {
        Some(e) => format!(
            "its mock gave no result ({}: {})",
            e["code"].as_str().unwrap_or("error"),
            e["message"].as_str().unwrap_or("")
        ),
        None => format!(
            "it has no mock (no revision of `{}`; save one or add a `mock` to {})",
            op.key(),
            op.file.display()
        ),
    };
    let method = op
        .op
        .match_spec
        .as_ref()
        .map(|m| m.method.to_ascii_uppercase())
        .unwrap_or_default();
    let profile = match &integ.wire {
        Wire::Mcp => {
            let msg = format!(
                "understudy simulated this write (dry_run): tools/call `{}` was not sent to the real system",
                op.id()
            );
            let form = op.op.result_form.unwrap_or(ResultForm::Structured);
            return Ok((crate::profile::mcp::simulated_result(form, &msg), "profile"));
        }
        Wire::Http(p) => p,
    };
    match profile.simulate(Some(op.id()), &method) {
        Some(r) => Ok((r, "profile")),
        None => Err(format!(
            "`{}` is a write and `dry_run` never sends it, but nothing can stand in for its answer: {no_mock}, and the `{}` profile has no `simulate` answer for operation `{}` or method {method}",
            op.key(),
            profile.name(),
            op.id()
        )),
    }
}

/// The credential for the upstream, from the environment (module doc).
fn auth_header(integration: &str) -> Option<String> {
    let var = format!(
        "UNDERSTUDY_UPSTREAM_AUTH_{}",
        integration.to_ascii_uppercase().replace('-', "_")
    );
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// The latest revision's answer to `input` (default variant, initial state).
fn mock_side(app: &App, op: &Operation, input: &Value) -> Value {
    let rev = app.store.latest_revision(&op.key()).ok().flatten();
    let Some(rev) = rev else {
        return Value::Null;
    };
    let pin = Pin {
        revision: rev.revision,
        contract_hash: rev.contract_hash,
    };
    let engine = match app.engines.get(&app.store, op, &pin) {
        Ok(e) => e,
        Err(e) => {
            return json!({"revision": pin.revision, "variant": null, "rule": null, "result": null, "error": e.to_json()})
        }
    };
    let r = execute_with(op, Some(&engine), input, None, None);
    json!({
        "revision": pin.revision,
        "variant": r.variant,
        "rule": r.rule,
        "result": r.result,
        "error": r.error.as_ref().map(|e| e.to_json()),
    })
}

/// The response headers for the report, secret ones scrubbed.
fn scrub_headers(h: &HeaderMap, extra: &[String]) -> Value {
    let mut m = Map::new();
    for (k, v) in h {
        let v = if record::is_secret_header(k.as_str(), extra) {
            crate::util::scrub::SCRUBBED.to_string()
        } else {
            v.to_str().unwrap_or("").to_string()
        };
        m.insert(k.as_str().to_string(), json!(v));
    }
    Value::Object(m)
}
