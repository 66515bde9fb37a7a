//! sObject rows and SOQL queries in the default org: `sobject_get/create/update/upsert/delete`,
//! `query`, `query_all` and `query_more` (pages of `Sforce-Query-Options: batchSize=N`
//! records, 200–2000, default 2000; `nextRecordsUrl` names a cursor kept in the org). The
//! router (`org.rs`) sends these calls here, and so do Composite and Composite Graph for
//! their subrequests (`composite.rs`).

use serde_json::{json, Map, Value};

use super::login::Answer;
use super::model::{ok, ok_empty, record_error_answer, rest_error, Call, Cursor, Org};
use super::soql;

/// The answer of a row or query call (`call.operation_id` one of the module doc's); changes
/// `org`.
pub fn answer(call: &Call, org: &mut Org) -> Answer {
    let tail = call.tail().to_vec();
    let version = call.version();
    let body_obj = call.json.as_ref().and_then(Value::as_object);
    match call.operation_id.as_str() {
        "sobject_get" => {
            let (obj, id) = (&tail[1], &tail[2]);
            match org.get(Some(obj), id) {
                Some(r) => {
                    let mut rec = with_attributes(obj, r, &version);
                    if let Some(fields) = call.param("fields") {
                        let want: Vec<&str> = fields.split(',').map(str::trim).collect();
                        rec.retain(|k, _| {
                            k == "attributes" || want.iter().any(|w| w.eq_ignore_ascii_case(k))
                        });
                    }
                    ok(200, Value::Object(rec))
                }
                None => rest_error(404, "NOT_FOUND", "The requested resource does not exist"),
            }
        }
        "sobject_create" => {
            let Some(fields) = body_obj else {
                return rest_error(
                    400,
                    "JSON_PARSER_ERROR",
                    "expected a JSON object of the record's fields",
                );
            };
            match org.create(&call.secret, &tail[1], fields) {
                Ok(id) => {
                    let mut a = ok(201, json!({"id": id, "success": true, "errors": []}));
                    a.response.headers.push((
                        "Location".into(),
                        format!("/services/data/v{version}/sobjects/{}/{id}", tail[1]),
                    ));
                    a.result = a.response.to_envelope();
                    a
                }
                Err(e) => record_error_answer(&e),
            }
        }
        "sobject_update" => {
            let Some(fields) = body_obj else {
                return rest_error(
                    400,
                    "JSON_PARSER_ERROR",
                    "expected a JSON object of the fields to change",
                );
            };
            match org.update(Some(&tail[1]), &tail[2], fields) {
                Ok(()) => ok_empty(204),
                Err(e) => record_error_answer(&e),
            }
        }
        "sobject_upsert" => {
            let empty = Map::new();
            let fields = body_obj.unwrap_or(&empty);
            match org.upsert(&call.secret, &tail[1], &tail[2], &json!(tail[3]), fields) {
                Ok((id, true)) => ok(
                    201,
                    json!({"id": id, "success": true, "errors": [], "created": true}),
                ),
                Ok((id, false)) => ok(
                    200,
                    json!({"id": id, "success": true, "errors": [], "created": false}),
                ),
                Err(e) => record_error_answer(&e),
            }
        }
        "sobject_delete" => match org.delete(Some(&tail[1]), &tail[2]) {
            Ok(()) => ok_empty(204),
            Err(e) => record_error_answer(&e),
        },
        "query" | "query_all" => {
            let Some(q) = call.param("q").filter(|q| !q.trim().is_empty()) else {
                return rest_error(
                    400,
                    "MALFORMED_QUERY",
                    "expected the query parameter `q` (a SOQL query)",
                );
            };
            let batch = call.batch_size.unwrap_or(2000).clamp(200, 2000);
            query_page(org, &call.secret, q, batch, 0, None, &version)
        }
        "query_more" => {
            let raw = &tail[1];
            let Some((cid, offset)) = raw
                .rsplit_once('-')
                .and_then(|(c, o)| Some((c.to_string(), o.parse::<usize>().ok()?)))
            else {
                return rest_error(400, "INVALID_QUERY_LOCATOR", "invalid query locator");
            };
            let Some(cur) = org.cursors.get(&cid).cloned() else {
                return rest_error(400, "INVALID_QUERY_LOCATOR", "invalid query locator");
            };
            query_page(
                org,
                &call.secret,
                &cur.soql,
                cur.batch,
                offset,
                Some(cid),
                &version,
            )
        }
        other => rest_error(
            404,
            "NOT_FOUND",
            &format!("`{other}` has no default answer"),
        ),
    }
}

fn with_attributes(object: &str, r: &Map<String, Value>, version: &str) -> Map<String, Value> {
    let id = r.get("Id").and_then(Value::as_str).unwrap_or_default();
    let mut out = Map::new();
    out.insert(
        "attributes".into(),
        json!({"type": object, "url": format!("/services/data/v{version}/sobjects/{object}/{id}")}),
    );
    out.extend(r.clone());
    out
}

/// One page of `soql` from `offset`; a first page (`cursor` `None`) opens a cursor when more
/// pages follow.
fn query_page(
    org: &mut Org,
    secret: &str,
    soql_text: &str,
    batch: usize,
    offset: usize,
    cursor: Option<String>,
    version: &str,
) -> Answer {
    let q = match soql::parse(soql_text) {
        Ok(q) => q,
        Err(m) => return rest_error(400, "MALFORMED_QUERY", &m),
    };
    let all = org.select(&q, version);
    let total = all.len();
    let end = (offset + batch).min(total);
    let page: Vec<Value> = all
        .into_iter()
        .skip(offset)
        .take(end.saturating_sub(offset))
        .map(Value::Object)
        .collect();
    let mut body = json!({"totalSize": total, "done": end >= total, "records": page});
    if end < total {
        let cid = match cursor {
            Some(c) => c,
            None => {
                let id = org.new_id(secret, "01g");
                let cid = id[..15].to_string();
                org.cursors.insert(
                    cid.clone(),
                    Cursor {
                        soql: soql_text.to_string(),
                        batch,
                    },
                );
                cid
            }
        };
        body["nextRecordsUrl"] = json!(format!("/services/data/v{version}/query/{cid}-{end}"));
    }
    ok(200, body)
}
