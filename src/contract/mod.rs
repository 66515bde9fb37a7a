//! Operation files (docs/src/reference/operation-files.md): the file model ([`OperationFile`]) and the [`ProfileKind`] it
//! is written for, match templates ([`template`]), RFC 6570 URI templates ([`uri_template`]),
//! the contract hash ([`hash`]) and the JSON Schema compiler every layer uses
//! ([`compile_schema`]). Nothing here knows the mock engine: loading a directory, the checks
//! and the compiled runtime form (`Operation`) are [`crate::operation`].

pub mod hash;
pub mod mock_text;
pub mod template;
pub mod uri_template;

pub use template::{CompiledMatch, Mismatch, RequestView};

pub use mock_text::MockText;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The wire dialect of an integration (docs/src/concepts/operations.md), as the project file names it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[schemars(description = "The wire dialect of an integration.")]
#[serde(rename_all = "lowercase")]
pub enum ProfileKind {
    Rest,
    Salesforce,
    Mcp,
}

impl ProfileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileKind::Rest => "rest",
            ProfileKind::Salesforce => "salesforce",
            ProfileKind::Mcp => "mcp",
        }
    }

    /// `rest` and `salesforce`: operations have a `match` and results are HTTP envelopes.
    pub fn is_http(self) -> bool {
        !matches!(self, ProfileKind::Mcp)
    }

    pub fn parse(s: &str) -> Option<ProfileKind> {
        match s {
            "rest" => Some(ProfileKind::Rest),
            "salesforce" => Some(ProfileKind::Salesforce),
            "mcp" => Some(ProfileKind::Mcp),
            _ => None,
        }
    }
}

/// A profile name as written (a config file, a command line): the three names, or an error
/// naming the unknown one.
impl std::str::FromStr for ProfileKind {
    type Err = String;

    fn from_str(s: &str) -> Result<ProfileKind, String> {
        ProfileKind::parse(s)
            .ok_or_else(|| format!("unknown profile `{s}`: expected rest, salesforce or mcp"))
    }
}

impl fmt::Display for ProfileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One operation file, `<operations dir>/<operation_id>.json`, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "understudy operation file")]
pub struct OperationFile {
    /// `[a-z0-9_.-]{1,128}`, equal to the file name without `.json`.
    #[schemars(regex(pattern = r"^[a-z0-9_.-]{1,128}$"), extend("not" = {"enum": [".", ".."]}))]
    pub operation_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MCP only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// HTTP profiles only.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_spec: Option<MatchSpec>,
    /// Whether a call changes the real system (default: the profile's rule — HTTP: every
    /// method but GET/HEAD/OPTIONS; MCP: unless `annotations.readOnlyHint` is true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<bool>,
    /// The JSON Schema of the input (default `{}`). Shared between the files that repeat it ([`share_schema`]).
    #[serde(
        default = "empty_schema",
        deserialize_with = "deserialize_schema",
        serialize_with = "serialize_schema"
    )]
    #[schemars(schema_with = "json_schema_value")]
    #[schemars(description = "The JSON Schema of the input (default `{}`).")]
    pub input_schema: Arc<Value>,
    /// The JSON Schema every answer's result must satisfy (default `{}`).
    #[serde(
        default = "empty_schema",
        deserialize_with = "deserialize_schema",
        serialize_with = "serialize_schema"
    )]
    #[schemars(schema_with = "json_schema_value")]
    pub output_schema: Arc<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<IdempotencySpec>,
    /// MCP only: as in `tools/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub annotations: Option<Value>,
    /// MCP only (docs/src/reference/mock-definition.md#the-envelope-rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        description = "MCP only: `structured` (the mock's result is the tool's structured output, the default) or `call_tool_result` (the whole CallToolResult)."
    )]
    pub result_form: Option<ResultForm>,
    /// The version-1 definition, kept as its text ([`mock_text`]) so `check` can report its
    /// problems with paths; parsed by `mock::model::Definition::from_value` when the
    /// operation's engine is compiled ([`crate::operation::Operation::engine`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Value>")]
    pub mock: Option<MockText>,
}

fn empty_schema() -> Arc<Value> {
    share_schema(Value::Object(Default::default()))
}

/// The schema of a member that holds a JSON Schema: an object or a boolean (what
/// [`compile_schema`] accepts; the draft is the value's own `$schema`, 2020-12 by default).
fn json_schema_value(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "A JSON Schema (draft 2020-12 unless its own `$schema` says otherwise); remote `$ref`s are not fetched.",
        "type": ["object", "boolean"],
    })
}

/// HTTP profiles: the request an operation answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    /// The HTTP method (`GET`, `POST`, …), compared case-insensitively.
    pub method: String,
    /// `/`-separated segments, each a literal, `{name}` (captured into the input) or `*`.
    pub path: String,
    /// Query parameter → value template (literal text with `{name}` captures).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    /// Header name (case-insensitive) → literal value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How the request's body is encoded when understudy itself sends this request
    /// (`understudy drift`, a real call of the testing API): `json` when absent. Not a
    /// matching condition: the proxy reads a body by its own `Content-Type`, and JSON, form
    /// and multipart bodies give the same input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<BodyEncoding>,
}

/// How an operation's request body is encoded on the wire (`match.body`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BodyEncoding {
    /// `application/json` (the default).
    Json,
    /// `application/x-www-form-urlencoded`: members as fields, arrays as repeated fields,
    /// nested objects in bracket names (`metadata[order]=1`).
    Form,
    /// `multipart/form-data`: one part per field, named as a form field would be.
    Multipart,
}

impl BodyEncoding {
    /// The form encoding a media type names (`application/x-www-form-urlencoded`,
    /// `multipart/form-data`, parameters and case ignored); `None` for any other type.
    pub fn form_of(media_type: &str) -> Option<BodyEncoding> {
        let base = media_type.split(';').next().unwrap_or("").trim();
        if base.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
            Some(BodyEncoding::Form)
        } else if base.eq_ignore_ascii_case("multipart/form-data") {
            Some(BodyEncoding::Multipart)
        } else {
            None
        }
    }
}

/// Where the idempotency key of a write comes from (docs/src/reference/operation-files.md#idempotency): exactly one of the two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [{"required": ["header"]}, {"required": ["input"]}]))]
#[schemars(
    description = "Where the idempotency key of a write comes from: exactly one of `header` and `input`."
)]
pub struct IdempotencySpec {
    /// A request header that carries the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::util::json::HEADER_NAME_PATTERN))]
    pub header: Option<String>,
    /// Dot path inside the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultForm {
    /// The mock's result is the tool's structured output (default).
    Structured,
    /// The mock's result is the whole CallToolResult, sent as it is.
    CallToolResult,
}

/// `operation_id`: `[a-z0-9_.-]{1,128}`. (Also refuses `.` and `..`, which are not file stems.)
pub fn valid_operation_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-')
        })
}

impl OperationFile {
    /// The contract hash of this operation under `profile` (docs/src/concepts/operations.md).
    pub fn contract_hash(&self, profile: ProfileKind) -> String {
        hash::contract_hash(
            profile,
            &self.operation_id,
            self.description.as_deref(),
            &self.input_schema,
            &self.output_schema,
        )
    }

    /// `write`, or the profile's default: HTTP profiles treat every method but
    /// GET/HEAD/OPTIONS as a write; MCP treats a tool as a write unless its annotations say
    /// `readOnlyHint: true`.
    pub fn is_write(&self, profile: ProfileKind) -> bool {
        if let Some(w) = self.write {
            return w;
        }
        if profile.is_http() {
            let method = self
                .match_spec
                .as_ref()
                .map(|m| m.method.trim().to_ascii_uppercase())
                .unwrap_or_default();
            !matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS")
        } else {
            let read_only = self
                .annotations
                .as_ref()
                .and_then(|a| a.get("readOnlyHint"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            !read_only
        }
    }

    /// The mock definition without its `contract_hash` member: what revisions store and
    /// [`hash::definition_hash`] identifies.
    pub fn definition_value(&self) -> Option<Value> {
        let mut v = self.mock.as_ref()?.parse();
        if let Value::Object(m) = &mut v {
            m.remove("contract_hash");
        }
        Some(v)
    }

    /// `mock.contract_hash` as written, if any.
    pub fn recorded_contract_hash(&self) -> Option<String> {
        self.mock.as_ref()?.contract_hash()
    }
}

/// Compile a JSON Schema the way understudy always does: draft from `$schema` (2020-12 by
/// default), `format` asserted. Remote `$ref`s are not fetched: such a schema fails here
/// with a message saying so.
pub fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    if !schema.is_object() && !schema.is_boolean() {
        return Err("a JSON Schema must be an object or a boolean".to_string());
    }
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| {
            let msg = e.to_string();
            // The schema is the instance the meta-schema checked: its instance path is the
            // place inside the user's schema.
            let path = e.instance_path().to_string();
            let remote = msg.contains("retriev") || msg.contains("Unresolvable") || msg.contains("resolve");
            let mut out = if path.is_empty() { msg } else { format!("at {path}: {msg}") };
            if remote {
                out.push_str(" (understudy does not fetch remote `$ref`s: inline the referenced schema under `$defs`)");
            }
            out
        })
}

/// [`compile_schema`] with one shared compiled copy per distinct schema (issue 20): operation
/// files repeat their schemas (every sObject read of a project answers the same envelope),
/// so thousands of files compile a handful of validators. Keyed by the schema's JSON text
/// (serde_json's maps are sorted: equal schemas have equal text); entries are weak, so a
/// schema no operation uses any more is freed.
pub fn compile_schema_shared(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    static CACHE: OnceLock<WeakCache<jsonschema::Validator>> = OnceLock::new();
    let key = serde_json::to_string(schema).unwrap_or_default();
    CACHE
        .get_or_init(Default::default)
        .get_or_try_insert(key, || compile_schema(schema))
}

/// One shared copy of each distinct schema value (issue 20): what [`OperationFile`]'s
/// `input_schema` and `output_schema` hold, so 10 000 files that repeat two schemas keep two
/// parsed copies (a parsed schema of ~1 KB of text takes ~6 KB of maps) instead of 20 000.
/// Keyed by the JSON text, as [`compile_schema_shared`].
pub fn share_schema(schema: Value) -> Arc<Value> {
    static CACHE: OnceLock<WeakCache<Value>> = OnceLock::new();
    let key = serde_json::to_string(&schema).unwrap_or_default();
    CACHE
        .get_or_init(Default::default)
        .get_or_try_insert(key, || Ok::<_, std::convert::Infallible>(schema))
        .unwrap_or_else(|e| match e {})
}

/// `input_schema` / `output_schema` as read: through [`share_schema`].
fn deserialize_schema<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Arc<Value>, D::Error> {
    Value::deserialize(d).map(share_schema)
}

/// A shared schema written as the value it is.
fn serialize_schema<S: serde::Serializer>(schema: &Arc<Value>, s: S) -> Result<S::Ok, S::Error> {
    schema.as_ref().serialize(s)
}

/// Key → one shared value, held weakly: a value no user holds any more is freed, and its
/// entry pruned once the map has doubled since the last pruning.
struct WeakCache<T> {
    map: Mutex<(HashMap<String, Weak<T>>, usize)>,
}

impl<T> Default for WeakCache<T> {
    fn default() -> Self {
        WeakCache {
            map: Mutex::new((HashMap::new(), 0)),
        }
    }
}

impl<T> WeakCache<T> {
    /// The value of `key`, made by `make` (outside the lock) when there is none alive.
    fn get_or_try_insert<E>(
        &self,
        key: String,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        if let Some(v) = lock(&self.map).0.get(&key).and_then(Weak::upgrade) {
            return Ok(v);
        }
        let v = Arc::new(make()?);
        let mut g = lock(&self.map);
        let (map, pruned_at) = &mut *g;
        if let Some(other) = map.get(&key).and_then(Weak::upgrade) {
            return Ok(other);
        }
        map.insert(key, Arc::downgrade(&v));
        if map.len() > 2 * (*pruned_at).max(512) {
            map.retain(|_, w| w.strong_count() > 0);
            *pruned_at = map.len();
        }
        Ok(v)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The file stem of an operation file (`lookup.json` → `lookup`), when it is one.
pub(crate) fn json_stem(file: &Path) -> Option<String> {
    if file.extension().is_some_and(|e| e == "json") {
        file.file_stem().map(|s| s.to_string_lossy().into_owned())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compile_schema_errors_are_clear() {
        let e = compile_schema(&json!({"$ref": "https://example.com/schemas/contact.json"}))
            .unwrap_err();
        assert!(e.contains("remote"), "{e}");
        let e = compile_schema(&json!({"properties": {"a": {"type": "strin"}}})).unwrap_err();
        assert!(e.starts_with("at /properties/a/type: "), "{e}");
        assert!(compile_schema(&json!([1])).is_err());
        let v = compile_schema(&json!({"type": "string", "format": "date-time"})).unwrap();
        assert!(!v.is_valid(&json!("tomorrow")));
        assert!(v.is_valid(&json!("2025-01-01T00:00:00Z")));
        assert!(
            compile_schema(&json!({"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a"}))
                .is_ok()
        );
    }
}
