//! The default org's data and the call it answers, shared by the router (`org.rs`) and the
//! handlers it routes to (`rows.rs`, `composite.rs`, `bulk.rs`), none of which it imports:
//! the call ([`Call`]), the org as the state holds it ([`Org`]: records, query cursors, Bulk
//! jobs — [`Job`], whose state machine is in `bulk.rs`), one record's failure
//! ([`RecordError`]) and the answers every handler builds ([`ok`], [`rest_error`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::login::Answer;
use super::soql;
use crate::http::NativeResponse;
use crate::util::scrub::hmac_sha256;

/// At most this many records in the org (every object together).
pub const MAX_RECORDS: usize = 50_000;

/// One call to the org, read from the request at the edge (no I/O after).
#[derive(Debug, Clone)]
pub struct Call {
    /// The integration whose state holds the org.
    pub integration: String,
    pub operation_id: String,
    /// The path after the integration (`services`, `data`, `v59.0`, …).
    pub rel: Vec<String>,
    pub query: Vec<(String, String)>,
    /// The raw body (CSV for a Bulk upload).
    pub body: bytes::Bytes,
    /// The body as JSON, when it is JSON.
    pub json: Option<Value>,
    /// `Sforce-Query-Options: batchSize=N`, when sent.
    pub batch_size: Option<usize>,
    /// The attempt's secret: ids derive from it.
    pub secret: String,
    /// Milliseconds since the epoch (job dates).
    pub now_ms: i64,
}

impl Call {
    /// The call of built-in operation `operation_id` of `integration` made by `req`
    /// (`rel`: its path after the integration), for the attempt whose secret is `secret`.
    pub fn of(
        req: &crate::http::Request,
        rel: &[String],
        integration: &str,
        operation_id: &str,
        secret: &str,
        now_ms: i64,
    ) -> Call {
        let batch_size = req.header("sforce-query-options").and_then(|v| {
            v.split([',', ';'])
                .filter_map(|p| p.trim().split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("batchSize"))
                .and_then(|(_, n)| n.trim().parse::<usize>().ok())
        });
        Call {
            integration: integration.to_string(),
            operation_id: operation_id.to_string(),
            rel: rel.to_vec(),
            query: req.query.clone(),
            body: req.body.clone(),
            json: req.json().ok().flatten().cloned(),
            batch_size,
            secret: secret.to_string(),
            now_ms,
        }
    }

    /// The API version of the path (`v59.0` → `59.0`).
    pub fn version(&self) -> String {
        self.rel
            .get(2)
            .map(|v| v.trim_start_matches(['v', 'V']).to_string())
            .unwrap_or_else(|| "59.0".into())
    }

    /// The path segments after `services/data/vNN.N/`.
    pub fn tail(&self) -> &[String] {
        self.rel.get(3..).unwrap_or(&[])
    }

    /// A query parameter's value.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The org as the state holds it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Org {
    /// How many ids were made (the next id derives from it).
    #[serde(default)]
    pub seq: u64,
    /// Object name → its records, oldest first (each with `Id`).
    #[serde(default)]
    pub records: BTreeMap<String, Vec<Map<String, Value>>>,
    /// Query cursor id → what it pages.
    #[serde(default)]
    pub cursors: BTreeMap<String, Cursor>,
    /// Bulk API 2.0 jobs by id.
    #[serde(default)]
    pub jobs: BTreeMap<String, Job>,
}

/// A query's pages: the query is run again for each page over the org as it is then.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cursor {
    pub soql: String,
    pub batch: usize,
}

/// One Bulk API 2.0 job (its state machine is in `bulk.rs`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Job {
    pub id: String,
    /// `ingest` or `query`.
    pub kind: String,
    pub operation: String,
    pub object: String,
    #[serde(default)]
    pub external_id: Option<String>,
    pub column_delimiter: String,
    pub line_ending: String,
    pub state: String,
    pub api_version: String,
    pub created_ms: i64,
    /// An ingest job's uploaded CSV, until it is processed.
    #[serde(default)]
    pub upload: Option<String>,
    /// A query job's SOQL.
    #[serde(default)]
    pub query: Option<String>,
    #[serde(default)]
    pub processed: u64,
    #[serde(default)]
    pub failed: u64,
    #[serde(default)]
    pub error_message: Option<String>,
    /// The uploaded columns (ingest) or the query's fields.
    #[serde(default)]
    pub header: Vec<String>,
    /// Ingest: `sf__Id`, `sf__Created` then the row; query: the result rows.
    #[serde(default)]
    pub rows: Vec<Vec<String>>,
    /// Ingest: `sf__Id`, `sf__Error` then the row.
    #[serde(default)]
    pub failures: Vec<Vec<String>>,
}

/// One record's failure (`statusCode`, as Collections and Composite report it).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordError {
    pub status_code: String,
    pub message: String,
    pub fields: Vec<String>,
}

impl RecordError {
    pub fn new(code: &str, message: impl Into<String>, fields: &[&str]) -> RecordError {
        RecordError {
            status_code: code.into(),
            message: message.into(),
            fields: fields.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// `{statusCode, message, fields}` (Collections results).
    pub fn collection(&self) -> Value {
        json!({"statusCode": self.status_code, "message": self.message, "fields": self.fields})
    }

    /// `{errorCode, message, fields}` (REST error arrays).
    pub fn rest(&self) -> Value {
        json!({"errorCode": self.status_code, "message": self.message, "fields": self.fields})
    }

    /// The HTTP status of a REST answer with this error.
    pub fn status(&self) -> u16 {
        match self.status_code.as_str() {
            "NOT_FOUND" => 404,
            "ENTITY_IS_DELETED" => 404,
            _ => 400,
        }
    }
}

/// Fields an object cannot be created without (the standard objects' required fields).
const REQUIRED: &[(&str, &[&str])] = &[
    ("account", &["Name"]),
    ("contact", &["LastName"]),
    ("lead", &["LastName", "Company"]),
    ("opportunity", &["Name", "StageName", "CloseDate"]),
    ("campaign", &["Name"]),
];

/// Fields no write may set.
const READ_ONLY: &[&str] = &[
    "Id",
    "CreatedDate",
    "CreatedById",
    "LastModifiedDate",
    "LastModifiedById",
    "SystemModstamp",
    "IsDeleted",
];

pub fn get_ci<'a>(m: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    m.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

impl Org {
    /// The org of the state value (absent: an empty org). A value that is not an org (an
    /// operation file's state wrote over the key) reads as an empty org.
    pub fn of(v: Option<&Value>) -> Org {
        v.and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// A new id with the key prefix of `object`, derived from the attempt's secret.
    pub fn new_id(&mut self, secret: &str, prefix: &str) -> String {
        self.seq += 1;
        let h = hmac_sha256(
            secret.as_bytes(),
            format!("salesforce id {}", self.seq).as_bytes(),
        );
        let mut b = [0u8; 12];
        b.copy_from_slice(&h[..12]);
        super::record_id(prefix, &b)
    }

    fn count(&self) -> usize {
        self.records.values().map(Vec::len).sum()
    }

    /// The stored name of `object` (the first spelling used), or `object` itself.
    fn object_name(&self, object: &str) -> String {
        self.records
            .keys()
            .find(|k| k.eq_ignore_ascii_case(object))
            .cloned()
            .unwrap_or_else(|| object.to_string())
    }

    /// The records of `object` (none when there are none).
    pub fn of_object(&self, object: &str) -> &[Map<String, Value>] {
        self.records
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(object))
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[])
    }

    /// (object, index) of the record with id `id` (15 or 18 characters).
    fn find(&self, id: &str) -> Option<(String, usize)> {
        if id.len() != 15 && id.len() != 18 {
            return None;
        }
        for (obj, recs) in &self.records {
            if let Some(i) = recs.iter().position(|r| {
                r.get("Id")
                    .and_then(Value::as_str)
                    .is_some_and(|x| x == id || (id.len() == 15 && x.starts_with(id)))
            }) {
                return Some((obj.clone(), i));
            }
        }
        None
    }

    /// The record with id `id`, of `object` when given.
    pub fn get(&self, object: Option<&str>, id: &str) -> Option<&Map<String, Value>> {
        let (obj, i) = self.find(id)?;
        if object.is_some_and(|o| !o.eq_ignore_ascii_case(&obj)) {
            return None;
        }
        self.records.get(&obj).and_then(|v| v.get(i))
    }

    fn clean(fields: &Map<String, Value>) -> Result<Map<String, Value>, RecordError> {
        let mut out = Map::new();
        for (k, v) in fields {
            if k == "attributes" {
                continue;
            }
            if READ_ONLY.iter().any(|r| r.eq_ignore_ascii_case(k)) {
                return Err(RecordError::new(
                    "INVALID_FIELD_FOR_INSERT_UPDATE",
                    format!("Unable to create/update fields: {k}. Please check the security settings of this field and verify that it is read/write for your profile or permission set."),
                    &[k],
                ));
            }
            if v.is_object() || v.is_array() {
                return Err(RecordError::new(
                    "INVALID_FIELD",
                    format!("Cannot deserialize instance of a field value from a JSON {}: `{k}` takes a text, number, boolean or null", crate::util::json::type_name(v)),
                    &[k],
                ));
            }
            out.insert(k.clone(), v.clone());
        }
        Ok(out)
    }

    /// Create a record of `object`; its id.
    pub fn create(
        &mut self,
        secret: &str,
        object: &str,
        fields: &Map<String, Value>,
    ) -> Result<String, RecordError> {
        if object.is_empty()
            || !object
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(RecordError::new(
                "NOT_FOUND",
                format!("The requested resource does not exist: sObject type '{object}' is not supported."),
                &[],
            ));
        }
        if get_ci(fields, "Id").is_some() {
            return Err(RecordError::new(
                "INVALID_FIELD",
                "Record ID: cannot specify Id in an insert call",
                &["Id"],
            ));
        }
        let clean = Org::clean(fields)?;
        let lower = object.to_ascii_lowercase();
        if let Some((_, req)) = REQUIRED.iter().find(|(o, _)| *o == lower) {
            let missing: Vec<&str> = req
                .iter()
                .copied()
                .filter(|f| get_ci(&clean, f).is_none_or(|v| v.is_null() || v.as_str() == Some("")))
                .collect();
            if !missing.is_empty() {
                return Err(RecordError::new(
                    "REQUIRED_FIELD_MISSING",
                    format!("Required fields are missing: [{}]", missing.join(", ")),
                    &missing,
                ));
            }
        }
        if self.count() >= MAX_RECORDS {
            return Err(RecordError::new(
                "STORAGE_LIMIT_EXCEEDED",
                format!(
                    "storage limit exceeded: the default org holds at most {MAX_RECORDS} records"
                ),
                &[],
            ));
        }
        let prefix = super::key_prefix_of_path(&["sobjects".to_string(), object.to_string()]);
        let id = self.new_id(secret, prefix);
        let mut rec = Map::new();
        rec.insert("Id".into(), json!(id));
        rec.extend(clean);
        let name = self.object_name(object);
        self.records.entry(name).or_default().push(rec);
        Ok(id)
    }

    /// Update the record `id` (of `object` when given) with `fields`.
    pub fn update(
        &mut self,
        object: Option<&str>,
        id: &str,
        fields: &Map<String, Value>,
    ) -> Result<(), RecordError> {
        let mut fields = fields.clone();
        fields.retain(|k, _| !k.eq_ignore_ascii_case("id"));
        let clean = Org::clean(&fields)?;
        let Some((obj, i)) = self
            .find(id)
            .filter(|(o, _)| object.is_none_or(|x| x.eq_ignore_ascii_case(o)))
        else {
            return Err(not_found(id));
        };
        let rec = &mut self.records.get_mut(&obj).expect("found")[i];
        for (k, v) in clean {
            let key = rec
                .keys()
                .find(|x| x.eq_ignore_ascii_case(&k))
                .cloned()
                .unwrap_or(k);
            rec.insert(key, v);
        }
        Ok(())
    }

    /// Upsert by external id `field` = `value`: (id, created).
    pub fn upsert(
        &mut self,
        secret: &str,
        object: &str,
        field: &str,
        value: &Value,
        fields: &Map<String, Value>,
    ) -> Result<(String, bool), RecordError> {
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let want = text(value);
        if want.is_empty() || value.is_null() {
            return Err(RecordError::new(
                "MISSING_ARGUMENT",
                format!("{field} not specified"),
                &[field],
            ));
        }
        let hits: Vec<String> = self
            .of_object(object)
            .iter()
            .filter(|r| get_ci(r, field).is_some_and(|v| text(v) == want))
            .filter_map(|r| r.get("Id").and_then(Value::as_str).map(str::to_string))
            .collect();
        let mut fields = fields.clone();
        fields.retain(|k, _| !k.eq_ignore_ascii_case(field));
        match hits.as_slice() {
            [] => {
                let mut f = fields;
                f.insert(field.to_string(), value.clone());
                self.create(secret, object, &f).map(|id| (id, true))
            }
            [id] => self
                .update(Some(object), id, &fields)
                .map(|()| (id.clone(), false)),
            _ => Err(RecordError::new(
                "DUPLICATE_EXTERNAL_ID",
                format!("{field}: more than one record found for external id field: {hits:?}"),
                &[field],
            )),
        }
    }

    /// Delete the record `id`.
    pub fn delete(&mut self, object: Option<&str>, id: &str) -> Result<(), RecordError> {
        let Some((obj, i)) = self
            .find(id)
            .filter(|(o, _)| object.is_none_or(|x| x.eq_ignore_ascii_case(o)))
        else {
            return Err(not_found(id));
        };
        self.records.get_mut(&obj).expect("found").remove(i);
        Ok(())
    }

    /// Run `q` over the org: every record it selects, projected.
    pub fn select(&self, q: &soql::Soql, version: &str) -> Vec<Map<String, Value>> {
        q.run(self.of_object(&q.object), version)
    }
}

/// A path segment percent-decoded (`+` is a plus in a path).
pub fn decode_segment(s: &str) -> String {
    crate::contract::template::parse_query(&format!("v={}", s.replace('+', "%2B")))
        .pop()
        .map(|(_, v)| v)
        .unwrap_or_default()
}

fn not_found(id: &str) -> RecordError {
    if id.len() != 15 && id.len() != 18 {
        return RecordError::new(
            "MALFORMED_ID",
            format!("malformed id {id}: expected 15 or 18 characters"),
            &["Id"],
        );
    }
    RecordError::new("ENTITY_IS_DELETED", "entity is deleted", &[])
}

fn response(status: u16, body: Option<Value>) -> NativeResponse {
    NativeResponse {
        status,
        headers: Vec::new(),
        body,
    }
}

/// A REST error answer (`[{"message","errorCode","fields"}]`), the agent's mistake.
pub fn rest_error(status: u16, code: &str, message: &str) -> Answer {
    let mut a = Answer::plain(
        response(
            status,
            Some(json!([{"message": message, "errorCode": code, "fields": []}])),
        ),
        json!({}),
    );
    a.input_error = true;
    a
}

/// A REST error answer of one record's failure, the agent's mistake.
pub fn record_error_answer(e: &RecordError) -> Answer {
    let mut a = Answer::plain(response(e.status(), Some(json!([e.rest()]))), json!({}));
    a.input_error = true;
    a
}

/// A JSON answer.
pub fn ok(status: u16, body: Value) -> Answer {
    Answer::plain(response(status, Some(body)), json!({}))
}

/// An answer without a body.
pub fn ok_empty(status: u16) -> Answer {
    Answer::plain(response(status, None), json!({}))
}
