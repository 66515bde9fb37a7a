//! Collections, Composite and Composite Graph in the default org
//! (docs/src/guides/salesforce.md#the-default-org): sObject Collections (`…/composite/sobjects`:
//! create, update, upsert, delete; at most 200 records; one result per record under 200;
//! `allOrNone` rolls every change back and the good records report
//! `ALL_OR_NONE_OPERATION_ROLLED_BACK`), Composite (`…/composite`, at most 25 subrequests,
//! HTTP 200 even when one fails) and Composite Graph (`…/composite/graph`, each graph all or
//! nothing), with `@{ref.path}` resolved from the earlier subrequests' answers. A subrequest
//! is an sObject row (get, create, update, upsert, delete) or a query, answered by the org
//! like the call itself ([`super::rows`]).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::login::Answer;
use super::model::{decode_segment, get_ci, ok, rest_error, Call, Org, RecordError};
use super::rows;

/// sObject Collections: at most this many records per request.
pub const MAX_COLLECTION: usize = 200;
/// Composite: at most this many subrequests.
pub const MAX_COMPOSITE: usize = 25;
/// Composite Graph: at most this many nodes over every graph of a request.
pub const MAX_GRAPH_NODES: usize = 500;

fn records_of(body: Option<&Map<String, Value>>) -> Result<(bool, Vec<Value>), Box<Answer>> {
    let Some(b) = body else {
        return Err(Box::new(rest_error(
            400,
            "JSON_PARSER_ERROR",
            "expected a JSON object {\"allOrNone\", \"records\": [...]}",
        )));
    };
    let all_or_none = b.get("allOrNone").and_then(Value::as_bool).unwrap_or(false);
    let Some(records) = b.get("records").and_then(Value::as_array) else {
        return Err(Box::new(rest_error(
            400,
            "INVALID_FIELD",
            "expected `records`, an array of records",
        )));
    };
    if records.is_empty() || records.len() > MAX_COLLECTION {
        return Err(Box::new(rest_error(
            400,
            "EXCEEDED_ID_LIMIT",
            &format!(
                "{} records: a collection takes 1 to {MAX_COLLECTION}",
                records.len()
            ),
        )));
    }
    Ok((all_or_none, records.clone()))
}

const ROLLED_BACK: &str = "Record rolled back because not all records were valid and the request was using AllOrNone header";

/// Results of a collection request: when `all_or_none` and one failed, the org goes back to
/// `before` and every success becomes `ALL_OR_NONE_OPERATION_ROLLED_BACK`.
fn collection_results(
    org: &mut Org,
    before: Org,
    all_or_none: bool,
    results: Vec<Result<(String, Option<bool>), RecordError>>,
) -> Answer {
    let failed = results.iter().any(Result::is_err);
    let rollback = all_or_none && failed;
    if rollback {
        *org = before;
    }
    let out: Vec<Value> = results
        .into_iter()
        .map(|r| match r {
            Ok(_) if rollback => json!({"id": null, "success": false, "errors": [
                {"statusCode": "ALL_OR_NONE_OPERATION_ROLLED_BACK", "message": ROLLED_BACK, "fields": []}]}),
            Ok((id, created)) => {
                let mut v = json!({"id": id, "success": true, "errors": []});
                if let Some(c) = created {
                    v["created"] = json!(c);
                }
                v
            }
            Err(e) => json!({"id": null, "success": false, "errors": [e.collection()]}),
        })
        .collect();
    ok(200, Value::Array(out))
}

pub fn collections_write(call: &Call, org: &mut Org, body: Option<&Map<String, Value>>) -> Answer {
    let (all_or_none, records) = match records_of(body) {
        Ok(x) => x,
        Err(a) => return *a,
    };
    let before = org.clone();
    let tail = call.tail();
    let mut results = Vec::new();
    for r in &records {
        let Some(fields) = r.as_object() else {
            results.push(Err(RecordError::new(
                "INVALID_FIELD",
                "a record is a JSON object",
                &[],
            )));
            continue;
        };
        let ty = fields
            .get("attributes")
            .and_then(|a| a.get("type"))
            .and_then(Value::as_str);
        let res = match call.operation_id.as_str() {
            "collections_create" => match ty {
                None => Err(RecordError::new(
                    "INVALID_TYPE",
                    "Must send a concrete entity type: each record needs attributes.type",
                    &[],
                )),
                Some(_) if get_ci(fields, "Id").is_some() => Err(RecordError::new(
                    "INVALID_FIELD",
                    "Record ID: cannot specify Id in an insert call",
                    &["Id"],
                )),
                Some(t) => org.create(&call.secret, t, fields).map(|id| (id, None)),
            },
            "collections_update" => match get_ci(fields, "Id").and_then(Value::as_str) {
                None => Err(RecordError::new(
                    "MISSING_ARGUMENT",
                    "Id not specified in an update call",
                    &["Id"],
                )),
                Some(id) => {
                    let id = id.to_string();
                    org.update(ty, &id, fields).map(|()| (id, None))
                }
            },
            _ => {
                let (obj, ext) = (tail[2].as_str(), tail[3].as_str());
                match get_ci(fields, ext) {
                    None => Err(RecordError::new(
                        "MISSING_ARGUMENT",
                        format!("{ext} not specified"),
                        &[ext],
                    )),
                    Some(v) => {
                        let v = v.clone();
                        org.upsert(&call.secret, obj, ext, &v, fields)
                            .map(|(id, c)| (id, Some(c)))
                    }
                }
            }
        };
        results.push(res);
    }
    collection_results(org, before, all_or_none, results)
}

pub fn collections_delete(call: &Call, org: &mut Org) -> Answer {
    let ids: Vec<String> = call
        .param("ids")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if ids.is_empty() || ids.len() > MAX_COLLECTION {
        return rest_error(
            400,
            "EXCEEDED_ID_LIMIT",
            &format!("{} ids: `ids` takes 1 to {MAX_COLLECTION}", ids.len()),
        );
    }
    let all_or_none = call
        .param("allOrNone")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let before = org.clone();
    let results = ids
        .iter()
        .map(|id| org.delete(None, id).map(|()| (id.clone(), None)))
        .collect();
    collection_results(org, before, all_or_none, results)
}

/// `@{ref.path}` references inside `v`, resolved from `refs` (referenceId → answer body).
fn resolve(v: &Value, refs: &BTreeMap<String, Value>) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => {
            // A whole-string reference keeps the referenced value's type.
            if let Some(inner) = s.strip_prefix("@{").and_then(|r| r.strip_suffix('}')) {
                if !inner.contains('}') {
                    return lookup(inner, refs);
                }
            }
            Value::String(resolve_text(s, refs)?)
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| resolve(x, refs))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| Ok((k.clone(), resolve(x, refs)?)))
                .collect::<Result<_, String>>()?,
        ),
        v => v.clone(),
    })
}

fn resolve_text(s: &str, refs: &BTreeMap<String, Value>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("@{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else {
            return Err(format!("a reference `{}` is not closed", &rest[i..]));
        };
        match lookup(&after[..j], refs)? {
            Value::String(x) => out.push_str(&x),
            v => out.push_str(&v.to_string()),
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `ref.a.b[0].c` in the answers so far (the path after the reference id is a dot path:
/// `crate::mock::path::DotPath`, with `[n]` read as `.n`).
fn lookup(path: &str, refs: &BTreeMap<String, Value>) -> Result<Value, String> {
    let norm = path.replace('[', ".").replace(']', "");
    let (name, rest) = norm.split_once('.').unwrap_or((norm.as_str(), ""));
    let Some(root) = refs.get(name) else {
        return Err(format!(
            "Invalid reference specified. No value for {path} found in {name}. Provided referenceId ('{name}') must be a referenceId of an earlier subrequest."
        ));
    };
    if rest.is_empty() {
        return Ok(root.clone());
    }
    let missing = || format!("Invalid reference specified. No value for {path} found in {name}.");
    let p = crate::mock::path::DotPath::parse(rest).map_err(|_| missing())?;
    p.resolve(root).cloned().map_err(|_| missing())
}

/// One subrequest of a Composite or a graph against the org: (status, body, headers).
fn subrequest(
    call: &Call,
    org: &mut Org,
    method: &str,
    url: &str,
    body: Option<&Value>,
) -> (u16, Option<Value>, Map<String, Value>) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode_segment)
        .collect();
    let query = crate::contract::template::parse_query(query);
    // `/services/data/vNN.N/<tail>`
    if segs.len() < 4 || segs[0] != "services" || segs[1] != "data" {
        return (
            404,
            Some(
                json!([{"errorCode": "NOT_FOUND", "message": format!("The requested resource does not exist: {url}")}]),
            ),
            Map::new(),
        );
    }
    let tail = &segs[3..];
    let op = match (
        method.to_ascii_uppercase().as_str(),
        tail.first().map(String::as_str),
        tail.len(),
    ) {
        ("GET", Some("sobjects"), 3) => "sobject_get",
        ("POST", Some("sobjects"), 2) => "sobject_create",
        ("PATCH", Some("sobjects"), 3) => "sobject_update",
        ("DELETE", Some("sobjects"), 3) => "sobject_delete",
        ("PATCH", Some("sobjects"), 4) => "sobject_upsert",
        ("GET", Some("query"), 1) => "query",
        ("GET", Some("queryAll"), 1) => "query_all",
        _ => {
            return (
                400,
                Some(
                    json!([{"errorCode": "INVALID_API_INPUT", "message": format!("{method} {url} is not a subrequest the default org answers (sObject rows and queries)")}]),
                ),
                Map::new(),
            )
        }
    };
    let sub = Call {
        integration: call.integration.clone(),
        operation_id: op.into(),
        rel: segs.clone(),
        query,
        body: bytes::Bytes::new(),
        json: body.cloned(),
        batch_size: None,
        secret: call.secret.clone(),
        now_ms: call.now_ms,
    };
    let a = rows::answer(&sub, org);
    let mut headers = Map::new();
    for (k, v) in &a.response.headers {
        headers.insert(k.clone(), json!(v));
    }
    (a.response.status, a.response.body, headers)
}

const HALTED: &str =
    "The transaction was rolled back since another operation in the same transaction failed.";

/// The subrequests of one all-or-none unit (a Composite with `allOrNone`, or a graph):
/// (answers, whether all succeeded). On a failure the org goes back and every other
/// subrequest answers 400 `PROCESSING_HALTED`.
fn run_subrequests(
    call: &Call,
    org: &mut Org,
    reqs: &[Value],
    all_or_none: bool,
) -> Result<(Vec<Value>, bool), Box<Answer>> {
    let before = org.clone();
    let mut refs: BTreeMap<String, Value> = BTreeMap::new();
    let mut out = Vec::new();
    let mut failed_at = None;
    for (i, r) in reqs.iter().enumerate() {
        let (Some(method), Some(url), Some(reference)) = (
            r.get("method").and_then(Value::as_str),
            r.get("url").and_then(Value::as_str),
            r.get("referenceId").and_then(Value::as_str),
        ) else {
            return Err(Box::new(rest_error(
                400,
                "INVALID_API_INPUT",
                &format!("subrequest {i}: expected `method`, `url` and `referenceId`"),
            )));
        };
        if all_or_none && failed_at.is_some() {
            out.push(
                json!({"body": [{"errorCode": "PROCESSING_HALTED", "message": HALTED}],
                "httpHeaders": {}, "httpStatusCode": 400, "referenceId": reference}),
            );
            continue;
        }
        let resolved = resolve_text(url, &refs).and_then(|u| {
            let b = r.get("body").map(|b| resolve(b, &refs)).transpose()?;
            Ok((u, b))
        });
        let (status, body, headers) = match resolved {
            Ok((u, b)) => subrequest(call, org, method, &u, b.as_ref()),
            Err(m) => (
                400,
                Some(json!([{"errorCode": "PROCESSING_HALTED", "message": m}])),
                Map::new(),
            ),
        };
        if status >= 400 && failed_at.is_none() {
            failed_at = Some(i);
        }
        if let Some(b) = &body {
            refs.insert(reference.to_string(), b.clone());
        }
        out.push(
            json!({"body": body.unwrap_or(Value::Null), "httpHeaders": headers,
            "httpStatusCode": status, "referenceId": reference}),
        );
    }
    if let (true, Some(at)) = (all_or_none, failed_at) {
        *org = before;
        for (i, item) in out.iter_mut().enumerate() {
            if i != at && item["httpStatusCode"].as_u64().is_some_and(|s| s < 400) {
                item["body"] = json!([{"errorCode": "PROCESSING_HALTED", "message": HALTED}]);
                item["httpStatusCode"] = json!(400);
                item["httpHeaders"] = json!({});
            }
        }
    }
    Ok((out, failed_at.is_none()))
}

pub fn composite(call: &Call, org: &mut Org, body: Option<&Map<String, Value>>) -> Answer {
    let Some(reqs) = body
        .and_then(|b| b.get("compositeRequest"))
        .and_then(Value::as_array)
    else {
        return rest_error(
            400,
            "JSON_PARSER_ERROR",
            "expected a JSON object {\"allOrNone\", \"compositeRequest\": [...]}",
        );
    };
    if reqs.is_empty() || reqs.len() > MAX_COMPOSITE {
        return rest_error(
            400,
            "INVALID_API_INPUT",
            &format!(
                "{} subrequests: a composite request takes 1 to {MAX_COMPOSITE}",
                reqs.len()
            ),
        );
    }
    let all_or_none = body
        .and_then(|b| b.get("allOrNone"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match run_subrequests(call, org, reqs, all_or_none) {
        Ok((items, _)) => ok(200, json!({"compositeResponse": items})),
        Err(a) => *a,
    }
}

pub fn graph(call: &Call, org: &mut Org, body: Option<&Map<String, Value>>) -> Answer {
    let Some(graphs) = body.and_then(|b| b.get("graphs")).and_then(Value::as_array) else {
        return rest_error(
            400,
            "JSON_PARSER_ERROR",
            "expected a JSON object {\"graphs\": [{\"graphId\", \"compositeRequest\": [...]}]}",
        );
    };
    let nodes: usize = graphs
        .iter()
        .map(|g| {
            g.get("compositeRequest")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        })
        .sum();
    if nodes > MAX_GRAPH_NODES {
        return rest_error(
            400,
            "INVALID_API_INPUT",
            &format!("{nodes} nodes: a graph request takes at most {MAX_GRAPH_NODES}"),
        );
    }
    let mut out = Vec::new();
    for (i, g) in graphs.iter().enumerate() {
        let (Some(id), Some(reqs)) = (
            g.get("graphId").and_then(Value::as_str),
            g.get("compositeRequest").and_then(Value::as_array),
        ) else {
            return rest_error(
                400,
                "INVALID_API_INPUT",
                &format!("graph {i}: expected `graphId` and `compositeRequest`"),
            );
        };
        match run_subrequests(call, org, reqs, true) {
            Ok((items, good)) => out.push(json!({"graphId": id,
                "graphResponse": {"compositeResponse": items}, "isSuccessful": good})),
            Err(a) => return *a,
        }
    }
    ok(200, json!({"graphs": out}))
}
