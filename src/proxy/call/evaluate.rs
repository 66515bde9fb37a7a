//! Stage 4's evaluation, under the attempt's state lock: idempotency, the pinned engine, the
//! output check and the wire's rendering (settled once per static result).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::Prepared;
use crate::app::attempt::{AttemptState, IdempotentEntry};
use crate::contract::ResultForm;
use crate::error::InputError;
use crate::http::NativeResponse;
use crate::mock::eval::{Rendered, StaticResult};
use crate::mock::path::json_identical;
use crate::operation::call::validate_output;
use crate::profile::Wire;
use crate::proxy::answer::StaticAnswer;
use crate::proxy::decision::Decision;
use crate::records::{EventSource, ResultStatus};

/// Stage 4 — evaluate under the state lock (`state` is the guarded attempt state).
///
/// An idempotent repeat (same key, same arguments) replays the first response without
/// evaluating (`replayed`); the same key with other arguments is an input error with status
/// 422 (docs/src/reference/operation-files.md#idempotency). Otherwise the pinned engine runs against the integration's pre-call state;
/// then stages 5 and 6 run, and the decision carries the new state for stage 7 to commit.
pub fn evaluate(state: &mut AttemptState, p: &Prepared) -> Decision {
    if let Some(k) = &p.idempotency {
        if let Some(first) = state.idempotency.get(k) {
            if first.arguments == p.input {
                return match p.wire.render(&first.result) {
                    Ok(response) => Decision {
                        response,
                        result: first.result.clone(),
                        result_status: ResultStatus::Replayed,
                        source: EventSource::Mock,
                        error: None,
                        revision: first.revision,
                        variant: first.variant.clone(),
                        rule: first.rule,
                        delay_ms: 0,
                        new_state: None,
                        remember: None,
                        fault: None,
                        fault_record: None,
                        shared: None,
                        org: None,
                        chaos: None,
                    },
                    Err(e) => Decision::harness_on(&p.wire, e),
                };
            }
            let mut e = InputError::new(format!(
                "this idempotency key was already used in this attempt with other arguments for `{}`: reuse a key only to retry the same request",
                p.op.id()
            ));
            e.status = 422;
            return Decision::input_on(&p.wire, e);
        }
    }
    let empty = Map::new();
    let pre = state.state.get(&p.op.integration).unwrap_or(&empty);
    let outcome = match p.engine.decide(p.variant.as_deref(), &p.input, pre) {
        Ok(o) => o,
        Err(e) => return Decision::error_on(&p.wire, e),
    };
    // Stages 5 and 6: once per static result (see `settled`), else for this call.
    let settled = match &outcome.result {
        Rendered::Static(s) => settled(p, s, outcome.variant, outcome.rule),
        Rendered::Dynamic(_) => None,
    };
    // A settled answer with prebuilt wire bytes is shared, not copied (`Decision::shared`).
    let (response, shared) = match settled {
        Some(a) if a.shareable() => (a.head(), Some(a.clone())),
        Some(a) => (a.response.clone(), None),
        None => match check_and_render(p, outcome.result.value(), outcome.variant, outcome.rule) {
            Ok(r) => (r, None),
            Err(d) => return *d,
        },
    };
    let new_state = patched_state(pre, outcome.state_patch).map(|s| (p.op.integration.clone(), s));
    let result = match &shared {
        Some(_) => Value::Null,
        None => outcome.result.into_value(),
    };
    let variant = outcome.variant.to_string();
    let remember = p.idempotency.clone().map(|k| {
        (
            k,
            IdempotentEntry {
                arguments: p.input.clone(),
                result: shared
                    .as_ref()
                    .map_or_else(|| result.clone(), |a| Value::clone(&a.result)),
                http_status: response.status,
                revision: Some(p.revision),
                variant: Some(variant.clone()),
                rule: outcome.rule,
            },
        )
    });
    Decision {
        response,
        result,
        result_status: ResultStatus::Ok,
        source: EventSource::Mock,
        error: None,
        revision: Some(p.revision),
        variant: Some(variant),
        rule: outcome.rule,
        delay_ms: outcome.delay_ms,
        new_state,
        remember,
        fault: outcome.fault.cloned(),
        fault_record: None,
        shared,
        org: None,
        chaos: None,
    }
}

/// Stages 5 and 6 of one result: the output check, then the native response. `Err` is the
/// decided end of the call.
fn check_and_render(
    p: &Prepared,
    result: &Value,
    variant: &str,
    rule: Option<usize>,
) -> Result<NativeResponse, Box<Decision>> {
    // Stage 5.
    if let Err(v) = validate_output(&p.op, p.engine.definition(), result, variant, rule) {
        let mut d = Decision::harness_on(&p.wire, v.error);
        d.variant = Some(variant.to_string());
        d.rule = rule;
        return Err(Box::new(d));
    }
    // Stage 6.
    p.wire
        .render(result)
        .map_err(|e| Box::new(Decision::harness_on(&p.wire, e)))
}

/// Stages 5 and 6 of a static result, done on its first call and kept in the compiled
/// revision ([`StaticResult::memo`]) with what else the answer needs that does not depend
/// on the call ([`StaticAnswer`]: the wire bytes, the event's `result` JSON): what they
/// decide depends only on the result and on
/// what is fixed per contract — the output schema and the operation id (both in the contract
/// hash, which every call of a pinned revision shares), the result form and the wire. A
/// result that fails them is not kept: such calls run the stages every time (the harness
/// error names the rule that selected the result, which can differ per call).
fn settled<'s>(
    p: &Prepared,
    s: &'s StaticResult,
    variant: &str,
    rule: Option<usize>,
) -> Option<&'s Arc<StaticAnswer>> {
    let mcp = matches!(p.wire, Wire::Mcp);
    let m = s.memo(|v| Settled {
        contract_hash: p.op.contract_hash.clone(),
        result_form: p.op.op.result_form,
        mcp,
        response: check_and_render(p, v, variant, rule)
            .ok()
            .map(|r| Arc::new(StaticAnswer::new(r, s.value().clone(), !mcp))),
    })?;
    // Another contract or form (a reloaded file whose mock did not change) is not what
    // was settled: run the stages for it.
    (m.contract_hash == p.op.contract_hash && m.result_form == p.op.op.result_form && m.mcp == mcp)
        .then_some(m.response.as_ref())
        .flatten()
}

/// What [`settled`] keeps for a static result.
struct Settled {
    contract_hash: String,
    result_form: Option<ResultForm>,
    mcp: bool,
    /// `None` when the result fails stage 5 or 6.
    response: Option<Arc<StaticAnswer>>,
}

/// The integration's whole new state after `patch`, or `None` when the patch changes
/// nothing — every key already holds the identical value — so the store writes no state.
fn patched_state(
    pre: &Map<String, Value>,
    patch: Map<String, Value>,
) -> Option<Map<String, Value>> {
    if patch
        .iter()
        .all(|(k, v)| pre.get(k).is_some_and(|old| json_identical(old, v)))
    {
        return None;
    }
    let mut s = pre.clone();
    s.extend(patch);
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{CallError, HarnessCode};
    use crate::http::{to_http, HttpResponse};
    use crate::operation::Operation;
    use crate::profile::Profile;
    use serde_json::json;

    #[test]
    fn a_patch_that_changes_nothing_writes_no_state() {
        let pre = json!({"a": 1, "b": {"c": [true]}});
        let pre = pre.as_object().unwrap();
        let patch = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(patched_state(pre, Map::new()), None);
        assert_eq!(patched_state(pre, patch(json!({"a": 1}))), None);
        assert_eq!(
            patched_state(pre, patch(json!({"b": {"c": [true]}, "a": 1}))),
            None
        );
        // `1.0` is not `1` as written: the stored state changes.
        assert_eq!(
            patched_state(pre, patch(json!({"a": 1.0}))),
            Some(patch(json!({"a": 1.0, "b": {"c": [true]}})))
        );
        assert_eq!(
            patched_state(pre, patch(json!({"a": 1, "n": null}))),
            Some(patch(json!({"a": 1, "b": {"c": [true]}, "n": null})))
        );
    }

    /// An operation of the `rest` profile whose mock is `mock`, compiled as served.
    fn prepared(mock: Value, output_schema: Value, input: Value) -> Prepared {
        let file = json!({
            "operation_id": "op",
            "match": {"method": "POST", "path": "/op"},
            "input_schema": {"type": "object"},
            "output_schema": output_schema,
            "mock": mock,
        });
        let loaded = crate::operation::load::parse_operation(
            &file,
            std::path::Path::new("crm/op.json"),
            crate::contract::ProfileKind::Rest,
        )
        .unwrap();
        let op = Operation::compile("crm", crate::contract::ProfileKind::Rest, loaded).unwrap();
        Prepared {
            engine: op.engine().unwrap().unwrap(),
            op: Arc::new(op),
            wire: Wire::Http(Profile::builtin("rest").unwrap()),
            revision: 1,
            variant: None,
            input,
            idempotency: None,
        }
    }

    fn counter_mock() -> Value {
        json!({"schema_version": 1, "default_variant": "v", "initial_state": {"n": 0},
            "variants": {"v": {"result": {"status": 200, "data": {"ok": true}},
                               "set_state": {"n": {"$input": "n"}}}}})
    }

    #[test]
    fn evaluate_commits_state_only_when_it_changes() {
        let mut st = AttemptState::default();
        st.state
            .insert("crm".into(), Map::from_iter([("n".into(), json!(0))]));
        let same = prepared(counter_mock(), json!({}), json!({"n": 0}));
        let d = evaluate(&mut st, &same);
        assert_eq!((d.result_status, d.new_state), (ResultStatus::Ok, None));
        let other = prepared(counter_mock(), json!({}), json!({"n": 1}));
        let d = evaluate(&mut st, &other);
        assert_eq!(
            d.new_state,
            Some(("crm".into(), Map::from_iter([("n".into(), json!(1))])))
        );
    }

    /// What goes on the wire: status, headers, body bytes.
    async fn wire(r: HttpResponse) -> (u16, Vec<(String, String)>, bytes::Bytes) {
        use http_body_util::BodyExt;
        let (parts, body) = r.into_parts();
        let headers = parts
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        let body = body.collect().await.unwrap().to_bytes();
        (parts.status.as_u16(), headers, body)
    }

    #[tokio::test]
    async fn static_results_are_settled_once_and_shared_as_rendered() {
        let p = prepared(counter_mock(), json!({}), json!({"n": 0}));
        let mut st = AttemptState::default();
        let expected = json!({"status": 200, "data": {"ok": true}});
        let rendered = p.wire.render(&expected).unwrap();
        let mut first: Option<Arc<StaticAnswer>> = None;
        for _ in 0..2 {
            let mut d = evaluate(&mut st, &p);
            // Shared, not copied: the decision holds the head and no result, and every call
            // gets the same answer.
            let a = d.shared.clone().expect("a shared static answer");
            assert!(first.as_ref().is_none_or(|f| Arc::ptr_eq(f, &a)));
            first = Some(a.clone());
            assert_eq!(d.response.body, None);
            assert_eq!(d.response.status, 200);
            assert_eq!(d.result, Value::Null);
            // The prebuilt wire and event JSON are what rendering and serializing give.
            assert_eq!(
                wire(a.to_http()).await,
                wire(to_http(rendered.clone())).await
            );
            assert_eq!(
                a.result_json.as_ref().unwrap().as_bytes(),
                serde_json::to_vec(&expected).unwrap()
            );
            d.unshare();
            assert_eq!((&d.result, &d.response), (&expected, &rendered));
            assert!(d.shared.is_none());
        }
        let rendered = p.engine.decide(None, &p.input, &Map::new()).unwrap();
        let Rendered::Static(s) = rendered.result else {
            panic!("expected a static result");
        };
        assert!(settled(&p, s, "v", None).is_some());
    }

    #[test]
    fn a_static_result_that_breaks_the_output_schema_fails_every_call() {
        // `check` compares only the examples with the output schema; a rule no example
        // reaches can hold a literal result that breaks it.
        let mock = json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": {"status": 200, "data": {"ok": "yes"}},
            "rules": [{"when": [{"source": "input", "path": "r", "op": "exists"}]}]}}});
        let schema = json!({"type": "object", "properties": {"data": {"properties": {"ok": {"type": "boolean"}}}}});
        for _ in 0..2 {
            // Rule 0 has no `result` of its own: what it renders is the variant's, and the
            // error says so (it once named `rules/0/result`, a place that does not exist).
            for (input, at) in [
                (json!({}), "variants/v/result"),
                (json!({"r": 1}), "variants/v/result"),
            ] {
                let p = prepared(mock.clone(), schema.clone(), input);
                let d = evaluate(&mut AttemptState::default(), &p);
                assert_eq!(d.result_status, ResultStatus::HarnessError);
                let Some(CallError::Harness(e)) = &d.error else {
                    panic!("{:?}", d.error);
                };
                assert_eq!(e.code, HarnessCode::OutputSchemaViolation);
                assert_eq!(e.path.as_deref(), Some(at));
            }
        }
    }
}
