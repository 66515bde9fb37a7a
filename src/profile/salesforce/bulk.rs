//! Bulk API 2.0 in the default org (docs/src/guides/salesforce.md#bulk-api-20): ingest and
//! query jobs as a state machine kept in the org ([`super::model::Org::jobs`]).
//!
//! - **Ingest**: `POST …/jobs/ingest` creates an `Open` job; `PUT …/{id}/batches` uploads its
//!   CSV (once); `PATCH …/{id}` `{"state":"UploadComplete"}` closes it (or `Aborted`); each
//!   poll `GET …/{id}` moves it one step: `UploadComplete` → `InProgress` → `JobComplete`
//!   (the rows are applied to the org at that step, each on its own — one bad row fails
//!   alone), or `Failed` when the CSV cannot be read. Then `successfulResults/`
//!   (`sf__Id`, `sf__Created`), `failedResults/` (`sf__Id`, `sf__Error`) and
//!   `unprocessedrecords/`, as CSV.
//! - **Query**: `POST …/jobs/query` `{"operation":"query"|"queryAll","query"}` creates an
//!   `UploadComplete` job (a read: dry-run lets it through); polls move it to `InProgress`
//!   then `JobComplete`, when the query runs over the org; `GET …/{id}/results?maxRecords=`
//!   answers CSV pages, the next one named by the `Sforce-Locator` header (`null` at the end)
//!   and `Sforce-NumberOfRecords` counting the page.
//!
//! The CSV is [`super::csv`]'s. Pure: [`answer`] changes the org it is given.

use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::csv;
use super::login::Answer;
use super::model::{ok, rest_error, Call, Job, Org, RecordError};
use crate::http::NativeResponse;

fn date(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3f+0000")
        .to_string()
}

impl Job {
    fn info(&self, secret: &str, full: bool) -> Value {
        let mut v = json!({
            "id": self.id,
            "operation": self.operation,
            "object": self.object,
            "createdById": super::login::identity(secret).user_id,
            "createdDate": date(self.created_ms),
            "systemModstamp": date(self.created_ms),
            "state": self.state,
            "concurrencyMode": "Parallel",
            "contentType": "CSV",
            "apiVersion": self.api_version.parse::<f64>().unwrap_or(59.0),
            "lineEnding": self.line_ending,
            "columnDelimiter": self.column_delimiter,
        });
        if self.kind == "ingest" {
            v["jobType"] = json!("V2Ingest");
            v["contentUrl"] = json!(format!(
                "services/data/v{}/jobs/ingest/{}/batches",
                self.api_version, self.id
            ));
            if let Some(e) = &self.external_id {
                v["externalIdFieldName"] = json!(e);
            }
        } else {
            v["jobType"] = json!("V2Query");
        }
        if full {
            v["numberRecordsProcessed"] = json!(self.processed);
            if self.kind == "ingest" {
                v["numberRecordsFailed"] = json!(self.failed);
            }
            v["retries"] = json!(0);
            v["totalProcessingTime"] = json!(0);
            if let Some(e) = &self.error_message {
                v["errorMessage"] = json!(e);
            }
        }
        v
    }

    fn delim(&self) -> u8 {
        csv::delimiter(&self.column_delimiter).unwrap_or(b',')
    }
}

fn csv_answer(text: String, extra: Vec<(String, String)>) -> Answer {
    let mut headers = vec![("Content-Type".to_string(), "text/csv".to_string())];
    headers.extend(extra);
    Answer::plain(
        NativeResponse {
            status: 200,
            headers,
            body: Some(Value::String(text)),
        },
        json!({}),
    )
}

fn job_error(status: u16, code: &str, message: &str) -> Answer {
    rest_error(status, code, message)
}

/// The answer of a Bulk API 2.0 call; changes `org`.
pub fn answer(call: &Call, org: &mut Org) -> Answer {
    let tail = call.tail().to_vec();
    let body = call.json.as_ref().and_then(Value::as_object);
    let job_id = tail.get(2).cloned().unwrap_or_default();
    let op = call.operation_id.as_str();
    if op == "bulk_ingest_create" || op == "bulk_query_create" {
        return create(call, org, body, op == "bulk_query_create");
    }
    let kind = if op.starts_with("bulk_ingest") {
        "ingest"
    } else {
        "query"
    };
    let Some(job) = org.jobs.get_mut(&job_id).filter(|j| j.kind == kind) else {
        return job_error(
            404,
            "NOT_FOUND",
            &format!("The requested resource does not exist: no {kind} job {job_id}"),
        );
    };
    match op {
        "bulk_ingest_upload" => {
            if job.state != "Open" {
                return job_error(
                    409,
                    "INVALIDJOBSTATE",
                    &format!(
                        "the job is {}: data is uploaded while it is Open",
                        job.state
                    ),
                );
            }
            if job.upload.is_some() {
                return job_error(
                    409,
                    "INVALIDJOBSTATE",
                    "the job already has its data: a job takes one upload",
                );
            }
            if call.body.len() > csv::MAX_BYTES {
                return job_error(
                    400,
                    "INVALIDBATCH",
                    &format!(
                        "the upload is {} bytes: at most {} are accepted",
                        call.body.len(),
                        csv::MAX_BYTES
                    ),
                );
            }
            job.upload = Some(String::from_utf8_lossy(&call.body).into_owned());
            Answer::plain(
                NativeResponse {
                    status: 201,
                    headers: Vec::new(),
                    body: None,
                },
                json!({}),
            )
        }
        "bulk_ingest_state" | "bulk_query_state" => {
            let want = body.and_then(|b| b.get("state")).and_then(Value::as_str);
            match (want, job.state.as_str()) {
                (Some("UploadComplete"), "Open") if kind == "ingest" => {
                    job.state = "UploadComplete".into();
                    if job.upload.is_none() {
                        job.state = "Failed".into();
                        job.error_message = Some("InvalidBatch : no data was uploaded".into());
                    }
                }
                (Some("Aborted"), "Open" | "UploadComplete" | "InProgress") => {
                    job.state = "Aborted".into();
                    job.upload = None;
                }
                (Some(w), now) => {
                    return job_error(
                        400,
                        "INVALIDJOBSTATE",
                        &format!("the job is {now}: it cannot become {w}"),
                    )
                }
                (None, _) => {
                    return job_error(
                        400,
                        "INVALIDJOBSTATE",
                        "expected a JSON body {\"state\": \"UploadComplete\" | \"Aborted\"}",
                    )
                }
            }
            ok(200, job.info(&call.secret, false))
        }
        "bulk_ingest_get" | "bulk_query_get" => {
            match job.state.as_str() {
                "UploadComplete" => job.state = "InProgress".into(),
                "InProgress" => {
                    let mut j = job.clone();
                    if kind == "ingest" {
                        process_ingest(&mut j, org, &call.secret);
                    } else {
                        run_query(&mut j, org, &call.version());
                    }
                    org.jobs.insert(j.id.clone(), j);
                }
                _ => {}
            }
            let job = &org.jobs[&job_id];
            ok(200, job.info(&call.secret, true))
        }
        "bulk_ingest_results" => {
            if !matches!(job.state.as_str(), "JobComplete" | "Failed" | "Aborted") {
                return job_error(
                    409,
                    "INVALIDJOBSTATE",
                    &format!(
                        "the job is {}: results are ready once it is JobComplete",
                        job.state
                    ),
                );
            }
            let which = tail.get(3).map(String::as_str).unwrap_or_default();
            let d = job.delim();
            let cols = |first: &[&str]| -> Vec<String> {
                first
                    .iter()
                    .map(|s| s.to_string())
                    .chain(job.header.iter().cloned())
                    .collect()
            };
            let text = match which {
                "successfulResults" => csv::write(&cols(&["sf__Id", "sf__Created"]), &job.rows, d),
                "failedResults" => csv::write(&cols(&["sf__Id", "sf__Error"]), &job.failures, d),
                "unprocessedrecords" => {
                    let unprocessed = match &job.upload {
                        Some(u) => csv::parse(u.as_bytes(), d).map(|t| t.rows).unwrap_or_default(),
                        None => Vec::new(),
                    };
                    if job.header.is_empty() {
                        String::new()
                    } else {
                        csv::write(&job.header, &unprocessed, d)
                    }
                }
                other => {
                    return job_error(
                        404,
                        "NOT_FOUND",
                        &format!("The requested resource does not exist: `{other}` (expected successfulResults, failedResults or unprocessedrecords)"),
                    )
                }
            };
            csv_answer(text, Vec::new())
        }
        "bulk_query_results" => {
            if job.state != "JobComplete" {
                return job_error(
                    409,
                    "INVALIDJOBSTATE",
                    &format!(
                        "the job is {}: results are ready once it is JobComplete",
                        job.state
                    ),
                );
            }
            let offset = match call
                .param("locator")
                .filter(|l| !l.is_empty() && *l != "null")
            {
                None => 0,
                Some(l) => match base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(l)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|s| s.parse::<usize>().ok())
                {
                    Some(o) => o,
                    None => {
                        return job_error(400, "INVALID_LOCATOR", &format!("invalid locator {l}"))
                    }
                },
            };
            let max = match call.param("maxRecords") {
                None => usize::MAX,
                Some(m) => match m.parse::<usize>() {
                    Ok(n) if n > 0 => n,
                    _ => {
                        return job_error(
                            400,
                            "INVALID_FIELD",
                            &format!("maxRecords {m}: expected a positive number"),
                        )
                    }
                },
            };
            let total = job.rows.len();
            let end = offset.saturating_add(max).min(total);
            let page = job.rows.get(offset.min(total)..end).unwrap_or(&[]).to_vec();
            let locator = if end < total {
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(end.to_string())
            } else {
                "null".to_string()
            };
            csv_answer(
                csv::write(&job.header, &page, job.delim()),
                vec![
                    ("Sforce-Locator".into(), locator),
                    ("Sforce-NumberOfRecords".into(), page.len().to_string()),
                ],
            )
        }
        "bulk_ingest_delete" | "bulk_query_delete" => {
            if job.state == "InProgress" {
                return job_error(
                    409,
                    "INVALIDJOBSTATE",
                    &format!(
                        "the job is {}: it can be deleted once it is done or aborted",
                        job.state
                    ),
                );
            }
            org.jobs.remove(&job_id);
            Answer::plain(
                NativeResponse {
                    status: 204,
                    headers: Vec::new(),
                    body: None,
                },
                json!({}),
            )
        }
        other => job_error(
            404,
            "NOT_FOUND",
            &format!("`{other}` has no default answer"),
        ),
    }
}

fn create(call: &Call, org: &mut Org, body: Option<&Map<String, Value>>, query: bool) -> Answer {
    let Some(b) = body else {
        return job_error(
            400,
            "INVALIDJOB",
            "expected a JSON object describing the job",
        );
    };
    let s = |k: &str| b.get(k).and_then(Value::as_str).map(str::to_string);
    let operation = s("operation").unwrap_or_default();
    let column_delimiter = s("columnDelimiter").unwrap_or_else(|| "COMMA".into());
    if csv::delimiter(&column_delimiter).is_none() {
        return job_error(
            400,
            "INVALIDJOB",
            &format!("columnDelimiter {column_delimiter}: expected COMMA, TAB, PIPE, SEMICOLON, CARET or BACKQUOTE"),
        );
    }
    let line_ending = s("lineEnding").unwrap_or_else(|| "LF".into());
    if line_ending != "LF" && line_ending != "CRLF" {
        return job_error(
            400,
            "INVALIDJOB",
            &format!("lineEnding {line_ending}: expected LF or CRLF"),
        );
    }
    let mut job = Job {
        id: String::new(),
        kind: if query { "query" } else { "ingest" }.into(),
        operation: operation.clone(),
        object: String::new(),
        external_id: None,
        column_delimiter,
        line_ending,
        state: String::new(),
        api_version: call.version(),
        created_ms: call.now_ms,
        upload: None,
        query: None,
        processed: 0,
        failed: 0,
        error_message: None,
        header: Vec::new(),
        rows: Vec::new(),
        failures: Vec::new(),
    };
    if query {
        if operation != "query" && operation != "queryAll" {
            return job_error(
                400,
                "INVALIDJOB",
                &format!("operation `{operation}`: expected query or queryAll"),
            );
        }
        let Some(q) = s("query") else {
            return job_error(400, "INVALIDJOB", "expected `query`, the SOQL of the job");
        };
        match super::soql::parse(&q) {
            Ok(p) => job.object = p.object,
            Err(m) => return job_error(400, "INVALIDJOB", &m),
        }
        job.query = Some(q);
        job.state = "UploadComplete".into();
    } else {
        if !matches!(
            operation.as_str(),
            "insert" | "update" | "upsert" | "delete" | "hardDelete"
        ) {
            return job_error(
                400,
                "INVALIDJOB",
                &format!("operation `{operation}`: expected insert, update, upsert, delete or hardDelete"),
            );
        }
        let Some(object) = s("object").filter(|o| !o.is_empty()) else {
            return job_error(
                400,
                "INVALIDJOB",
                "expected `object`, the sObject the job loads",
            );
        };
        job.object = object;
        job.external_id = s("externalIdFieldName");
        if operation == "upsert" && job.external_id.is_none() {
            return job_error(
                400,
                "INVALIDJOB",
                "an upsert job needs `externalIdFieldName`",
            );
        }
        job.state = "Open".into();
    }
    job.id = org.new_id(&call.secret, "750");
    let info = job.info(&call.secret, false);
    org.jobs.insert(job.id.clone(), job);
    ok(200, info)
}

/// `sf__Error` text of a failure: `CODE:message:fields --`.
fn error_text(e: &RecordError) -> String {
    format!("{}:{}:{} --", e.status_code, e.message, e.fields.join(","))
}

/// Apply an ingest job's rows to the org, each on its own.
fn process_ingest(job: &mut Job, org: &mut Org, secret: &str) {
    let Some(upload) = job.upload.take() else {
        job.state = "Failed".into();
        job.error_message = Some("InvalidBatch : no data was uploaded".into());
        return;
    };
    let table = match csv::parse(upload.as_bytes(), job.delim()) {
        Ok(t) => t,
        Err(e) => {
            job.state = "Failed".into();
            job.error_message = Some(format!("InvalidBatch : {e}"));
            return;
        }
    };
    job.header = table.header.clone();
    let id_col = table
        .header
        .iter()
        .position(|h| h.eq_ignore_ascii_case("Id"));
    let needs_id = matches!(job.operation.as_str(), "update" | "delete" | "hardDelete");
    if needs_id && id_col.is_none() {
        job.state = "Failed".into();
        job.error_message = Some(format!(
            "InvalidBatch : Field name not found : Id (a {} job needs an Id column)",
            job.operation
        ));
        return;
    }
    for row in table.rows {
        let mut fields = Map::new();
        for (h, v) in table.header.iter().zip(&row) {
            match v.as_str() {
                "" => {}
                "#N/A" => {
                    fields.insert(h.clone(), Value::Null);
                }
                v => {
                    fields.insert(h.clone(), Value::String(v.to_string()));
                }
            }
        }
        let id_of = |f: &Map<String, Value>| {
            id_col
                .and_then(|i| row.get(i))
                .cloned()
                .or_else(|| f.get("Id").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default()
        };
        let res: Result<(String, bool), RecordError> = match job.operation.as_str() {
            "insert" => org
                .create(secret, &job.object, &fields)
                .map(|id| (id, true)),
            "update" => {
                let id = id_of(&fields);
                org.update(Some(&job.object), &id, &fields)
                    .map(|()| (id, false))
            }
            "upsert" => {
                let ext = job.external_id.clone().unwrap_or_default();
                match fields.get(&ext).cloned() {
                    Some(v) => org.upsert(secret, &job.object, &ext, &v, &fields),
                    None => Err(RecordError::new(
                        "MISSING_ARGUMENT",
                        format!("{ext} not specified"),
                        &[&ext],
                    )),
                }
            }
            _ => {
                let id = id_of(&fields);
                org.delete(Some(&job.object), &id).map(|()| (id, false))
            }
        };
        job.processed += 1;
        match res {
            Ok((id, created)) => {
                let mut r = vec![id, created.to_string()];
                r.extend(row);
                job.rows.push(r);
            }
            Err(e) => {
                job.failed += 1;
                let mut r = vec![String::new(), error_text(&e)];
                r.extend(row);
                job.failures.push(r);
            }
        }
    }
    job.state = "JobComplete".into();
}

/// Run a query job over the org.
fn run_query(job: &mut Job, org: &Org, version: &str) {
    let q = match super::soql::parse(job.query.as_deref().unwrap_or_default()) {
        Ok(q) => q,
        Err(m) => {
            job.state = "Failed".into();
            job.error_message = Some(m);
            return;
        }
    };
    job.header = q.fields.clone();
    job.rows = org
        .select(&q, version)
        .into_iter()
        .map(|r| {
            q.fields
                .iter()
                .map(|f| match r.get(f) {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                })
                .collect()
        })
        .collect();
    job.processed = job.rows.len() as u64;
    job.state = "JobComplete".into();
}
