//! `understudy check` (SPEC 3.4).
//!
//! - [`check_operation`]: every check of one operation file — identity, profile rules,
//!   match template, schemas, and the mock definition (limits, variants, examples evaluated and
//!   compared, output schema, native envelope, fixture literals, stale contract hash).
//! - [`check_integration`]: the cross-file checks of one integration (`initial_state` conflicts,
//!   match ties, duplicate operation ids).
//! - [`schema_errors`] and [`envelope_problem`]: the two output rules, shared with the call
//!   core ([`super::call`]).
//!
//! Every [`Problem`] prints as `file: json/path: what is wrong, what was expected`.

use crate::config::ProfileKind;
use crate::contract::{
    compile_schema, json_stem, valid_operation_id, CompiledMatch, OperationFile, ResultForm,
};
use crate::error::CallError;
use crate::mock::eval::{compile_problems, json_equal, Engine};
use crate::mock::model::{limits, Definition};
use crate::mock::path::{pointer_push, DotPath};
use crate::operation::LoadedOperation;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::error::Problem;

/// Every SPEC 3.4 check of one operation file, as loaded for `profile`. `file` names the
/// problems; when it ends in `.json` its stem must equal `operation_id` (inline operations of
/// the admin API pass a path without `.json`, which skips that rule).
pub fn check_operation(op: &OperationFile, profile: &str, file: &Path) -> Vec<Problem> {
    check_operation_hashed(op, profile, file, None, None)
}

/// What [`check_operation_hashed`] compiled while checking (the schemas' validators, the
/// `match` and the mock's engine), for [`super::Operation::compile_with`] to reuse instead of compiling them again.
#[derive(Default)]
pub struct Compiled {
    pub input: Option<jsonschema::Validator>,
    pub output: Option<jsonschema::Validator>,
    pub matcher: Option<CompiledMatch>,
    /// The mock's engine, built by the checks of its examples.
    pub engine: Option<Engine>,
}

/// [`check_operation`] with the operation's current contract hash under `profile` already
/// computed (as [`LoadedOperation::contract_hash`]), so it is not computed again; with
/// `keep`, what the checks compiled is moved there.
pub fn check_operation_hashed(
    op: &OperationFile,
    profile: &str,
    file: &Path,
    contract_hash: Option<&str>,
    keep: Option<&mut Compiled>,
) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut push = |path: &str, msg: String| out.push(Problem::new(file, path, msg));
    let Some(kind) = ProfileKind::parse(profile) else {
        push(
            "",
            format!("unknown profile `{profile}`: expected rest, salesforce or mcp"),
        );
        return out;
    };
    if !valid_operation_id(&op.operation_id) {
        push(
            "operation_id",
            format!(
                "`{}` is not a valid operation id: expected 1-128 characters of a-z, 0-9, `_`, `.` and `-`",
                op.operation_id
            ),
        );
    }
    if let Some(stem) = json_stem(file) {
        if stem != op.operation_id {
            push(
                "operation_id",
                format!(
                    "`{}` differs from the file name `{stem}.json`: expected \"{stem}\" (the file is named after the operation)",
                    op.operation_id
                ),
            );
        }
    }
    let mut matcher = None;
    if kind.is_http() {
        match &op.match_spec {
            None => push(
                "match",
                format!("missing: a `{kind}` operation needs `match` with `method` and `path`"),
            ),
            Some(m) => match CompiledMatch::compile(m) {
                Ok(c) => matcher = Some(c),
                Err(e) => {
                    let (path, msg) = match_error_path(&e);
                    push(&path, msg);
                }
            },
        }
        for (key, present) in [
            ("title", op.title.is_some()),
            ("annotations", op.annotations.is_some()),
            ("result_form", op.result_form.is_some()),
        ] {
            if present {
                push(
                    key,
                    format!("only `mcp` operations have `{key}`; this is a `{kind}` operation"),
                );
            }
        }
    } else if op.match_spec.is_some() {
        push(
            "match",
            "an `mcp` operation has no `match`: tools are called by name (the operation_id)"
                .to_string(),
        );
    }
    if let Some(a) = &op.annotations {
        if !a.is_object() {
            push(
                "annotations",
                "expected an object, as in `tools/list`".to_string(),
            );
        }
    }
    if let Some(i) = &op.idempotency {
        match (&i.header, &i.input) {
            (Some(h), None) => {
                if hyper::http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                    push("idempotency/header", format!("`{h}` is not a valid header name"));
                }
            }
            (None, Some(p)) => {
                if DotPath::parse(p).is_err() {
                    push(
                        "idempotency/input",
                        format!("`{p}` is not a dot path into the input, expected e.g. `request_id` or `meta.key`"),
                    );
                }
            }
            _ => push(
                "idempotency",
                "expected exactly one of `header` (a request header) or `input` (a dot path into the input)".into(),
            ),
        }
    }
    let input_v = compile_schema(&op.input_schema)
        .map_err(|e| push("input_schema", format!("not a usable JSON Schema: {e}")))
        .ok();
    let output_v = compile_schema(&op.output_schema)
        .map_err(|e| push("output_schema", format!("not a usable JSON Schema: {e}")))
        .ok();
    if let Some(m) = &matcher {
        check_captures_allowed(m, &op.input_schema, &mut push);
    }
    let mut engine = None;
    if let Some(mock) = &op.mock {
        let ctx = MockCtx {
            kind,
            result_form: op.result_form,
            contract_hash: contract_hash
                .map(str::to_string)
                .unwrap_or_else(|| op.contract_hash(profile)),
            input_v: input_v.as_ref(),
            output_v: output_v.as_ref(),
        };
        engine = check_mock(mock, &ctx, &mut push);
    }
    if let Some(k) = keep {
        *k = Compiled {
            input: input_v,
            output: output_v,
            matcher,
            engine,
        };
    }
    out
}

/// A variant's or rule's `fault` ([`crate::fault::fault_problems`]) at `at`.
fn push_fault_problems(
    f: &crate::mock::model::Fault,
    at: &str,
    ctx: &MockCtx<'_>,
    push: &mut impl FnMut(&str, String),
) {
    for (sub, msg) in crate::fault::fault_problems(f, !ctx.kind.is_http()) {
        let path = if sub.is_empty() {
            at.to_string()
        } else {
            format!("{at}/{sub}")
        };
        push(&path, msg);
    }
}

/// `match` compile errors start with the part they concern: turn that into a JSON path.
fn match_error_path(e: &str) -> (String, String) {
    for (prefix, path) in [("method: ", "match/method"), ("path: ", "match/path")] {
        if let Some(rest) = e.strip_prefix(prefix) {
            return (path.to_string(), rest.to_string());
        }
    }
    if let Some(rest) = e.strip_prefix("query `") {
        if let Some((key, msg)) = rest.split_once("`: ") {
            return (pointer_push("match/query", key), msg.to_string());
        }
    }
    if let Some(rest) = e.strip_prefix("headers `") {
        if let Some((key, msg)) = rest.split_once("`: ") {
            return (pointer_push("match/headers", key), msg.to_string());
        }
    }
    ("match".to_string(), e.to_string())
}

/// A capture must be able to land in the input: flag a capture the input schema forbids
/// (`additionalProperties: false` without a property of that name).
fn check_captures_allowed(
    m: &CompiledMatch,
    input_schema: &Value,
    push: &mut impl FnMut(&str, String),
) {
    if input_schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return;
    }
    let props = input_schema.get("properties").and_then(Value::as_object);
    for name in m.capture_names() {
        if !props.is_some_and(|p| p.contains_key(name)) {
            push(
                "match",
                format!(
                    "capture `{{{name}}}` goes into the input, but input_schema forbids additional properties and has no property `{name}`: add it to input_schema/properties"
                ),
            );
        }
    }
}

struct MockCtx<'a> {
    kind: ProfileKind,
    result_form: Option<ResultForm>,
    contract_hash: String,
    input_v: Option<&'a jsonschema::Validator>,
    output_v: Option<&'a jsonschema::Validator>,
}

fn check_mock(
    mock: &Value,
    ctx: &MockCtx<'_>,
    push: &mut impl FnMut(&str, String),
) -> Option<Engine> {
    let size = serde_json::to_string(mock).map(|s| s.len()).unwrap_or(0);
    if size > limits::MAX_BYTES {
        push(
            "mock",
            format!(
                "the definition is {size} bytes serialized: at most {} (100 KB)",
                limits::MAX_BYTES
            ),
        );
    }
    if !mock.is_object() {
        push(
            "mock",
            "expected an object (the version-1 mock definition)".into(),
        );
        return None;
    }
    if let Some(v) = mock.get("schema_version") {
        if v.as_u64() != Some(1) {
            push(
                "mock/schema_version",
                format!("{v}: expected 1 (the only version)"),
            );
            return None;
        }
    }
    if let Some((path, what)) = array_for_object(mock) {
        push(&path, format!("expected an object ({what}), got an array"));
        return None;
    }
    let def: Definition = match serde_path_to_error::deserialize(mock) {
        Ok(d) => d,
        Err(e) => {
            let path = crate::config::slash_path(e.path());
            let path = if path.is_empty() {
                "mock".to_string()
            } else {
                format!("mock/{path}")
            };
            push(&path, e.inner().to_string());
            return None;
        }
    };
    if let Some(h) = &def.contract_hash {
        if *h != ctx.contract_hash {
            push(
                "mock/contract_hash",
                format!(
                    "stale: the mock was checked against {h} but the current contract hash is {}; the description or a schema changed — review the examples, then set contract_hash to the current hash",
                    ctx.contract_hash
                ),
            );
        }
    }
    let names: Vec<&str> = def.variants.keys().map(String::as_str).collect();
    let known = || {
        if names.is_empty() {
            "(none)".to_string()
        } else {
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    if def.variants.is_empty() {
        push("mock/variants", "no variant: expected at least one".into());
    }
    if def.variants.len() > limits::MAX_VARIANTS {
        push(
            "mock/variants",
            format!(
                "{} variants: at most {}",
                def.variants.len(),
                limits::MAX_VARIANTS
            ),
        );
    }
    if def.examples.len() > limits::MAX_EXAMPLES {
        push(
            "mock/examples",
            format!(
                "{} examples: at most {}",
                def.examples.len(),
                limits::MAX_EXAMPLES
            ),
        );
    }
    if !def.variants.contains_key(&def.default_variant) {
        push(
            "mock/default_variant",
            format!(
                "`{}` names no variant: expected one of {}",
                def.default_variant,
                known()
            ),
        );
    }
    for (name, v) in &def.variants {
        let at = pointer_push("mock/variants", name);
        if v.rules.len() > limits::MAX_RULES {
            push(
                &format!("{at}/rules"),
                format!(
                    "{} rules: at most {} per variant",
                    v.rules.len(),
                    limits::MAX_RULES
                ),
            );
        }
        if let Some(d) = v.delay_ms {
            if d > limits::MAX_DELAY_MS {
                push(
                    &format!("{at}/delay_ms"),
                    format!("{d}: at most {}", limits::MAX_DELAY_MS),
                );
            }
        }
        if let Some(p) = static_result_problem(&v.result, ctx) {
            push(&format!("{at}/result"), p);
        }
        if let Some(f) = &v.fault {
            push_fault_problems(f, &format!("{at}/fault"), ctx, push);
        }
        for (i, r) in v.rules.iter().enumerate() {
            if let Some(d) = r.delay_ms {
                if d > limits::MAX_DELAY_MS {
                    push(
                        &format!("{at}/rules/{i}/delay_ms"),
                        format!("{d}: at most {}", limits::MAX_DELAY_MS),
                    );
                }
            }
            if let Some(p) = r
                .result
                .as_ref()
                .and_then(|res| static_result_problem(res, ctx))
            {
                push(&format!("{at}/rules/{i}/result"), p);
            }
            if let Some(f) = &r.fault {
                push_fault_problems(f, &format!("{at}/rules/{i}/fault"), ctx, push);
            }
        }
        if !def.examples.iter().any(|e| e.variant == *name) {
            push(
                &at,
                format!("no example: every variant needs at least one example in mock/examples with \"variant\": \"{name}\""),
            );
        }
    }
    let fixture = compile_problems(&def);
    for e in &fixture {
        let path = e
            .path
            .as_deref()
            .map(|p| format!("mock/{p}"))
            .unwrap_or_else(|| "mock".into());
        push(&path, e.message.clone());
    }
    let engine = if fixture.is_empty() {
        Engine::new(def.clone()).ok()
    } else {
        None
    };
    for (i, ex) in def.examples.iter().enumerate() {
        let at = format!("mock/examples/{i}");
        if !def.variants.contains_key(&ex.variant) {
            push(
                &format!("{at}/variant"),
                format!(
                    "`{}` names no variant: expected one of {}",
                    ex.variant,
                    known()
                ),
            );
            continue;
        }
        if let Some(iv) = ctx.input_v {
            let errors = schema_errors(iv, &ex.input);
            if !errors.is_empty() {
                for e in errors {
                    push(
                        &format!("{at}/input"),
                        format!("does not match input_schema: {e}"),
                    );
                }
                continue;
            }
        }
        let Some(engine) = &engine else { continue };
        let state = ex.state.clone().unwrap_or_else(|| engine.initial_state());
        let outcome = match engine.evaluate(Some(&ex.variant), &ex.input, &state) {
            Ok(o) => o,
            Err(e) => {
                let where_ = e
                    .path()
                    .map(|p| format!(" (at mock/{p})"))
                    .unwrap_or_default();
                let code = match &e {
                    CallError::Input(_) => "input_error".to_string(),
                    CallError::Harness(h) => h.code.to_string(),
                };
                push(
                    &at,
                    format!(
                        "evaluating variant `{}` with this input failed with {} `{code}`: {}{where_}; expected a result equal to `expected`",
                        ex.variant,
                        e.kind().replace('_', " "),
                        e.message()
                    ),
                );
                continue;
            }
        };
        if let Some((path, msg)) = first_difference(&ex.expected, &outcome.result, "") {
            let p = if path.is_empty() {
                format!("{at}/expected")
            } else {
                format!("{at}/expected/{path}")
            };
            push(&p, msg);
        }
        if let Some(ov) = ctx.output_v {
            for e in schema_errors(ov, &outcome.result) {
                push(
                    &at,
                    format!("the rendered result does not match output_schema: {e}"),
                );
            }
        }
        if let Some(msg) = envelope_problem(ctx.kind, ctx.result_form, &outcome.result) {
            push(&at, format!("the rendered result {msg}"));
        }
    }
    engine
}

/// serde reads a struct from a JSON array (its fields in order); the file format wants objects.
/// The first place in a definition where an array stands for a variant, rule, condition or
/// example.
fn array_for_object(mock: &Value) -> Option<(String, &'static str)> {
    let variants = mock.get("variants").and_then(Value::as_object);
    for (name, v) in variants.into_iter().flatten() {
        let at = pointer_push("mock/variants", name);
        if v.is_array() {
            return Some((at, "a variant"));
        }
        for (i, r) in v
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if r.is_array() {
                return Some((format!("{at}/rules/{i}"), "a rule"));
            }
            for (j, c) in r
                .get("when")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                if c.is_array() {
                    return Some((format!("{at}/rules/{i}/when/{j}"), "a condition"));
                }
            }
        }
    }
    for (i, e) in mock
        .get("examples")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if e.is_array() {
            return Some((format!("mock/examples/{i}"), "an example"));
        }
    }
    None
}

/// `{"$input"|"$state"|"$number"|"$dateAdd": …}` — a value decided at render time.
fn is_expression(v: &Value) -> bool {
    match v.as_object() {
        Some(m) if m.len() == 1 => m
            .keys()
            .next()
            .is_some_and(|k| matches!(k.as_str(), "$input" | "$state" | "$number" | "$dateAdd")),
        _ => false,
    }
}

/// The envelope rule applied to a result as written (before rendering), so a rule no example
/// reaches is caught too. Parts that are expressions are left to the examples.
fn static_result_problem(result: &Value, ctx: &MockCtx<'_>) -> Option<String> {
    if is_expression(result) {
        return None;
    }
    match (ctx.kind.is_http(), ctx.result_form.unwrap_or(ResultForm::Structured)) {
        (true, _) => {
            let Some(m) = result.as_object() else {
                return Some(format!("is {}, {ENVELOPE_EXPECTED}", type_name(result)));
            };
            if let Some(k) = m.keys().find(|k| !matches!(k.as_str(), "status" | "data" | "headers")) {
                return Some(format!("has the member `{k}`, {ENVELOPE_EXPECTED}"));
            }
            match m.get("status") {
                None => return Some(format!("has no `status`, {ENVELOPE_EXPECTED}")),
                Some(s) if !is_expression(s) => {
                    if let Some(p) = status_problem(s) {
                        return Some(p);
                    }
                }
                _ => {}
            }
            match m.get("headers") {
                Some(h) if !is_expression(h) => match h.as_object() {
                    None => Some(format!("has `headers` {}, expected an object of strings", type_name(h))),
                    Some(hm) => hm
                        .iter()
                        .find(|(_, v)| !v.is_string() && !is_expression(v))
                        .map(|(k, v)| format!("has header `{k}` {}, expected a string", type_name(v))),
                },
                _ => None,
            }
        }
        (false, ResultForm::Structured) => (!result.is_object()).then(|| {
            format!(
                "is {}, expected an object (MCP structured content is a JSON object; use \"result_form\": \"call_tool_result\" for other results)",
                type_name(result)
            )
        }),
        (false, ResultForm::CallToolResult) => match result.as_object() {
            None => Some(format!("is {}, {CALL_TOOL_RESULT_EXPECTED}", type_name(result))),
            Some(m) if !m.contains_key("content") => Some(format!("has no `content`, {CALL_TOOL_RESULT_EXPECTED}")),
            _ => None,
        },
    }
}

const ENVELOPE_EXPECTED: &str =
    "expected the native envelope {\"status\": 100-599, \"data\"?: any, \"headers\"?: {name: string}} and no other member";
const CALL_TOOL_RESULT_EXPECTED: &str =
    "expected a CallToolResult {\"content\": [blocks], \"structuredContent\"?: {…}, \"isError\"?: bool}";

fn status_problem(s: &Value) -> Option<String> {
    match s.as_u64() {
        Some(n) if (100..=599).contains(&n) => None,
        _ => Some(format!(
            "has `status` {s}, expected an integer from 100 to 599"
        )),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The profile's envelope rule for a rendered result (SPEC 5.1), or why it fails
/// (a phrase such as "has no `status`, expected the native envelope …").
/// HTTP profiles: `{"status": 100..=599, "data"?: any, "headers"?: {string: string}}` and no
/// other member. MCP structured: an object. MCP `call_tool_result`: an object with a
/// `content` array of blocks with a string `type`, optional `structuredContent` object,
/// optional boolean `isError`, optional `_meta`.
pub fn envelope_problem(
    profile: ProfileKind,
    result_form: Option<ResultForm>,
    result: &Value,
) -> Option<String> {
    match (profile.is_http(), result_form.unwrap_or(ResultForm::Structured)) {
        (true, _) => {
            let Some(m) = result.as_object() else {
                return Some(format!("is {}, {ENVELOPE_EXPECTED}", type_name(result)));
            };
            if let Some(k) = m.keys().find(|k| !matches!(k.as_str(), "status" | "data" | "headers")) {
                return Some(format!("has the member `{k}`, {ENVELOPE_EXPECTED} (a bare response body is not an envelope)"));
            }
            match m.get("status") {
                None => return Some(format!("has no `status`, {ENVELOPE_EXPECTED}")),
                Some(s) => {
                    if let Some(p) = status_problem(s) {
                        return Some(p);
                    }
                }
            }
            match m.get("headers") {
                None => None,
                Some(Value::Object(h)) => h
                    .iter()
                    .find(|(_, v)| !v.is_string())
                    .map(|(k, v)| format!("has header `{k}` {}, expected a string", type_name(v))),
                Some(h) => Some(format!("has `headers` {}, expected an object of strings", type_name(h))),
            }
        }
        (false, ResultForm::Structured) => (!result.is_object()).then(|| {
            format!(
                "is {}, expected an object (MCP structured content is a JSON object; use \"result_form\": \"call_tool_result\" for other results)",
                type_name(result)
            )
        }),
        (false, ResultForm::CallToolResult) => {
            let Some(m) = result.as_object() else {
                return Some(format!("is {}, {CALL_TOOL_RESULT_EXPECTED}", type_name(result)));
            };
            if let Some(k) = m
                .keys()
                .find(|k| !matches!(k.as_str(), "content" | "structuredContent" | "isError" | "_meta"))
            {
                return Some(format!("has the member `{k}`, {CALL_TOOL_RESULT_EXPECTED}"));
            }
            let Some(content) = m.get("content").and_then(Value::as_array) else {
                return Some(format!("has no `content` array, {CALL_TOOL_RESULT_EXPECTED}"));
            };
            if let Some(i) = content
                .iter()
                .position(|b| !b.get("type").is_some_and(Value::is_string))
            {
                return Some(format!(
                    "has content block {i} without a string `type` (text, image, audio, resource, resource_link)"
                ));
            }
            if m.get("isError").is_some_and(|e| !e.is_boolean()) {
                return Some("has a non-boolean `isError`".to_string());
            }
            if m.get("structuredContent").is_some_and(|s| !s.is_object()) {
                return Some("has a `structuredContent` that is not an object".to_string());
            }
            None
        }
    }
}

/// Every error of `instance` against a compiled schema, as `at /instance/path: message`
/// (`at (root)` for the whole value).
pub fn schema_errors(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| {
            let p = e.instance_path().to_string();
            let at = if p.is_empty() {
                "(root)".to_string()
            } else {
                p
            };
            format!("at {at}: {e}")
        })
        .collect()
}

/// The first place where the rendered `actual` differs from `expected` (numbers by value):
/// `(relative slash path, message)`.
fn first_difference(expected: &Value, actual: &Value, at: &str) -> Option<(String, String)> {
    let short = |v: &Value| {
        let s = v.to_string();
        if s.chars().count() > 120 {
            format!("{}…", s.chars().take(120).collect::<String>())
        } else {
            s
        }
    };
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            let keys: std::collections::BTreeSet<&String> = e.keys().chain(a.keys()).collect();
            for k in keys {
                let p = pointer_push(at, k);
                match (e.get(k), a.get(k)) {
                    (Some(ev), Some(av)) => {
                        if let Some(d) = first_difference(ev, av, &p) {
                            return Some(d);
                        }
                    }
                    (Some(ev), None) => {
                        return Some((
                            p,
                            format!(
                                "expected {} but the rendered result has no such member",
                                short(ev)
                            ),
                        ))
                    }
                    (None, Some(av)) => {
                        return Some((
                            p,
                            format!(
                                "the rendered result has {} here but expected has no such member",
                                short(av)
                            ),
                        ))
                    }
                    (None, None) => {}
                }
            }
            None
        }
        (Value::Array(e), Value::Array(a)) => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                if let Some(d) = first_difference(ev, av, &pointer_push(at, &i.to_string())) {
                    return Some(d);
                }
            }
            (e.len() != a.len()).then(|| {
                (
                    at.to_string(),
                    format!(
                        "expected {} elements but the rendered result has {}",
                        e.len(),
                        a.len()
                    ),
                )
            })
        }
        _ => (!json_equal(expected, actual)).then(|| {
            (
                at.to_string(),
                format!(
                    "the rendered result is {} but expected says {}",
                    short(actual),
                    short(expected)
                ),
            )
        }),
    }
}

/// The cross-file checks of one integration's operations (SPEC 2.2, 3.3): the same
/// `initial_state` key with two different values, two operations that tie (equal specificity
/// and a request both can match), the same operation id twice.
pub fn check_integration(ops: &[LoadedOperation], profile: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut seen_ids: BTreeMap<&str, &Path> = BTreeMap::new();
    for l in ops {
        if let Some(first) = seen_ids.insert(&l.op.operation_id, &l.file) {
            seen_ids.insert(&l.op.operation_id, first);
            out.push(Problem::new(
                &l.file,
                "operation_id",
                format!(
                    "`{}` is also the operation id of {}: expected one file per operation",
                    l.op.operation_id,
                    first.display()
                ),
            ));
        }
    }
    let mut state: BTreeMap<&str, (&Value, &Path)> = BTreeMap::new();
    for l in ops {
        let Some(init) =
            l.op.mock
                .as_ref()
                .and_then(|m| m.get("initial_state"))
                .and_then(Value::as_object)
        else {
            continue;
        };
        for (k, v) in init {
            match state.get(k.as_str()) {
                None => {
                    state.insert(k, (v, &l.file));
                }
                Some((first, file)) if !json_equal(first, v) => out.push(Problem::new(
                    &l.file,
                    pointer_push("mock/initial_state", k),
                    format!(
                        "`{k}` is {v} here but {first} in {}: the initial states of one integration are merged, so a key must have one value",
                        file.display()
                    ),
                )),
                Some(_) => {}
            }
        }
    }
    if ProfileKind::parse(profile).is_some_and(ProfileKind::is_http) {
        let compiled: Vec<(&LoadedOperation, CompiledMatch)> = ops
            .iter()
            .filter_map(|l| Some((l, CompiledMatch::compile(l.op.match_spec.as_ref()?).ok()?)))
            .collect();
        let matchers: Vec<&CompiledMatch> = compiled.iter().map(|(_, m)| m).collect();
        for (i, j) in crate::contract::template::find_ties(&matchers) {
            let (a, (b, mb)) = (compiled[i].0, &compiled[j]);
            let (lit, cons) = mb.specificity();
            out.push(Problem::new(
                &b.file,
                "match",
                format!(
                    "ties with `{}` ({}): a request can match both with equal specificity ({lit} literal path segments, {cons} query/header constraints); expected one of them to be more specific (a literal segment, a query or header constraint)",
                    a.op.operation_id,
                    a.file.display()
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn op(v: Value) -> OperationFile {
        serde_json::from_value(v).unwrap()
    }

    fn base(profile: &str, mock: Value) -> OperationFile {
        let mut o = op(json!({
            "operation_id": "get_thing",
            "match": {"method": "GET", "path": "/things/{id}"},
            "input_schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
            "output_schema": {"type": "object", "required": ["status"], "properties": {"status": {"type": "integer"}}},
            "mock": mock
        }));
        if profile == "mcp" {
            o.match_spec = None;
        }
        let h = o.contract_hash(profile);
        if let Some(Value::Object(m)) = &mut o.mock {
            m.entry("contract_hash").or_insert(Value::String(h));
        }
        o
    }

    fn good_mock() -> Value {
        json!({
            "schema_version": 1, "default_variant": "found",
            "variants": {"found": {"result": {"status": 200, "data": {"id": {"$input": "id"}}}}},
            "examples": [{"variant": "found", "input": {"id": "7"}, "expected": {"status": 200, "data": {"id": "7"}}}]
        })
    }

    fn check(o: &OperationFile, profile: &str) -> Vec<String> {
        check_operation(o, profile, Path::new("ops/get_thing.json"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn clean_operation_has_no_problem() {
        assert_eq!(
            check(&base("rest", good_mock()), "rest"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn identity_and_profile_rules() {
        let mut o = base("rest", good_mock());
        o.operation_id = "Get-Thing".into();
        let p = check(&o, "rest");
        assert!(
            p.iter()
                .any(|p| p
                    .starts_with("ops/get_thing.json: operation_id: `Get-Thing` is not a valid")),
            "{p:?}"
        );
        assert!(
            p.iter().any(|p| p.contains("differs from the file name")),
            "{p:?}"
        );
        let mut o = base("rest", good_mock());
        o.match_spec = None;
        o.title = Some("t".into());
        let p = check(&o, "rest");
        assert!(p.iter().any(|p| p.contains(": match: missing")), "{p:?}");
        assert!(p.iter().any(|p| p.contains(": title: only `mcp`")), "{p:?}");
        let o = base("rest", good_mock());
        let p = check(&o, "mcp");
        assert!(
            p.iter()
                .any(|p| p.contains(": match: an `mcp` operation has no `match`")),
            "{p:?}"
        );
        let mut o = base("rest", good_mock());
        o.match_spec.as_mut().unwrap().path = "/things/x{id}".into();
        let p = check(&o, "rest");
        assert!(
            p.iter().any(|p| p.contains(": match/path: segment 2")),
            "{p:?}"
        );
        assert!(check(&base("rest", good_mock()), "soap")[0].contains("unknown profile"));
    }

    #[test]
    fn faults_are_checked_with_their_paths() {
        let with = |fault: Value, rule_fault: Option<Value>| {
            let mut m = good_mock();
            m["variants"]["found"]["fault"] = fault;
            if let Some(rf) = rule_fault {
                m["variants"]["found"]["rules"] = json!([{"when": [], "fault": rf}]);
            }
            m
        };
        // Good faults pass, on HTTP and MCP.
        for f in [
            json!({"kind": "timeout", "after_effect": true}),
            json!({"kind": "timeout", "after_effect": true, "ms": 30000}),
            json!({"kind": "reset", "after_effect": false}),
            json!({"kind": "slow_body", "after_effect": true, "ms": 2000, "chunks": 4}),
            json!({"kind": "status", "after_effect": false, "status": 503, "headers": {"Retry-After": "2"}}),
            json!({"kind": "malformed_body", "after_effect": true}),
        ] {
            assert_eq!(
                check(&base("rest", with(f.clone(), None)), "rest"),
                Vec::<String>::new(),
                "{f}"
            );
        }
        let mcp = with(
            json!({"kind": "jsonrpc_error", "after_effect": false, "code": -32000, "message": "busy"}),
            Some(json!({"kind": "stream_cut", "after_effect": true})),
        );
        assert_eq!(
            check(&base("mcp", mcp.clone()), "mcp"),
            Vec::<String>::new()
        );
        // MCP-only kinds on an HTTP profile, with the file and both paths.
        let p = check(&base("rest", mcp), "rest");
        assert!(p.iter().any(|p| p.starts_with(
            "ops/get_thing.json: mock/variants/found/fault/kind: `jsonrpc_error` is an MCP fault and this is an HTTP operation: expected one of reset, close, timeout, slow_body, malformed_body, status")), "{p:?}");
        assert!(
            p.iter().any(|p| p
                .contains("mock/variants/found/rules/0/fault/kind: `stream_cut` is an MCP fault")),
            "{p:?}"
        );
        // Limits, missing and foreign fields.
        for (f, want) in [
            (json!({"kind": "timeout", "after_effect": true, "ms": 30001}), "mock/variants/found/fault/ms: 30001: expected 1..=30000 milliseconds"),
            (json!({"kind": "timeout", "after_effect": true, "ms": 0}), "mock/variants/found/fault/ms: 0: expected 1..=30000"),
            (json!({"kind": "slow_body", "after_effect": true}), "mock/variants/found/fault: a `slow_body` fault needs `ms`"),
            (json!({"kind": "slow_body", "after_effect": true, "ms": 10, "chunks": 1}), "mock/variants/found/fault/chunks: 1: expected 2..=1000 chunks"),
            (json!({"kind": "timeout", "after_effect": true, "chunks": 3}), "mock/variants/found/fault/chunks: a `timeout` fault takes no `chunks`: expected `ms` besides"),
            (json!({"kind": "reset", "after_effect": true, "ms": 3}), "mock/variants/found/fault/ms: a `reset` fault takes no `ms`: expected no other field"),
            (json!({"kind": "status", "after_effect": true}), "mock/variants/found/fault: a `status` fault needs `status`"),
            (json!({"kind": "status", "after_effect": true, "status": 200}), "mock/variants/found/fault/status: 200: expected an HTTP error status 400..=599"),
            (json!({"kind": "status", "after_effect": true, "status": 503, "headers": {"Content-Length": "1"}}), "mock/variants/found/fault/headers/Content-Length: `Content-Length` frames the response"),
            (json!({"kind": "status", "after_effect": true, "status": 503, "headers": {"bad header": "1"}}), "mock/variants/found/fault/headers/bad header: `bad header` is not a valid header name"),
            (json!({"kind": "teleport", "after_effect": true}), "mock/variants/found/fault/kind: unknown variant `teleport`, expected one of `reset`"),
            (json!({"kind": "reset"}), "mock/variants/found/fault: missing field `after_effect`"),
        ] {
            let p = check(&base("rest", with(f, None)), "rest");
            assert!(p.iter().any(|p| p.contains(want)), "{want}: {p:?}");
        }
        let bad_rule = with(
            json!({"kind": "reset", "after_effect": true}),
            Some(json!({"kind": "timeout", "after_effect": false, "ms": 99999})),
        );
        let p = check(&base("rest", bad_rule), "rest");
        assert_eq!(p, vec!["ops/get_thing.json: mock/variants/found/rules/0/fault/ms: 99999: expected 1..=30000 milliseconds (the delay limit)".to_string()]);
        let p = check(
            &base(
                "mcp",
                with(
                    json!({"kind": "jsonrpc_error", "after_effect": true, "code": 1_i64 << 40}),
                    None,
                ),
            ),
            "mcp",
        );
        assert!(
            p.iter()
                .any(|p| p.contains("fault/code: 1099511627776: expected a 32-bit integer")),
            "{p:?}"
        );
    }

    #[test]
    fn mock_limits_and_structure() {
        let mut m = good_mock();
        m["variants"]["found"]["delay_ms"] = json!(30001);
        m["variants"]["other"] = json!({"result": {"status": 404}});
        m["default_variant"] = json!("missing");
        m["examples"]
            .as_array_mut()
            .unwrap()
            .push(json!({"variant": "nope", "input": {}, "expected": {}}));
        let p = check(&base("rest", m), "rest");
        for want in [
            "mock/variants/found/delay_ms: 30001: at most 30000",
            "mock/variants/other: no example",
            "mock/default_variant: `missing` names no variant",
            "mock/examples/1/variant: `nope` names no variant",
        ] {
            assert!(p.iter().any(|p| p.contains(want)), "{want}: {p:?}");
        }
        let mut m = good_mock();
        m["variants"]["found"]["resutl"] = json!(1);
        let p = check(&base("rest", m), "rest");
        assert!(
            p[0].contains("mock/variants/found/resutl: unknown field `resutl`"),
            "{p:?}"
        );
        let mut m = good_mock();
        m["examples"][0] = json!(["found", {"id": "7"}, {"status": 200}]);
        let p = check(&base("rest", m), "rest");
        assert!(
            p[0].contains("mock/examples/0: expected an object (an example), got an array"),
            "{p:?}"
        );
        let mut m = good_mock();
        m["schema_version"] = json!(2);
        let p = check(&base("rest", m), "rest");
        assert!(p[0].contains("mock/schema_version: 2: expected 1"), "{p:?}");
        let mut m = good_mock();
        for i in 0..31 {
            m["variants"][format!("v{i}")] = json!({"result": {"status": 200}});
        }
        let p = check(&base("rest", m), "rest");
        assert!(
            p.iter()
                .any(|p| p.contains("mock/variants: 32 variants: at most 30")),
            "{p:?}"
        );
    }

    #[test]
    fn examples_are_evaluated_compared_and_validated() {
        let mut m = good_mock();
        m["examples"][0]["expected"]["data"]["id"] = json!("8");
        let p = check(&base("rest", m), "rest");
        assert!(
            p.iter().any(|p| p.contains("mock/examples/0/expected/data/id: the rendered result is \"7\" but expected says \"8\"")),
            "{p:?}"
        );
        let mut m = good_mock();
        m["examples"][0]["input"] = json!({"id": 7});
        let p = check(&base("rest", m), "rest");
        assert!(
            p.iter()
                .any(|p| p.contains("mock/examples/0/input: does not match input_schema: at /id")),
            "{p:?}"
        );
        let mut o = base("rest", good_mock());
        o.output_schema = json!({"type": "object", "properties": {"data": {"properties": {"id": {"type": "integer"}}}}});
        let h = o.contract_hash("rest");
        o.mock.as_mut().unwrap()["contract_hash"] = json!(h);
        let p = check(&o, "rest");
        assert!(
            p.iter().any(|p| p.contains(
                "mock/examples/0: the rendered result does not match output_schema: at /data/id"
            )),
            "{p:?}"
        );
    }

    #[test]
    fn envelope_rules() {
        let mut m = good_mock();
        m["variants"]["found"]["result"] = json!({"totalSize": 0, "done": true, "records": []});
        m["examples"][0]["expected"] = json!({"totalSize": 0, "done": true, "records": []});
        let mut o = base("rest", m);
        o.output_schema = json!({});
        let h = o.contract_hash("rest");
        o.mock.as_mut().unwrap()["contract_hash"] = json!(h);
        let p = check(&o, "rest");
        assert!(
            p.iter()
                .any(|p| p.contains("mock/examples/0: the rendered result has the member `done`")),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|p| p.contains("mock/variants/found/result: has the member `done`")),
            "{p:?}"
        );
        let k = ProfileKind::Rest;
        assert!(envelope_problem(k, None, &json!({"status": 200})).is_none());
        assert!(envelope_problem(k, None, &json!({"status": 600})).is_some());
        assert!(envelope_problem(k, None, &json!({"status": 200.5})).is_some());
        assert!(envelope_problem(k, None, &json!({"status": 200, "headers": {"a": 1}})).is_some());
        let mcp = ProfileKind::Mcp;
        assert!(envelope_problem(mcp, None, &json!({"a": 1})).is_none());
        assert!(envelope_problem(mcp, None, &json!([1])).is_some());
        let ctr = Some(ResultForm::CallToolResult);
        assert!(envelope_problem(
            mcp,
            ctr,
            &json!({"content": [{"type": "text", "text": "x"}], "isError": true})
        )
        .is_none());
        assert!(envelope_problem(mcp, ctr, &json!({"text": "x"})).is_some());
        assert!(envelope_problem(mcp, ctr, &json!({"content": [{"text": "x"}]})).is_some());
    }

    #[test]
    fn stale_hash_names_both() {
        let mut o = base("rest", good_mock());
        o.description = Some("changed".into());
        let p = check(&o, "rest");
        let stale: Vec<_> = p
            .iter()
            .filter(|p| p.contains("mock/contract_hash: stale"))
            .collect();
        assert_eq!(stale.len(), 1, "{p:?}");
        assert_eq!(stale[0].matches("sha256:").count(), 2);
    }

    #[test]
    fn bad_literal_is_reported() {
        let mut m = good_mock();
        m["variants"]["found"]["result"]["data"]["n"] = json!({"$number": "abc"});
        let p = check(&base("rest", m), "rest");
        assert!(
            p.iter()
                .any(|p| p.contains("mock/variants/found/result/data/n")),
            "{p:?}"
        );
    }

    #[test]
    fn cross_file_conflicts_and_ties() {
        let load = |name: &str, path: &str, init: Value| LoadedOperation {
            file: format!("ops/{name}.json").into(),
            op: op(
                json!({"operation_id": name, "match": {"method": "GET", "path": path},
                "mock": {"schema_version": 1, "default_variant": "a", "initial_state": init, "variants": {}}}),
            ),
            contract_hash: String::new(),
        };
        let ops = [
            load("a", "/x/{id}", json!({"k": 1, "same": true})),
            load("b", "/x/*", json!({"k": 2, "same": true})),
            load("c", "/x/literal", json!({"k": 1.0})),
        ];
        let p: Vec<String> = check_integration(&ops, "rest")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].starts_with("ops/b.json: mock/initial_state/k: `k` is 2 here but 1 in ops/a.json"),
            "{p:?}"
        );
        assert!(
            p[1].starts_with("ops/b.json: match: ties with `a` (ops/a.json)"),
            "{p:?}"
        );
        assert!(check_integration(&ops, "mcp").len() == 1);
    }
}
