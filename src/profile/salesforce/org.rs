//! The default org (docs/src/guides/salesforce.md#the-default-org): the built-in operations
//! that read and write records answer from one coherent org kept in the attempt's state for
//! the integration (under [`STATE_KEY`]), so what an agent wrote it reads back, in the order
//! it wrote it, and a replay of the same calls answers the same:
//!
//! - single records (`sobject_get/create/update/upsert/delete`);
//! - SOQL (`query`, `query_all`) with pages: a batch holds `Sforce-Query-Options: batchSize=N`
//!   records (200–2000, default 2000), `nextRecordsUrl` names a cursor kept in the state and
//!   `query_more` answers the next page ([`super::soql`] is the SOQL it answers);
//! - sObject Collections (`…/composite/sobjects`: create, update, upsert, delete; at most 200
//!   records; one result per record; `allOrNone` rolls every change back);
//! - Composite (`…/composite`, at most 25 subrequests) and Composite Graph
//!   (`…/composite/graph`, each graph all or nothing), with `@{ref.path}` resolved from the
//!   earlier subrequests' answers;
//! - Bulk API 2.0 ingest and query jobs ([`super::bulk`]).
//!
//! This file is the router: [`answer`] sends each call to its handler — [`super::rows`],
//! [`super::composite`] or [`super::bulk`] — which work on the org's data
//! ([`super::model`]). Pure: [`answer`] takes the call and the org as the state held it, and gives the answer and
//! the new org (`None` when nothing changed). Ids are derived from the attempt's secret and a
//! counter, so the same calls make the same ids.

use serde_json::{json, Map, Value};

use super::login::Answer;
use super::model::{rest_error, Call, Org};
use super::{bulk, composite, rows};

/// The key of the attempt's integration state that holds the org.
pub const STATE_KEY: &str = "salesforce_org";

/// The built-in operations answered from the org.
pub const WITH_STATE: &[&str] = &[
    "sobject_get",
    "sobject_create",
    "sobject_update",
    "sobject_upsert",
    "sobject_delete",
    "query",
    "query_all",
    "query_more",
    "collections_create",
    "collections_update",
    "collections_upsert",
    "collections_delete",
    "composite",
    "composite_graph",
    "bulk_ingest_create",
    "bulk_ingest_upload",
    "bulk_ingest_state",
    "bulk_ingest_get",
    "bulk_ingest_results",
    "bulk_ingest_delete",
    "bulk_query_create",
    "bulk_query_state",
    "bulk_query_get",
    "bulk_query_results",
    "bulk_query_delete",
];

/// What the evidence records as a call's arguments: its path captures, query parameters and
/// JSON body (a Bulk upload: its columns and row count, not the rows).
pub fn arguments(call: &Call) -> Value {
    let mut args = Map::new();
    let tail = call.tail();
    match call.operation_id.as_str() {
        "sobject_get" | "sobject_create" | "sobject_update" | "sobject_delete" => {
            if let Some(o) = tail.get(1) {
                args.insert("sobject".into(), json!(o));
            }
            if let Some(id) = tail.get(2) {
                args.insert("id".into(), json!(id));
            }
        }
        "sobject_upsert" => {
            for (k, i) in [("sobject", 1), ("external_id_field", 2), ("external_id", 3)] {
                if let Some(v) = tail.get(i) {
                    args.insert(k.into(), json!(v));
                }
            }
        }
        "collections_upsert" => {
            for (k, i) in [("sobject", 2), ("external_id_field", 3)] {
                if let Some(v) = tail.get(i) {
                    args.insert(k.into(), json!(v));
                }
            }
        }
        "query_more" => {
            if let Some(c) = tail.get(1) {
                args.insert("cursor".into(), json!(c));
            }
        }
        op if op.starts_with("bulk_") => {
            if let Some(id) = tail.get(2) {
                args.insert("job_id".into(), json!(id));
            }
            if let Some(k) = tail.get(3) {
                args.insert("resource".into(), json!(k));
            }
        }
        _ => {}
    }
    for (k, v) in &call.query {
        args.entry(k.clone()).or_insert_with(|| json!(v));
    }
    if call.operation_id == "bulk_ingest_upload" {
        let text = String::from_utf8_lossy(&call.body);
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        args.insert("columns".into(), json!(header));
        args.insert(
            "rows".into(),
            json!(lines.filter(|l| !l.is_empty()).count()),
        );
    } else if let Some(Value::Object(o)) = &call.json {
        for (k, v) in o {
            args.insert(k.clone(), v.clone());
        }
    } else if let Some(v) = &call.json {
        args.insert("body".into(), v.clone());
    }
    Value::Object(args)
}

/// The answer of `call` against the org `state` held; the new org when the call changed it.
pub fn answer(call: &Call, state: Option<&Value>) -> (Answer, Option<Value>) {
    let mut org = Org::of(state);
    let before = org.clone();
    let mut a = dispatch(call, &mut org);
    a.arguments = arguments(call);
    let changed = (org != before).then(|| org.to_value());
    (a, changed)
}

/// The handler of `call`: Collections and Composite ([`composite`]), Bulk API 2.0 ([`bulk`]),
/// sObject rows and queries ([`rows`]).
fn dispatch(call: &Call, org: &mut Org) -> Answer {
    let body_obj = call.json.as_ref().and_then(Value::as_object);
    match call.operation_id.as_str() {
        "collections_create" | "collections_update" | "collections_upsert" => {
            composite::collections_write(call, org, body_obj)
        }
        "collections_delete" => composite::collections_delete(call, org),
        "composite" => composite::composite(call, org, body_obj),
        "composite_graph" => composite::graph(call, org, body_obj),
        op if op.starts_with("bulk_") => bulk::answer(call, org),
        op if WITH_STATE.contains(&op) => rows::answer(call, org),
        other => rest_error(
            404,
            "NOT_FOUND",
            &format!("`{other}` has no default answer"),
        ),
    }
}

#[cfg(test)]
#[path = "org_tests.rs"]
mod tests;
