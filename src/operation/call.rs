//! THE call core: validate the input, decide, validate the output — one function per stage,
//! each with its one wording, shared by every caller of an operation:
//!
//! - the live proxy call (`proxy::pipeline`, which adds idempotency, the pinned revision, the
//!   static-result memo and the native render on its wire, and commits);
//! - `understudy exec` and `POST /tools/execute`, through [`execute`] / [`execute_with`]
//!   ([`ExecResult::to_json`] is the object of docs/src/reference/admin-api.md).
//!
//! Pure: no I/O, no lock, no sleep. Each function returns a decision value (`Ok`, or the
//! error the call ends with); the caller commits the state patch and waits `delay_ms`.
//!
//! Stage 5 reports a violation at the place in the definition that produced the result
//! ([`result_path`], the one builder): `variants/<v>/rules/<i>/result` only when the matched
//! rule has its own `result`, else `variants/<v>/result`, each segment escaped as in JSON
//! Pointer.

use crate::error::{CallError, HarnessCode, HarnessError, InputError};
use crate::mock::eval::Engine;
use crate::mock::model::Definition;
use crate::mock::path::pointer_push;
use crate::operation::check::schema_errors;
use crate::operation::Operation;
use crate::profile::envelope::envelope_problem;
use serde_json::{json, Map, Value};
use std::time::Instant;

/// Stage 3 — the input against the operation's input schema (compiled once per contract;
/// drafts by `$schema`, `format` asserted). Every error is in `details`; the first one's
/// instance path (as a dot path) becomes the error's path.
pub fn validate_input(op: &Operation, input: &Value) -> Result<(), InputError> {
    let errors = schema_errors(&op.input_validator, input);
    if errors.is_empty() {
        return Ok(());
    }
    let first_path = op
        .input_validator
        .iter_errors(input)
        .next()
        .map(|e| e.instance_path().to_string())
        .filter(|p| !p.is_empty());
    let mut e = InputError::new(format!(
        "input does not match the input schema of `{}`: {}",
        op.id(),
        errors[0]
    ));
    e.details = errors;
    if let Some(p) = first_path {
        e = e.at(p.trim_start_matches('/').replace('/', "."));
    }
    Err(e)
}

/// A result that fails stage 5: the harness error the call ends with, and each problem.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputViolation {
    /// `output_schema_violation` at [`result_path`].
    pub error: HarnessError,
    /// Output schema errors and the envelope problem, each with its path.
    pub problems: Vec<String>,
}

/// Stage 5 — the rendered `result` (of `variant`, selected by `rule`, in `def`) against the
/// output schema and the profile's envelope rule; a violation is the harness error
/// `output_schema_violation`, never a success.
pub fn validate_output(
    op: &Operation,
    def: &Definition,
    result: &Value,
    variant: &str,
    rule: Option<usize>,
) -> Result<(), OutputViolation> {
    let mut problems = schema_errors(&op.output_validator, result);
    if let Some(p) = envelope_problem(op.profile, op.op.result_form, result) {
        problems.push(format!("the result {p}"));
    }
    if problems.is_empty() {
        return Ok(());
    }
    let error = HarnessError::new(
        HarnessCode::OutputSchemaViolation,
        format!(
            "the result rendered for `{}` does not match its output schema: {}",
            op.id(),
            problems.join("; ")
        ),
    )
    .at(result_path(def, variant, rule));
    Err(OutputViolation { error, problems })
}

/// Where in the definition the result of `variant` selected by `rule` was written: the
/// rule's own `result` when it has one, else the variant's.
pub fn result_path(def: &Definition, variant: &str, rule: Option<usize>) -> String {
    let at = pointer_push("variants", variant);
    let own = rule.filter(|&i| {
        def.variants
            .get(variant)
            .and_then(|v| v.rules.get(i))
            .is_some_and(|r| r.result.is_some())
    });
    match own {
        Some(i) => format!("{at}/rules/{i}/result"),
        None => format!("{at}/result"),
    }
}

/// The outcome of one isolated call ([`execute`]): the object of docs/src/reference/admin-api.md with
/// [`ExecResult::to_json`], plus what the caller needs to commit (`state_patch`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecResult {
    /// The rendered result; `None` when the call ended in an error.
    pub result: Option<Value>,
    /// The variant used (or that would have been used).
    pub variant: Option<String>,
    pub rule: Option<usize>,
    /// The state the call read.
    pub state_before: Map<String, Value>,
    /// What the call writes (empty on error). The server commits it; `exec` only reports it.
    pub state_patch: Map<String, Value>,
    /// `state_before` with `state_patch` applied key by key.
    pub state_after: Map<String, Value>,
    pub delay_ms: u64,
    /// Time spent validating and evaluating (never includes `delay_ms`).
    pub duration_ms: f64,
    pub input_valid: bool,
    /// `None` when no result was rendered (input error, evaluation error).
    pub output_valid: Option<bool>,
    /// Input schema errors, output schema errors and envelope problems, each with its path.
    pub validation_errors: Vec<String>,
    pub error: Option<CallError>,
}

impl ExecResult {
    /// `{"result","variant","rule","state_after","delay_ms","duration_ms","validation_results":{"input_valid","output_valid","validation_errors"},"error","error_kind"}`.
    pub fn to_json(&self) -> Value {
        json!({
            "result": self.result,
            "variant": self.variant,
            "rule": self.rule,
            "state_after": self.state_after,
            "delay_ms": self.delay_ms,
            "duration_ms": self.duration_ms,
            "validation_results": {
                "input_valid": self.input_valid,
                "output_valid": self.output_valid,
                "validation_errors": self.validation_errors,
            },
            "error": self.error.as_ref().map(CallError::to_json),
            "error_kind": self.error.as_ref().map(CallError::kind),
        })
    }

    /// A call that ended before evaluation (stale contract, broken definition…).
    pub fn failed(
        error: CallError,
        variant: Option<String>,
        state: Map<String, Value>,
    ) -> ExecResult {
        ExecResult {
            result: None,
            variant,
            rule: None,
            state_after: state.clone(),
            state_before: state,
            state_patch: Map::new(),
            delay_ms: 0,
            duration_ms: 0.0,
            input_valid: true,
            output_valid: None,
            validation_errors: Vec::new(),
            error: Some(error),
        }
    }

    /// `understudy exec`'s exit code: 0 ok, 3 input error, 4 harness error.
    pub fn exit_code(&self) -> i32 {
        match &self.error {
            None => 0,
            Some(CallError::Input(_)) => 3,
            Some(CallError::Harness(_)) => 4,
        }
    }
}

/// Run one call of `op` with the file's own mock (see [`execute_with`]).
pub fn execute(
    op: &Operation,
    input: &Value,
    variant: Option<&str>,
    state: Option<&Map<String, Value>>,
) -> ExecResult {
    match op.engine() {
        Ok(engine) => execute_with(op, engine.as_deref(), input, variant, state),
        Err(e) => ExecResult::failed(
            e,
            variant.map(str::to_string),
            state.cloned().unwrap_or_default(),
        ),
    }
}

/// Run one call in isolation: validate `input` against the input schema (an input error
/// otherwise), evaluate `engine` (`None` → harness `no_mock`) with `variant` (None → the
/// default) against `state` (None → the definition's initial state), then validate the
/// rendered result against the output schema and the profile's envelope rule (harness
/// `output_schema_violation` otherwise). Pure: commits nothing and never sleeps.
pub fn execute_with(
    op: &Operation,
    engine: Option<&Engine>,
    input: &Value,
    variant: Option<&str>,
    state: Option<&Map<String, Value>>,
) -> ExecResult {
    let started = Instant::now();
    let state_before = match (state, engine) {
        (Some(s), _) => s.clone(),
        (None, Some(e)) => e.initial_state(),
        (None, None) => Map::new(),
    };
    let mut r = ExecResult {
        result: None,
        variant: variant
            .map(str::to_string)
            .or_else(|| engine.map(|e| e.definition().default_variant.clone())),
        rule: None,
        state_after: state_before.clone(),
        state_before,
        state_patch: Map::new(),
        delay_ms: 0,
        duration_ms: 0.0,
        input_valid: true,
        output_valid: None,
        validation_errors: Vec::new(),
        error: None,
    };
    let finish = |mut r: ExecResult| {
        r.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        r
    };
    let Some(engine) = engine else {
        r.error = Some(
            HarnessError::new(
                HarnessCode::NoMock,
                format!(
                    "operation `{}` of `{}` has no mock",
                    op.id(),
                    op.integration
                ),
            )
            .into(),
        );
        return finish(r);
    };
    if let Err(e) = validate_input(op, input) {
        r.input_valid = false;
        r.validation_errors = e.details.clone();
        r.error = Some(e.into());
        return finish(r);
    }
    let outcome = match engine.evaluate(variant, input, &r.state_before) {
        Ok(o) => o,
        Err(e) => {
            r.error = Some(e);
            return finish(r);
        }
    };
    r.variant = Some(outcome.variant.clone());
    r.rule = outcome.rule;
    if let Err(v) = validate_output(
        op,
        engine.definition(),
        &outcome.result,
        &outcome.variant,
        outcome.rule,
    ) {
        r.output_valid = Some(false);
        r.validation_errors = v.problems;
        r.error = Some(v.error.into());
        return finish(r);
    }
    r.output_valid = Some(true);
    r.delay_ms = outcome.delay_ms;
    for (k, v) in &outcome.state_patch {
        r.state_after.insert(k.clone(), v.clone());
    }
    r.state_patch = outcome.state_patch;
    r.result = Some(outcome.result);
    finish(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::OperationFile;
    use crate::contract::ProfileKind;
    use crate::operation::LoadedOperation;

    fn base(mock: Value) -> OperationFile {
        let mut o: OperationFile = serde_json::from_value(json!({
            "operation_id": "get_thing",
            "match": {"method": "GET", "path": "/things/{id}"},
            "input_schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
            "output_schema": {"type": "object", "required": ["status"], "properties": {"status": {"type": "integer"}}},
            "mock": mock
        }))
        .unwrap();
        let h = o.contract_hash(crate::contract::ProfileKind::Rest);
        if let Some(mock) = &mut o.mock {
            mock.edit(|v| {
                v.as_object_mut()
                    .map(|m| m.entry("contract_hash").or_insert(Value::String(h)));
            });
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

    #[test]
    fn result_path_names_the_rule_only_when_it_has_a_result() {
        let def = Definition::from_value(&json!({
            "schema_version": 1, "default_variant": "a/b",
            "variants": {"a/b": {"result": 1, "rules": [
                {"when": [], "set_state": {"k": 1}},
                {"when": [], "result": 2}
            ]}}
        }))
        .unwrap();
        assert_eq!(result_path(&def, "a/b", Some(0)), "variants/a~1b/result");
        assert_eq!(
            result_path(&def, "a/b", Some(1)),
            "variants/a~1b/rules/1/result"
        );
        assert_eq!(result_path(&def, "a/b", None), "variants/a~1b/result");
    }

    #[test]
    fn execute_reports_each_outcome() {
        let compile = |o: OperationFile| {
            let l = LoadedOperation {
                file: "x.json".into(),
                contract_hash: o.contract_hash(crate::contract::ProfileKind::Rest),
                op: o,
            };
            Operation::compile("crm", ProfileKind::Rest, l).unwrap()
        };
        let o = compile(base(good_mock()));
        let r = execute(&o, &json!({"id": "5"}), None, None);
        assert_eq!(r.exit_code(), 0, "{:?}", r.to_json());
        assert_eq!(r.result, Some(json!({"status": 200, "data": {"id": "5"}})));
        assert_eq!(
            r.to_json()["validation_results"]["output_valid"],
            json!(true)
        );
        let r = execute(&o, &json!({}), None, None);
        assert_eq!(r.exit_code(), 3);
        assert_eq!(r.to_json()["error_kind"], "input_error");
        assert_eq!(
            r.to_json()["validation_results"]["input_valid"],
            json!(false)
        );
        let r = execute(&o, &json!({"id": "5"}), Some("nope"), None);
        assert_eq!(r.exit_code(), 4);
        assert_eq!(r.to_json()["error"]["code"], "unknown_variant");
        let mut m = good_mock();
        m["variants"]["found"]["result"] = json!({"status": "200"});
        let mut f = base(m);
        f.mock.as_mut().unwrap().edit(|v| v["examples"] = json!([]));
        let r = execute(&compile(f), &json!({"id": "5"}), None, None);
        assert_eq!(
            r.to_json()["error"]["code"],
            "output_schema_violation",
            "{:?}",
            r.to_json()
        );
        assert_eq!(r.to_json()["error"]["path"], "variants/found/result");
        let mut f = base(good_mock());
        f.mock = None;
        let r = execute(&compile(f), &json!({"id": "5"}), None, None);
        assert_eq!(r.to_json()["error"]["code"], "no_mock");
    }
}
