//! Operation files (SPEC 2.2): the file model ([`OperationFile`]), loading ([`load`]), match
//! templates ([`template`]), the contract hash ([`hash`]), and the compiled runtime form every
//! later stage uses ([`Operation`], built once per file by [`Operation::compile`] or
//! [`load_integration`]).

pub mod hash;
pub mod load;
pub mod template;

pub use load::{LoadedOperation, Problem};
pub use template::{CompiledMatch, Mismatch, RequestView};

use crate::config::{IntegrationConfig, ProfileKind};
use crate::mock::eval::Engine;
use crate::mock::model::Definition;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One operation file, `<operations dir>/<operation_id>.json`, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationFile {
    pub operation_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MCP only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// HTTP profiles only.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_spec: Option<MatchSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<bool>,
    #[serde(default = "empty_schema")]
    pub input_schema: Value,
    #[serde(default = "empty_schema")]
    pub output_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<IdempotencySpec>,
    /// MCP only: as in `tools/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// MCP only (SPEC 5.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_form: Option<ResultForm>,
    /// The version-1 definition, kept raw here so `check` can report its problems with paths;
    /// parsed by [`crate::mock::model::Definition::from_value`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mock: Option<Value>,
}

fn empty_schema() -> Value {
    Value::Object(Default::default())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    pub method: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// Where the idempotency key of a write comes from (SPEC 5.4): exactly one of the two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdempotencySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// Dot path inside the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The contract hash of this operation under `profile` (SPEC section 1).
    pub fn contract_hash(&self, profile: &str) -> String {
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
        let mut v = self.mock.clone()?;
        if let Value::Object(m) = &mut v {
            m.remove("contract_hash");
        }
        Some(v)
    }

    /// `mock.contract_hash` as written, if any.
    pub fn recorded_contract_hash(&self) -> Option<&str> {
        self.mock.as_ref()?.get("contract_hash")?.as_str()
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

/// One operation compiled once for serving: matcher, validators and the file's mock engine.
///
/// Built by [`Operation::compile`] (one file) or [`load_integration`] (a whole integration,
/// after every `check`). Everything here is immutable and `Send + Sync`; share it with `Arc`.
/// A pinned revision whose definition differs from the file's compiles its own
/// [`Engine`] (`Definition::from_value` + `Engine::new`) and runs with
/// [`crate::mock::check::execute_with`].
pub struct Operation {
    /// The integration name from `understudy.json` (or the one given by the caller).
    pub integration: String,
    pub profile: ProfileKind,
    /// The operation file this came from.
    pub file: PathBuf,
    /// The file as written.
    pub op: OperationFile,
    /// The current contract hash (SPEC section 1) under `profile`.
    pub contract_hash: String,
    /// HTTP profiles: the compiled `match`. `None` for MCP.
    pub matcher: Option<CompiledMatch>,
    /// `write` or the profile's default ([`OperationFile::is_write`]).
    pub is_write: bool,
    pub input_validator: Arc<jsonschema::Validator>,
    pub output_validator: Arc<jsonschema::Validator>,
    /// The file's mock compiled; `None` when the file has no `mock` (a replayed call is then
    /// the harness error `no_mock`).
    pub engine: Option<Arc<Engine>>,
    /// `definition_hash` of the file's mock without `contract_hash`
    /// ([`OperationFile::definition_value`], not kept: rebuild it from [`Operation::op`] when
    /// needed); `None` when the file has no `mock`.
    pub definition_hash: Option<String>,
    /// The mock's `contract_hash` is present and differs from [`Operation::contract_hash`].
    pub stale: bool,
}

impl std::fmt::Debug for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operation")
            .field("integration", &self.integration)
            .field("profile", &self.profile)
            .field("file", &self.file)
            .field("operation_id", &self.op.operation_id)
            .field("contract_hash", &self.contract_hash)
            .field("is_write", &self.is_write)
            .field("has_mock", &self.engine.is_some())
            .field("stale", &self.stale)
            .finish_non_exhaustive()
    }
}

impl Operation {
    /// The operation id (the MCP tool name).
    pub fn id(&self) -> &str {
        &self.op.operation_id
    }

    /// `"<integration>/<operation_id>"`, the key of revisions, pins and variants.
    pub fn key(&self) -> String {
        format!("{}/{}", self.integration, self.op.operation_id)
    }

    /// Compile a parsed operation file. This does not run the checks of SPEC 3.4 (see
    /// [`crate::mock::check::check_operation`]); it fails only when something cannot be
    /// compiled at all (schema, match template, definition).
    pub fn compile(
        integration: &str,
        profile: ProfileKind,
        loaded: LoadedOperation,
    ) -> Result<Operation, Vec<Problem>> {
        Operation::compile_with(integration, profile, loaded, Default::default())
    }

    /// [`Operation::compile`] reusing what [`crate::mock::check::check_operation_hashed`]
    /// already compiled from the same file (anything missing there is compiled here).
    pub fn compile_with(
        integration: &str,
        profile: ProfileKind,
        loaded: LoadedOperation,
        pre: crate::mock::check::Compiled,
    ) -> Result<Operation, Vec<Problem>> {
        let LoadedOperation {
            file,
            op,
            contract_hash,
        } = loaded;
        let mut problems = Vec::new();
        let input = pre
            .input
            .map(Ok)
            .unwrap_or_else(|| compile_schema(&op.input_schema))
            .map_err(|e| problems.push(Problem::new(&file, "input_schema", e)))
            .ok();
        let output = pre
            .output
            .map(Ok)
            .unwrap_or_else(|| compile_schema(&op.output_schema))
            .map_err(|e| problems.push(Problem::new(&file, "output_schema", e)))
            .ok();
        let matcher = match (&op.match_spec, profile.is_http()) {
            (Some(m), true) => pre
                .matcher
                .map(Ok)
                .unwrap_or_else(|| CompiledMatch::compile(m))
                .map_err(|e| problems.push(Problem::new(&file, "match", e)))
                .ok(),
            (None, true) => {
                problems.push(Problem::new(
                    &file,
                    "match",
                    format!("missing: a `{profile}` operation needs a `match` {{method, path}}"),
                ));
                None
            }
            _ => None,
        };
        let definition_hash = op.mock.as_ref().map(hash::mock_definition_hash);
        let engine = match &op.mock {
            None => None,
            Some(_) if pre.engine.is_some() => pre.engine.map(Arc::new),
            Some(m) => match Definition::from_value(m) {
                Err(e) => {
                    problems.push(Problem::new(&file, "mock", e));
                    None
                }
                Ok(def) => match Engine::new(def) {
                    Ok(engine) => Some(Arc::new(engine)),
                    Err(e) => {
                        let path = e
                            .path()
                            .map(|p| format!("mock/{p}"))
                            .unwrap_or_else(|| "mock".into());
                        problems.push(Problem::new(&file, path, e.message()));
                        None
                    }
                },
            },
        };
        let (Some(input), Some(output)) = (input, output) else {
            return Err(problems);
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        let stale = op
            .recorded_contract_hash()
            .is_some_and(|h| h != contract_hash);
        Ok(Operation {
            integration: integration.to_string(),
            profile,
            is_write: op.is_write(profile),
            definition_hash,
            file,
            op,
            contract_hash,
            matcher,
            input_validator: Arc::new(input),
            output_validator: Arc::new(output),
            engine,
            stale,
        })
    }
}

/// Load, check (every SPEC 3.4 check plus the cross-file ones) and compile every operation of
/// one integration. Any problem refuses the whole integration, as `serve` refuses to start.
pub fn load_integration(integ: &IntegrationConfig) -> Result<Vec<Operation>, Vec<Problem>> {
    let profile = integ.profile.as_str();
    let (loaded, mut problems) = load::load_dir(&integ.operations, profile);
    // As `check_loaded`, keeping what the checks compiled for `Operation::compile_with`.
    let checked = load::par_map(loaded.iter().collect(), |l| {
        let mut c = crate::mock::check::Compiled::default();
        let p = crate::mock::check::check_operation_hashed(
            &l.op,
            profile,
            &l.file,
            Some(&l.contract_hash),
            Some(&mut c),
        );
        (p, c)
    });
    let mut pre = Vec::with_capacity(loaded.len());
    for (p, c) in checked {
        problems.extend(p);
        pre.push(c);
    }
    problems.extend(crate::mock::check::check_integration(&loaded, profile));
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut ops = Vec::with_capacity(loaded.len());
    let compiled = load::par_map(loaded.into_iter().zip(pre).collect(), |(l, c)| {
        Operation::compile_with(&integ.name, integ.profile, l, c)
    });
    for r in compiled {
        match r {
            Ok(op) => ops.push(op),
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        Ok(ops)
    } else {
        Err(problems)
    }
}

/// Every per-file check of each loaded operation, then the cross-file checks.
pub fn check_loaded(loaded: &[LoadedOperation], profile: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    for l in loaded {
        problems.extend(crate::mock::check::check_operation_hashed(
            &l.op,
            profile,
            &l.file,
            Some(&l.contract_hash),
            None,
        ));
    }
    problems.extend(crate::mock::check::check_integration(loaded, profile));
    problems
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
