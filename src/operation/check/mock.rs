//! The checks of one operation file's mock definition (docs/src/reference/mock-definition.md#checks-and-limits): size and structure limits,
//! variants and rules, the examples evaluated and compared with what they expect, the output
//! schema and native envelope of every static result, fixture literals, the stale contract
//! hash.

use super::output::schema_errors;
use crate::contract::ProfileKind;
use crate::contract::ResultForm;
use crate::error::CallError;
use crate::mock::eval::{compile_problems, json_equal, Engine};
use crate::mock::model::{limits, Definition};
use crate::mock::path::pointer_push;
use crate::profile::envelope::{
    envelope_problem, status_problem, CALL_TOOL_RESULT_EXPECTED, ENVELOPE_EXPECTED,
};
use crate::util::json::type_name;
use serde_json::Value;

pub(super) struct MockCtx<'a> {
    pub(super) kind: ProfileKind,
    pub(super) result_form: Option<ResultForm>,
    pub(super) contract_hash: String,
    pub(super) input_v: Option<&'a jsonschema::Validator>,
    pub(super) output_v: Option<&'a jsonschema::Validator>,
}

pub(super) fn check_mock(
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
            // The client's answer (`$response`, docs/src/reference/mcp.md) is not an argument: the live call's
            // input is validated before the client is asked, without it.
            let mut arguments = ex.input.clone();
            if let Value::Object(m) = &mut arguments {
                m.remove(crate::mock::model::RESPONSE_MEMBER);
            }
            let errors = schema_errors(iv, &arguments);
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

/// A variant's or rule's `fault` ([`crate::operation::fault::fault_problems`]) at `at`.
fn push_fault_problems(
    f: &crate::mock::model::Fault,
    at: &str,
    ctx: &MockCtx<'_>,
    push: &mut impl FnMut(&str, String),
) {
    for (sub, msg) in crate::operation::fault::fault_problems(f, !ctx.kind.is_http()) {
        let path = if sub.is_empty() {
            at.to_string()
        } else {
            format!("{at}/{sub}")
        };
        push(&path, msg);
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
