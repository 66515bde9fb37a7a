//! Wire dialects (docs/src/concepts/operations.md, docs/src/reference/profiles.md, docs/src/reference/mock-definition.md#the-envelope-rule, docs/src/concepts/errors.md): one file per profile, driven by the profile JSON
//! files in `profiles/` that are embedded in the binary.
//!
//! A [`Profile`] owns everything that depends on the wire format of an integration:
//! - request normalisation before matching (Salesforce `POST ?_HttpMethod=PATCH`),
//! - write classification (read methods, Salesforce composite with a non-GET subrequest),
//! - the built-in operation templates (Salesforce sobject get/create/update/upsert/delete,
//!   query, queryAll, composite…) that make a request a *known* operation without a file,
//! - rendering a mock's adapter envelope `{"status","data","headers"?}` into a native
//!   response, and the native error bodies of input errors and blocked writes,
//! - the synthetic `simulate` answers for blocked writes (dry-run).
//!
//! Harness errors are not native: every HTTP profile answers them the same way
//! ([`harness_response`], docs/src/concepts/errors.md).
//!
//! The profile JSON format (`profiles/<name>.json`):
//! ```text
//! { "profile": "<name>", "description": "…",
//!   "write": { "read_methods": ["GET",…], "method_override_query"?: "_HttpMethod",
//!              "composite"?: [ { "path_suffix": ["composite"], "subrequests": "compositeRequest", "method": "method" } ] },
//!   "errors": { "input_error": { "status"?: 400, "body": <template>, "error_codes"?: { "default": "…", "422": "…" } },
//!               "blocked_write": { "status": 403, "body": <template> } },
//!   "templates": [ { "operation_id", "description"?, "match": {MatchSpec}, "write"?: bool } ],
//!   "simulate": { "operations"?: { "<operation_id>": <envelope> }, "default"?: { "<METHOD>": <envelope> } } }
//! ```
//! In templates a string that is exactly `"{message}"`, `"{details}"`, `"{fields}"`,
//! `"{error_code}"` or `"{fake_id}"` is replaced by that value (details and fields are arrays);
//! nothing else is interpolated.

pub mod envelope;
pub mod mcp;
pub mod rest;
pub mod salesforce;
mod wire;

pub use wire::Wire;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::contract::MatchSpec;
use crate::error::{HarnessCode, HarnessError, InputError};
use crate::http::NativeResponse;

/// The names of the HTTP profiles this build embeds.
pub const BUILTIN: &[&str] = &["rest", "salesforce"];

/// A profile file as written (see the module doc).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    pub profile: String,
    #[serde(default)]
    pub description: String,
    pub write: WriteRules,
    pub errors: ErrorShapes,
    #[serde(default)]
    pub templates: Vec<Template>,
    #[serde(default)]
    pub simulate: Simulate,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteRules {
    /// Methods that are reads; every other method is a write.
    pub read_methods: Vec<String>,
    /// A query parameter that overrides the method of a POST (Salesforce `_HttpMethod`).
    #[serde(default)]
    pub method_override_query: Option<String>,
    /// Batch endpoints whose write flag depends on their subrequests.
    #[serde(default)]
    pub composite: Vec<CompositeRule>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompositeRule {
    /// The last path segments of the endpoint (`["composite"]`, `["composite","batch"]`).
    pub path_suffix: Vec<String>,
    /// The body member holding the subrequests array.
    pub subrequests: String,
    /// The member of a subrequest holding its method.
    pub method: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorShapes {
    pub input_error: ErrorShape,
    pub blocked_write: ErrorShape,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorShape {
    /// Fixed status; input errors use the error's own status (400, or 422) when absent.
    #[serde(default)]
    pub status: Option<u16>,
    pub body: Value,
    /// `"default"` and per-status (`"422"`) values for `{error_code}`.
    #[serde(default)]
    pub error_codes: BTreeMap<String, String>,
}

/// A built-in operation template: a request that matches it is a known operation even
/// without an operation file (a replayed call to it without a mock is `no_mock`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    pub operation_id: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(rename = "match")]
    pub match_spec: MatchSpec,
    #[serde(default)]
    pub write: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Simulate {
    #[serde(default)]
    pub operations: BTreeMap<String, Value>,
    #[serde(default)]
    pub default: BTreeMap<String, Value>,
}

/// One wire dialect, parsed once from its embedded JSON.
#[derive(Debug)]
pub struct Profile {
    pub file: ProfileFile,
}

impl Profile {
    /// The embedded profile called `name` (`rest`, `salesforce`), parsed once.
    pub fn builtin(name: &str) -> Option<Arc<Profile>> {
        static REST: OnceLock<Arc<Profile>> = OnceLock::new();
        static SALESFORCE: OnceLock<Arc<Profile>> = OnceLock::new();
        let (cell, text) = match name {
            "rest" => (&REST, rest::PROFILE_JSON),
            "salesforce" => (&SALESFORCE, salesforce::PROFILE_JSON),
            _ => return None,
        };
        Some(
            cell.get_or_init(|| {
                Arc::new(Profile::parse(text).expect("embedded profile JSON is valid"))
            })
            .clone(),
        )
    }

    /// Parse a profile file (a project may ship its own).
    pub fn parse(text: &str) -> Result<Profile, String> {
        let file: ProfileFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        Ok(Profile { file })
    }

    pub fn name(&self) -> &str {
        &self.file.profile
    }

    /// The dialect this wire profile speaks, when its file names a known one (a project may
    /// ship a profile file of its own under another name: then `None`, and the generic REST
    /// rules apply).
    pub fn kind(&self) -> Option<crate::contract::ProfileKind> {
        crate::contract::ProfileKind::parse(self.name())
    }

    pub fn templates(&self) -> &[Template] {
        &self.file.templates
    }

    /// The method a request stands for. Salesforce clients that cannot send PATCH send
    /// `POST ?_HttpMethod=PATCH`: the override parameter is removed from `query` and its value
    /// becomes the method used for matching and write classification.
    pub fn effective_method(&self, method: &str, query: &mut Vec<(String, String)>) -> String {
        if let Some(param) = &self.file.write.method_override_query {
            if method.eq_ignore_ascii_case("POST") {
                if let Some(i) = query.iter().position(|(k, _)| k == param) {
                    let (_, v) = query.remove(i);
                    let v = v.trim().to_ascii_uppercase();
                    if !v.is_empty() {
                        return v;
                    }
                }
            }
        }
        method.to_ascii_uppercase()
    }

    /// Profile write classification of a request (docs/src/reference/operation-files.md `write` default): every method but
    /// the read methods is a write; a composite endpoint is a write when any subrequest is not
    /// a read (a composite body that cannot be read is treated as a write: fail closed).
    pub fn is_write(&self, method: &str, segments: &[String], body: Option<&Value>) -> bool {
        let rules = &self.file.write;
        let is_read = |m: &str| rules.read_methods.iter().any(|r| r.eq_ignore_ascii_case(m));
        if !is_read(method) {
            for c in &rules.composite {
                if method.eq_ignore_ascii_case("POST") && segments.ends_with(&c.path_suffix) {
                    let subs = body
                        .and_then(|b| b.get(&c.subrequests))
                        .and_then(Value::as_array);
                    return match subs {
                        Some(subs) => subs.iter().any(|s| {
                            s.get(&c.method)
                                .and_then(Value::as_str)
                                .map(|m| !is_read(m))
                                .unwrap_or(true)
                        }),
                        None => true,
                    };
                }
            }
            return true;
        }
        false
    }

    /// Render a mock's adapter envelope into the native response (docs/src/reference/mock-definition.md#the-envelope-rule). A result that is
    /// not an envelope is a harness error `output_schema_violation`.
    pub fn render(&self, result: &Value) -> Result<NativeResponse, HarnessError> {
        render_envelope(result)
    }

    /// The native body of an input error (docs/src/concepts/errors.md): status 400 (422 for an idempotency key
    /// reused with other arguments, docs/src/reference/operation-files.md#idempotency).
    pub fn input_error(&self, e: &InputError) -> NativeResponse {
        let shape = &self.file.errors.input_error;
        let status = shape.status.unwrap_or(e.status);
        let code = shape
            .error_codes
            .get(&status.to_string())
            .or_else(|| shape.error_codes.get("default"))
            .cloned()
            .unwrap_or_default();
        let fields: Vec<Value> = e
            .path
            .as_deref()
            .and_then(field_of_path)
            .map(|f| vec![Value::String(f)])
            .unwrap_or_default();
        let vars = Vars {
            message: &e.message,
            details: &e.details,
            fields: &fields,
            error_code: &code,
            fake_id: "",
        };
        NativeResponse {
            status,
            headers: Vec::new(),
            body: Some(fill(&shape.body, &vars)),
        }
    }

    /// The native answer to a write that was blocked (docs/src/reference/modes.md, docs/src/concepts/errors.md `block`).
    pub fn blocked_write(&self, message: &str) -> NativeResponse {
        let shape = &self.file.errors.blocked_write;
        let vars = Vars {
            message,
            details: &[],
            fields: &[],
            error_code: "",
            fake_id: "",
        };
        NativeResponse {
            status: shape.status.unwrap_or(403),
            headers: Vec::new(),
            body: Some(fill(&shape.body, &vars)),
        }
    }

    /// The synthetic success of a simulated write (docs/src/concepts/errors.md `simulate`), as an envelope:
    /// by operation id first, then by method. `None` when the profile has none.
    pub fn simulate(&self, operation_id: Option<&str>, method: &str) -> Option<Value> {
        let fake_id = match self.kind() {
            Some(crate::contract::ProfileKind::Salesforce) => salesforce::fake_id(),
            _ => rest::fake_id(),
        };
        self.simulate_with_id(operation_id, method, &fake_id)
    }

    /// [`Profile::simulate`] with the given `{fake_id}` (the server makes it deterministic).
    pub fn simulate_with_id(
        &self,
        operation_id: Option<&str>,
        method: &str,
        fake_id: &str,
    ) -> Option<Value> {
        let s = &self.file.simulate;
        let tpl = operation_id
            .and_then(|id| s.operations.get(id))
            .or_else(|| s.default.get(&method.to_ascii_uppercase()))?;
        let vars = Vars {
            message: "",
            details: &[],
            fields: &[],
            error_code: "",
            fake_id,
        };
        Some(fill(tpl, &vars))
    }
}

/// The top-level field an input path names (`contact.phone` → `contact`), for Salesforce
/// `fields`.
fn field_of_path(path: &str) -> Option<String> {
    let first = path
        .trim_start_matches('/')
        .split(['.', '/'])
        .next()
        .unwrap_or("");
    if first.is_empty() {
        None
    } else {
        Some(first.to_string())
    }
}

struct Vars<'a> {
    message: &'a str,
    details: &'a [String],
    fields: &'a [Value],
    error_code: &'a str,
    fake_id: &'a str,
}

/// Replace the placeholder strings of a template (see the module doc).
fn fill(tpl: &Value, vars: &Vars<'_>) -> Value {
    match tpl {
        Value::String(s) => match s.as_str() {
            "{message}" => Value::String(vars.message.to_string()),
            "{details}" => Value::Array(
                vars.details
                    .iter()
                    .map(|d| Value::String(d.clone()))
                    .collect(),
            ),
            "{fields}" => Value::Array(vars.fields.to_vec()),
            "{error_code}" => Value::String(vars.error_code.to_string()),
            "{fake_id}" => Value::String(vars.fake_id.to_string()),
            _ => tpl.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(|v| fill(v, vars)).collect()),
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), fill(v, vars))).collect())
        }
        _ => tpl.clone(),
    }
}

/// Headers the server owns (framing): an envelope's values for them are not sent.
const RESERVED_HEADERS: &[&str] = &[
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

/// Why an envelope header cannot go on the wire (an invalid name or value), or `None`.
/// The envelope rule itself (status, data, headers of strings) is
/// [`envelope::envelope_problem`], shared with `check`.
pub fn header_problem(name: &str, value: &str) -> Option<String> {
    if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Some(format!(
            "envelope header name `{name}` is not a valid HTTP header name"
        ));
    }
    if hyper::header::HeaderValue::from_str(value).is_err() {
        return Some(format!(
            "envelope header `{name}` has a value that is not valid in HTTP"
        ));
    }
    None
}

/// Whether an answer with `status` carries no content (`1xx`, `204`, `304`: RFC 9110): a
/// rendered envelope's `data` is not sent, and a real answer's body is not its `data`.
pub fn no_content(status: u16) -> bool {
    status < 200 || status == 204 || status == 304
}

/// Render an adapter envelope (docs/src/reference/mock-definition.md#the-envelope-rule): HTTP status `status`, JSON body `data` (none when
/// `data` is absent or the status is 204/304/1xx), plus the extra headers (those that frame
/// the message — `Content-Length`, `Transfer-Encoding`, `Connection`… — are the server's and
/// are dropped). A result that breaks the envelope rule is the harness error
/// `output_schema_violation`.
pub fn render_envelope(result: &Value) -> Result<NativeResponse, HarnessError> {
    if let Some(p) = envelope::envelope_problem(crate::contract::ProfileKind::Rest, None, result) {
        return Err(HarnessError::new(
            HarnessCode::OutputSchemaViolation,
            format!("the result {p}"),
        ));
    }
    let status = result["status"].as_u64().unwrap_or(200) as u16;
    let body = if no_content(status) {
        None
    } else {
        result.get("data").cloned()
    };
    let mut headers = Vec::new();
    if let Some(h) = result.get("headers").and_then(Value::as_object) {
        for (k, v) in h {
            let v = v.as_str().unwrap_or_default();
            if let Some(p) = header_problem(k, v) {
                return Err(HarnessError::new(HarnessCode::OutputSchemaViolation, p));
            }
            if !RESERVED_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                headers.push((k.clone(), v.to_string()));
            }
        }
    }
    Ok(NativeResponse {
        status,
        headers,
        body,
    })
}

/// A harness error on the wire (docs/src/concepts/errors.md), the same for every HTTP profile: HTTP 500 (410
/// for `attempt_ended`: the attempt is gone), `Understudy-Error: <code>`, body
/// `{"understudy_error":{"kind":"harness_error","code","message"}}`.
pub fn harness_response(e: &HarnessError) -> NativeResponse {
    NativeResponse {
        status: if e.code == crate::error::HarnessCode::AttemptEnded {
            410
        } else {
            500
        },
        headers: vec![("Understudy-Error".into(), e.code.as_str().into())],
        body: Some(harness_body(e)),
    }
}

/// The JSON body of a harness error (docs/src/concepts/errors.md).
pub fn harness_body(e: &HarnessError) -> Value {
    json!({ "understudy_error": {
        "kind": "harness_error",
        "code": e.code.as_str(),
        "message": e.message,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sf() -> Arc<Profile> {
        Profile::builtin("salesforce").unwrap()
    }
    fn rest() -> Arc<Profile> {
        Profile::builtin("rest").unwrap()
    }
    fn segs(p: &str) -> Vec<String> {
        p.split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn embedded_profiles_parse() {
        for name in BUILTIN {
            let p = Profile::builtin(name).unwrap();
            assert_eq!(p.name(), *name);
        }
        assert!(Profile::builtin("nope").is_none());
        let ids: Vec<_> = sf()
            .templates()
            .iter()
            .map(|t| t.operation_id.clone())
            .collect();
        for id in [
            "sobject_get",
            "sobject_create",
            "sobject_update",
            "sobject_upsert",
            "sobject_delete",
            "query",
            "query_all",
            "composite",
        ] {
            assert!(ids.contains(&id.to_string()), "{id}");
            assert!(crate::contract::valid_operation_id(id));
        }
    }

    #[test]
    fn envelope_renders_status_data_headers() {
        let r = render_envelope(
            &json!({"status": 201, "data": {"id": "1"}, "headers": {"Location": "/x"}}),
        )
        .unwrap();
        assert_eq!(r.status, 201);
        assert_eq!(r.body, Some(json!({"id": "1"})));
        assert_eq!(r.headers, vec![("Location".to_string(), "/x".to_string())]);
    }

    #[test]
    fn framing_headers_are_the_servers() {
        let r = render_envelope(
            &json!({"status": 200, "data": 1, "headers": {"Content-Length": "3", "X-A": "b"}}),
        )
        .unwrap();
        assert_eq!(r.headers, vec![("X-A".to_string(), "b".to_string())]);
    }

    #[test]
    fn no_body_for_204_or_absent_data() {
        let r = render_envelope(&json!({"status": 204, "data": null})).unwrap();
        assert_eq!(r.body, None);
        let r = render_envelope(&json!({"status": 200})).unwrap();
        assert_eq!(r.body, None);
        // data: null with 200 is a JSON null body, not "no body".
        let r = render_envelope(&json!({"status": 200, "data": null})).unwrap();
        assert_eq!(r.body, Some(Value::Null));
    }

    #[test]
    fn non_envelopes_are_harness_errors() {
        for bad in [
            json!([{"Id": "001"}]),
            json!({"totalSize": 1, "records": []}),
            json!({"status": "200"}),
            json!({"status": 700}),
            json!({"status": 200, "headers": {"X": 1}}),
            json!({"status": 200, "headers": {"bad name": "x"}}),
            json!({"status": 200, "headers": {"X": "line\nbreak"}}),
            json!({"status": 200, "data": 1, "extra": true}),
        ] {
            let e = render_envelope(&bad).unwrap_err();
            assert_eq!(e.code, HarnessCode::OutputSchemaViolation, "{bad}");
        }
    }

    #[test]
    fn salesforce_input_error_shape() {
        let e = InputError::new("Phone: is required").at("contact.phone");
        let r = sf().input_error(&e);
        assert_eq!(r.status, 400);
        assert_eq!(
            r.body.unwrap(),
            json!([{"message": "Phone: is required", "errorCode": "INVALID_FIELD", "fields": ["contact"]}])
        );
        let mut e = InputError::new("key reused");
        e.status = 422;
        let r = sf().input_error(&e);
        assert_eq!(r.status, 422);
        assert_eq!(r.body.unwrap()[0]["fields"], json!([]));
    }

    #[test]
    fn rest_input_error_shape() {
        let mut e = InputError::new("bad");
        e.details = vec!["/a: wrong".into()];
        let r = rest().input_error(&e);
        assert_eq!(r.status, 400);
        assert_eq!(
            r.body.unwrap(),
            json!({"error": {"message": "bad", "details": ["/a: wrong"]}})
        );
    }

    #[test]
    fn write_classification() {
        let r = rest();
        assert!(!r.is_write("GET", &[], None));
        assert!(!r.is_write("HEAD", &[], None));
        assert!(r.is_write("POST", &[], None));
        assert!(r.is_write("DELETE", &[], None));
        let s = sf();
        let comp = segs("/services/data/v59.0/composite");
        let reads =
            json!({"compositeRequest": [{"method": "GET", "url": "/x", "referenceId": "a"}]});
        let mixed = json!({"compositeRequest": [{"method": "GET"}, {"method": "PATCH"}]});
        assert!(!s.is_write("POST", &comp, Some(&reads)));
        assert!(s.is_write("POST", &comp, Some(&mixed)));
        assert!(s.is_write("POST", &comp, None));
        let batch = segs("/services/data/v59.0/composite/batch");
        let b = json!({"batchRequests": [{"method": "GET"}]});
        assert!(!s.is_write("POST", &batch, Some(&b)));
        assert!(s.is_write("POST", &segs("/services/data/v59.0/sobjects/Contact"), None));
    }

    #[test]
    fn salesforce_method_override() {
        let s = sf();
        let mut q = vec![("_HttpMethod".to_string(), "patch".to_string())];
        assert_eq!(s.effective_method("POST", &mut q), "PATCH");
        assert!(q.is_empty());
        let mut q = vec![("_HttpMethod".to_string(), "PATCH".to_string())];
        assert_eq!(s.effective_method("GET", &mut q), "GET");
        let mut q = vec![("_HttpMethod".to_string(), "PATCH".to_string())];
        assert_eq!(rest().effective_method("post", &mut q), "POST");
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn harness_error_wire_shape() {
        let e = HarnessError::new(HarnessCode::NoMock, "no mock");
        let r = harness_response(&e);
        assert_eq!(r.status, 500);
        assert_eq!(
            r.headers,
            vec![("Understudy-Error".into(), "no_mock".into())]
        );
        assert_eq!(
            r.body.unwrap(),
            json!({"understudy_error": {"kind": "harness_error", "code": "no_mock", "message": "no mock"}})
        );
    }

    #[test]
    fn simulate_answers() {
        let v = sf().simulate(Some("sobject_create"), "POST").unwrap();
        assert_eq!(v["status"], 201);
        let id = v["data"]["id"].as_str().unwrap();
        assert_eq!(id.len(), 18);
        assert_eq!(v["data"]["success"], true);
        let v = sf().simulate(None, "DELETE").unwrap();
        assert_eq!(v, json!({"status": 204}));
        assert!(sf().simulate(None, "GET").is_none());
    }

    #[test]
    fn blocked_write_shape() {
        let r = sf().blocked_write("blocked by understudy");
        assert_eq!(r.status, 403);
        assert_eq!(r.body.unwrap()[0]["message"], "blocked by understudy");
    }

    #[test]
    fn envelope_of_native_response() {
        let r = NativeResponse {
            status: 500,
            headers: vec![("Understudy-Error".into(), "no_mock".into())],
            body: Some(json!({"a": 1})),
        };
        assert_eq!(r.to_envelope(), json!({"status": 500, "data": {"a": 1}}));
    }
}
