//! The admin routes of agent-side events and tool-call contracts (docs/src/reference/contracts.md, docs/src/reference/events.md):
//! `POST /attempts/{id}/events` and `POST /attempts/{id}/verify`.
//!
//! **Events.** The body is `{"name","kind","test_run_id"?,"text"?,"data"?}` (`kind` one of
//! `agent_message`, `caller_message`, `checkpoint`, `final_state`; `name` 1–128 characters;
//! `data` an object; unknown members refused). It is recorded under the attempt's state lock,
//! so it takes the attempt's next sequence (shared with calls: their order is the order
//! understudy received them) and cannot race the attempt's end; the answer, 201
//! `{"sequence": n}`, is sent only after a group commit made it durable. 404 for an unknown
//! attempt, 409 `attempt_ended` after `DELETE`, 422 `invalid_event` naming the member, 400
//! for a body that is not JSON. An attempt whose lease expired but that was not ended still
//! takes events (the runner may report what the agent said last).
//!
//! **Verify.** `{"contracts": [ids]}` evaluates those contracts of the loaded set (422
//! `unknown_contract` naming the ids) — or, with no ids, the attempt's pinned ones — over the
//! attempt's evidence now: 200 `{"attempt_id","contract_results","passed"}` where `passed`
//! says every blocking contract passed.

use hyper::http::StatusCode;
use serde_json::{json, Value};

use super::{lookup, store_err, ApiError, ApiResult, PREFIX};
use crate::app::attempt::Lease;
use crate::app::App;
use crate::http::Request;
use crate::records::{AgentEvent, AgentEventKind};

/// Longest event name.
pub const MAX_EVENT_NAME: usize = 128;

fn invalid(path: &str, message: impl Into<String>) -> ApiError {
    let message = message.into();
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_event",
        format!("event body: {path}: {message}"),
    )
    .with_details(vec![json!({ "path": path, "message": message })])
}

/// The event body, checked member by member (so the 422 names the member): the event with
/// sequence 0 and no timestamp yet.
fn parse_event(body: &Value) -> Result<AgentEvent, ApiError> {
    let Some(m) = body.as_object() else {
        return Err(invalid(
            "",
            "expected a JSON object {\"name\",\"kind\",\"test_run_id\"?,\"text\"?,\"data\"?}",
        ));
    };
    for k in m.keys() {
        if !matches!(
            k.as_str(),
            "name" | "kind" | "test_run_id" | "text" | "data"
        ) {
            return Err(invalid(
                k,
                "unknown member: expected name, kind, test_run_id, text, data",
            ));
        }
    }
    let name = match m.get("name") {
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= MAX_EVENT_NAME => s.clone(),
        Some(Value::String(_)) => {
            return Err(invalid(
                "name",
                format!("expected 1 to {MAX_EVENT_NAME} characters"),
            ))
        }
        Some(_) => return Err(invalid("name", "expected a string")),
        None => {
            return Err(invalid(
                "name",
                "missing: every event has a name (e.g. \"told_caller_booked\")",
            ))
        }
    };
    let kinds = AgentEventKind::KNOWN
        .map(|k| k.as_str().to_string())
        .join(", ");
    let kind = match m.get("kind") {
        Some(Value::String(s)) => AgentEventKind::parse(s).ok_or_else(|| {
            invalid(
                "kind",
                format!("`{s}` is not a kind: expected one of {kinds}"),
            )
        })?,
        Some(_) => {
            return Err(invalid(
                "kind",
                format!("expected a string, one of {kinds}"),
            ))
        }
        None => return Err(invalid("kind", format!("missing: expected one of {kinds}"))),
    };
    let opt_str = |k: &str| -> Result<Option<String>, ApiError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(invalid(k, "expected a string")),
        }
    };
    let test_run_id = opt_str("test_run_id")?;
    let text = opt_str("text")?;
    let data = match m.get("data") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(_) => return Err(invalid("data", "expected a JSON object")),
    };
    Ok(AgentEvent {
        sequence: 0,
        name,
        kind,
        test_run_id,
        text,
        data,
        timestamp: String::new(),
    })
}

/// `POST /attempts/{id}/events`.
pub(crate) async fn post_event(app: &App, id: &str, req: &Request) -> ApiResult {
    let a = lookup(app, id)?;
    let body = match req.json_body() {
        Ok(Some(v)) => v,
        Ok(None) => {
            return Err(invalid(
                "",
                "expected a JSON object body, got an empty body",
            ))
        }
        Err(e) => return Err(ApiError::of_body(e, "event body")),
    };
    let mut ev = parse_event(&body)?;
    let seq = {
        // Under the state lock: one sequence with the calls, and no race with DELETE.
        let mut g = a.lock.lock().await;
        if a.lease(app.clock.now()) == Lease::Ended {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "attempt_ended",
                format!("attempt `{id}` has ended: its evidence is closed, events are refused (post events before DELETE {PREFIX}/attempts/{{id}})"),
            ));
        }
        // And a shared store's row lock (docs/src/operations/fleet-store.md): one sequence with the calls of every
        // process; held until after `write_agent_event`.
        let _row = crate::app::attempt::lock_in_store(&app.store, &a.id, &mut g).await;
        ev.timestamp = crate::util::time::rfc3339(app.clock.now());
        app.store.write_agent_event(id, ev).map_err(store_err)?
    };
    // The attempt's durability applies to agent-side events too.
    app.store
        .acknowledge(a.durability)
        .await
        .map_err(store_err)?;
    Ok((StatusCode::CREATED, json!({ "sequence": seq })))
}

/// `POST /attempts/{id}/verify`.
pub(crate) async fn verify(app: &App, id: &str, req: &Request) -> ApiResult {
    let a = lookup(app, id)?;
    #[derive(serde::Deserialize, Default)]
    #[serde(deny_unknown_fields)]
    struct Body {
        #[serde(default)]
        contracts: Vec<String>,
    }
    let body: Body = match req.json_body() {
        Ok(None) => Body::default(),
        Ok(Some(v)) => super::from_value(&v, "verify body")?,
        Err(e) => return Err(ApiError::of_body(e, "verify body")),
    };
    let chosen = if body.contracts.is_empty() {
        None
    } else {
        Some(unknown_contracts(app, &body.contracts)?)
    };
    let found = super::verdict_evidence(app, &a, id).await?;
    let inputs = crate::evidence::Inputs::of(&found, &app.config.redact);
    let results = match chosen {
        None => crate::evidence::contract_results(&inputs),
        Some(list) => crate::evidence::evaluate_contracts(&inputs, &list),
    };
    let pinned = crate::evidence::contract_results(&inputs);
    let verdict = crate::evidence::verdict_of(&inputs, &pinned);
    let (_, answer) = crate::evidence::verdict::verification(id, &results, &verdict);
    Ok((StatusCode::OK, answer))
}

/// The loaded contracts named by `ids`, or 422 `unknown_contract` naming the others.
pub(crate) fn unknown_contracts(
    app: &App,
    ids: &[String],
) -> Result<Vec<(crate::evidence::verify::ToolCallContract, String)>, ApiError> {
    match app.contracts.pin(ids) {
        Ok(_) => {
            let set = app.contracts.current();
            Ok(ids
                .iter()
                .filter_map(|i| set.get(i))
                .map(|c| (c.contract.clone(), c.hash.clone()))
                .collect())
        }
        Err(u) => Err(unknown_contract_error(&u)),
    }
}

/// 422 `unknown_contract`: the ids that are not loaded, and the known ones.
pub(crate) fn unknown_contract_error(u: &crate::app::contracts::UnknownContracts) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_contract",
        format!(
            "contracts: no tool-call contract {}; the loaded contracts are: {}",
            u.unknown
                .iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", "),
            if u.known.is_empty() {
                "(none)".to_string()
            } else {
                u.known.join(", ")
            }
        ),
    )
    .with_details(vec![
        json!({ "path": "contracts", "unknown_contracts": u.unknown, "known_contracts": u.known }),
    ])
}
