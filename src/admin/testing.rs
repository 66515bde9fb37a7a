//! The tool-testing routes: the tool list, contracts and revisions per integration, generate,
//! check and save (append-only revisions), inline operations, and the revision history.
//!
//! **Save** (`POST /tools/{integration}/testing`, `action: "save"`), under the change lock of
//! [`crate::app::generations`] so a hot reload cannot change the contract between the hash check
//! and the append:
//! 1. `contract_hash` must be the operation's current contract hash, else 409
//!    `contract_changed` with the hash sent, the current one and the current contract — a
//!    definition checked against an old contract is never relabelled as current;
//! 2. the definition (its `contract_hash` member is optional; when present it must be the
//!    current one) is checked like an operation file's mock (docs/src/reference/mock-definition.md#checks-and-limits: limits, variants,
//!    every example evaluated and compared, output schema, native envelope), together with the
//!    cross-file checks against the integration's other operations (their latest revisions):
//!    any problem → 422 `check_failed` listing every one;
//! 3. the definition (without `contract_hash`) is appended as a revision with
//!    `source: "api"`: 201 with its number, or 200 `created: false` with the latest revision
//!    when the latest already has this definition and contract (nothing is relabelled).
//!
//! The operation file on disk is **not** rewritten: revisions live in the store (docs/src/operations/durability.md).
//! The saved revision serves every attempt created afterwards (and the default attempt,
//! which is re-pinned); an unchanged file never supersedes it — editing the file does (the
//! file rule of [`crate::app::generations`]). `GET /revisions/…` gives the definition to copy
//! into the file.
//!
//! Problem paths are relative to the request body: `definition/variants/found/result` for
//! the saved or inline definition, `operation/…` for an inline operation; `file` is null for
//! what came in the body and the operation file's path for a cross-file problem elsewhere.

use std::path::{Path, PathBuf};

use hyper::http::StatusCode;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{
    file_problem_json, from_value, problem_json, store_err, unknown_integration, unknown_operation,
    ApiError, ApiResult, PREFIX,
};
use crate::app::{App, Integration};
use crate::author::generate::generate;
use crate::contract::OperationFile;
use crate::contract::ProfileKind;
use crate::error::Problem;
use crate::http::Request;
use crate::operation::check::{check_integration, check_operation};
use crate::operation::load::parse_operation;
use crate::operation::{check_loaded, LoadedOperation, Operation};
use crate::records::RevisionRecord;

/// `{"revision","contract_hash","definition_hash","saved_at","source"}`.
fn revision_summary(r: &RevisionRecord) -> Value {
    json!({
        "revision": r.revision,
        "contract_hash": r.contract_hash,
        "definition_hash": r.definition_hash,
        "saved_at": r.saved_at,
        "source": r.source,
    })
}

/// The object the contract hash is computed over (docs/src/concepts/operations.md).
fn contract_json(op: &Operation) -> Value {
    json!({
        "operation": format!("{}:{}", op.profile.as_str(), op.id()),
        "description": op.op.description.clone().unwrap_or_default(),
        "input_schema": op.op.input_schema.as_ref(),
        "output_schema": op.op.output_schema.as_ref(),
    })
}

/// Why the latest revision cannot be pinned, when it is stale.
fn stale_reason(op: &Operation, latest: &RevisionRecord, integration: &str) -> String {
    format!(
        "revision {} was checked against contract {} but the contract of `{}` is now {}: generate or edit a definition, then save it with contract_hash \"{}\" (POST {PREFIX}/tools/{integration}/testing, action \"save\")",
        latest.revision,
        latest.contract_hash,
        op.key(),
        op.contract_hash,
        op.contract_hash
    )
}

/// `GET /tools`.
pub(crate) fn tools(app: &App) -> ApiResult {
    let mut out = Vec::new();
    for integ in app.integrations.values() {
        let mut ops = Vec::new();
        for op in &integ.operations {
            let latest = app.store.latest_revision(&op.key()).map_err(store_err)?;
            let stale = latest
                .as_ref()
                .is_some_and(|r| r.contract_hash != op.contract_hash);
            ops.push(json!({
                "operation_id": op.id(),
                "title": op.op.title,
                "description": op.op.description,
                "input_schema": op.op.input_schema.as_ref(),
                "output_schema": op.op.output_schema.as_ref(),
                "is_write": op.is_write,
                "contract_hash": op.contract_hash,
                "has_mock": latest.is_some() && !stale,
                "latest_revision": latest.as_ref().map(|r| r.revision),
                "stale": stale,
            }));
        }
        let builtins: Vec<&str> = integ
            .builtins
            .iter()
            .map(|b| b.operation_id.as_str())
            .collect();
        out.push(json!({
            "integration": integ.name(),
            "profile": integ.config.profile.as_str(),
            "upstream": integ.config.upstream,
            "operations": ops,
            "builtin_operations": builtins,
        }));
    }
    Ok((StatusCode::OK, json!({ "integrations": out })))
}

fn integration<'a>(app: &'a App, name: &str) -> Result<&'a Integration, ApiError> {
    app.integration(name)
        .ok_or_else(|| unknown_integration(&app.integrations, name))
}

/// `GET /tools/{integration}/testing`.
pub(crate) fn get_testing(app: &App, name: &str) -> ApiResult {
    let integ = integration(app, name)?;
    let mut ops = Vec::new();
    for op in &integ.operations {
        let revisions = app.store.revisions(&op.key()).map_err(store_err)?;
        let latest = revisions.last();
        let stale = latest.is_some_and(|r| r.contract_hash != op.contract_hash);
        let mut o = json!({
            "operation_id": op.id(),
            "file": op.file.display().to_string(),
            "is_write": op.is_write,
            "contract": contract_json(op),
            "contract_hash": op.contract_hash,
            "latest_revision": latest.map(revision_summary),
            "revisions": revisions.len(),
            // The operation file's own mock (null when it has none): compare with the latest
            // revision's to see whether an API save superseded the file.
            "file_definition_hash": op.definition_hash,
            "stale": stale,
        });
        if let (true, Some(l)) = (stale, latest) {
            o["stale_reason"] = json!(stale_reason(op, l, name));
        }
        ops.push(o);
    }
    let problems: Vec<Value> = app
        .integrations
        .problems(name)
        .iter()
        .map(file_problem_json)
        .collect();
    Ok((
        StatusCode::OK,
        json!({
            "integration": name,
            "profile": integ.config.profile.as_str(),
            "operations": ops,
            "problems": problems,
        }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GenerateBody {
    #[allow(dead_code)]
    action: String,
    operation_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SaveBody {
    #[allow(dead_code)]
    action: String,
    operation_id: String,
    /// Required for `save`; optional for `check` (verified when given).
    #[serde(default)]
    contract_hash: Option<String>,
    definition: Value,
}

/// The `action` member of a testing body.
fn action(body: &Value, allowed: &[&str]) -> Result<String, ApiError> {
    let list = allowed
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    if !body.is_object() {
        return Err(ApiError::bad_request(format!(
            "expected a JSON object with `action` ({list})"
        )));
    }
    match body.get("action") {
        Some(Value::String(a)) if allowed.contains(&a.as_str()) => Ok(a.clone()),
        Some(Value::String(a)) => Err(ApiError::bad_request(format!(
            "action: unknown action `{a}`, expected one of {list}"
        ))),
        Some(_) => Err(ApiError::bad_request(format!(
            "action: expected a string, one of {list}"
        ))),
        None => Err(ApiError::bad_request(format!(
            "action: missing, expected one of {list}"
        ))),
    }
}

/// `POST /tools/{integration}/testing`.
pub(crate) async fn post_testing(app: &App, name: &str, req: &Request) -> ApiResult {
    let body = match req.json_body() {
        Ok(Some(v)) => v,
        Ok(None) => Value::Null,
        Err(e) => return Err(ApiError::of_body(e, "testing body")),
    };
    let integ = integration(app, name)?;
    let what = format!("POST {PREFIX}/tools/{name}/testing body");
    match action(&body, &["generate", "save", "check"])?.as_str() {
        "generate" => {
            let b: GenerateBody = from_value(&body, &what)?;
            let op = integ
                .operation(&b.operation_id)
                .ok_or_else(|| unknown_operation(integ, &b.operation_id))?;
            let g = generate(&op.op, op.profile);
            Ok((
                StatusCode::OK,
                json!({
                    "operation_id": op.id(),
                    "contract_hash": op.contract_hash,
                    "supported": g.supported,
                    "reasons": g.reasons,
                    "definition": g.definition,
                }),
            ))
        }
        a => {
            let b: SaveBody = from_value(&body, &what)?;
            let save = a == "save";
            if save && b.contract_hash.is_none() {
                return Err(ApiError::bad_request(format!(
                    "{what}: contract_hash: missing: send the contract_hash read from GET {PREFIX}/tools/{name}/testing (the contract your definition was written against)"
                )));
            }
            let (status, answer, created) = save_locked(app, name, &b, save)?;
            if created {
                crate::app::generations::repin_default(app).await;
            }
            Ok((status, answer))
        }
    }
}

/// Steps 1–3 of a save (or 1–2 of a check) under the change lock; `created` tells whether a
/// revision was appended.
fn save_locked(
    app: &App,
    name: &str,
    b: &SaveBody,
    save: bool,
) -> Result<(StatusCode, Value, bool), ApiError> {
    let _g = app.integrations.change_lock();
    // Under the lock: the current contract cannot change until the revision is stored.
    let integ = integration(app, name)?;
    let op = integ
        .operation(&b.operation_id)
        .ok_or_else(|| unknown_operation(integ, &b.operation_id))?;
    let key = op.key();
    if let Some(sent) = &b.contract_hash {
        if *sent != op.contract_hash {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "contract_changed",
                format!(
                    "contract_hash {sent} is not the current contract hash of `{key}` ({}): its description or a schema changed since the definition was written. Re-read GET {PREFIX}/tools/{name}/testing, review the examples against the current contract (or regenerate), and send contract_hash \"{}\"",
                    op.contract_hash, op.contract_hash
                ),
            )
            .with_details(vec![json!({
                "operation": key,
                "sent_contract_hash": sent,
                "current_contract_hash": op.contract_hash,
                "contract": contract_json(op),
            })]));
        }
    }
    let mut definition = b.definition.clone();
    if let Value::Object(m) = &mut definition {
        m.entry("contract_hash")
            .or_insert_with(|| Value::String(op.contract_hash.clone()));
    }
    let problems = check_definition(app, integ, op, definition.clone());
    if !problems.is_empty() {
        return Err(check_failed(
            problems,
            &format!("the definition for `{key}`"),
        ));
    }
    let mut file = op.op.clone();
    file.mock = Some(definition.into());
    let stored = file.definition_value().unwrap_or(Value::Null);
    let definition_hash = crate::contract::hash::definition_hash(&stored);
    if !save {
        return Ok((
            StatusCode::OK,
            json!({
                "ok": true,
                "operation_id": op.id(),
                "contract_hash": op.contract_hash,
                "definition_hash": definition_hash,
                "problems": [],
            }),
            false,
        ));
    }
    let (rec, created) = app
        .store
        .sync_revision(&key, &op.contract_hash, &stored, "api")
        .map_err(store_err)?;
    if created {
        app.metrics
            .revisions_saved
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(operation = %key, revision = rec.revision, "revision saved through the admin API");
    }
    let mut answer = revision_summary(&rec);
    answer["operation_id"] = json!(op.id());
    answer["created"] = json!(created);
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, answer, created))
}

/// Where a definition sent in a body is reported (`file` null, paths under `definition/`).
fn marker(key: &str) -> PathBuf {
    PathBuf::from(format!("<request body: {key}>"))
}

/// Every check of `definition` as the mock of `op` (docs/src/reference/mock-definition.md#checks-and-limits), then the cross-file checks
/// against the integration's other operations as they serve (their latest revisions).
fn check_definition(
    app: &App,
    integ: &Integration,
    op: &Operation,
    definition: Value,
) -> Vec<Value> {
    let key = op.key();
    let here = marker(&key);
    let mut file = op.op.clone();
    file.mock = Some(definition.into());
    let profile = op.profile;
    let mut problems = check_operation(&file, profile, &here);
    if problems.is_empty() {
        let mut loaded: Vec<LoadedOperation> = integ
            .operations
            .iter()
            .filter(|o| o.id() != op.id())
            .map(|o| serving_form(app, o))
            .collect();
        // Last, so a conflict involving it is reported against it.
        loaded.push(LoadedOperation {
            file: here.clone(),
            op: file,
            contract_hash: op.contract_hash.clone(),
        });
        problems.extend(
            check_integration(&loaded, profile)
                .into_iter()
                .filter(|p| p.file == here),
        );
    }
    problems
        .iter()
        .map(|p| body_problem(p, &here, "definition", true))
        .collect()
}

/// An operation as it serves: its file with the latest revision's definition as the mock.
fn serving_form(app: &App, o: &Operation) -> LoadedOperation {
    let mut f: OperationFile = o.op.clone();
    if let Ok(Some(r)) = app.store.latest_revision(&o.key()) {
        f.mock = Some(r.definition.into());
    }
    LoadedOperation {
        file: o.file.clone(),
        op: f,
        contract_hash: o.contract_hash.clone(),
    }
}

/// A problem as the API shows it. For what came in the body (`file == here`): `file` null
/// and the path under `prefix` — `mock/…` becomes `<prefix>/…` when `mock_is_prefix`, any
/// other path `<prefix>/<path>`. Problems of other files keep their file and path.
fn body_problem(p: &Problem, here: &Path, prefix: &str, mock_is_prefix: bool) -> Value {
    if p.file != here {
        return file_problem_json(p);
    }
    let path = if mock_is_prefix && (p.path == "mock" || p.path.starts_with("mock/")) {
        format!("{prefix}{}", &p.path["mock".len()..])
    } else if p.path.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}/{}", p.path)
    };
    problem_json(None, &path, &p.message)
}

/// 422 `check_failed` listing every problem.
fn check_failed(problems: Vec<Value>, what: &str) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "check_failed",
        format!(
            "{what} fails {} check(s) (docs/src/reference/mock-definition.md#checks-and-limits); each is in `details` as {{file, path, message}} with its JSON path in the request body",
            problems.len()
        ),
    )
    .with_details(problems)
}

/// The body of `POST /tools/testing`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InlineBody {
    #[allow(dead_code)]
    action: String,
    /// An operation file as JSON (`operation_id`, `description`, `match`, schemas, `mock`…).
    operation: Value,
    /// The definition to check (replaces `operation.mock`).
    #[serde(default)]
    definition: Option<Value>,
    /// `rest`, `salesforce` or `mcp`; or given by `integration`.
    #[serde(default)]
    profile: Option<String>,
    /// Check against this integration's profile and other operations too.
    #[serde(default)]
    integration: Option<String>,
}

/// `POST /tools/testing`: check or generate for an inline operation; stores nothing.
pub(crate) fn inline(app: &App, req: &Request) -> ApiResult {
    let body = match req.json_body() {
        Ok(Some(v)) => v,
        Ok(None) => Value::Null,
        Err(e) => return Err(ApiError::of_body(e, "testing body")),
    };
    let act = action(&body, &["check", "generate"])?;
    let b: InlineBody = from_value(&body, &format!("POST {PREFIX}/tools/testing body"))?;
    let integ = match &b.integration {
        Some(n) => Some(integration(app, n)?),
        None => None,
    };
    let profile = match (&b.profile, integ) {
        (Some(p), Some(i)) if p != i.config.profile.as_str() => {
            return Err(ApiError::bad_request(format!(
                "profile: `{p}` differs from the profile of integration `{}` (`{}`): give one of them",
                i.name(),
                i.config.profile
            )))
        }
        (Some(p), _) => ProfileKind::parse(p).ok_or_else(|| {
            ApiError::bad_request(format!(
                "profile: unknown profile `{p}`, expected rest, salesforce or mcp"
            ))
        })?,
        (None, Some(i)) => i.config.profile,
        (None, None) => {
            return Err(ApiError::bad_request(
                "give `profile` (rest, salesforce or mcp) or `integration` (a name from understudy.json) to say how the operation is served",
            ))
        }
    };
    let mut operation = b.operation.clone();
    let separate = b.definition.is_some();
    if let (Some(d), Value::Object(m)) = (&b.definition, &mut operation) {
        m.insert("mock".into(), d.clone());
    }
    let id = operation
        .get("operation_id")
        .and_then(Value::as_str)
        .unwrap_or("operation")
        .to_string();
    let here = marker(&format!("inline/{id}"));
    let show = |p: &Problem| -> Value {
        if separate && (p.path == "mock" || p.path.starts_with("mock/")) {
            body_problem(p, &here, "definition", true)
        } else {
            body_problem(p, &here, "operation", false)
        }
    };
    let loaded = match parse_operation(&operation, &here, profile) {
        Ok(l) => l,
        Err(p) => {
            return Err(check_failed(vec![show(&p)], "the inline operation"));
        }
    };
    if act == "generate" {
        let g = generate(&loaded.op, profile);
        return Ok((
            StatusCode::OK,
            json!({
                "operation_id": loaded.op.operation_id,
                "contract_hash": loaded.contract_hash,
                "supported": g.supported,
                "reasons": g.reasons,
                "definition": g.definition,
            }),
        ));
    }
    let mut problems = check_operation(&loaded.op, profile, &here);
    if let (true, Some(i)) = (problems.is_empty(), integ) {
        let mut all: Vec<LoadedOperation> = i
            .operations
            .iter()
            .filter(|o| o.id() != loaded.op.operation_id)
            .map(|o| serving_form(app, o))
            .collect();
        all.push(loaded.clone());
        problems.extend(
            check_loaded(&all, profile)
                .into_iter()
                .filter(|p| p.file == here),
        );
    }
    if !problems.is_empty() {
        let shown: Vec<Value> = problems.iter().map(show).collect();
        return Err(check_failed(shown, "the inline operation"));
    }
    let definition_hash = loaded
        .op
        .definition_value()
        .map(|d| crate::contract::hash::definition_hash(&d));
    Ok((
        StatusCode::OK,
        json!({
            "ok": true,
            "operation_id": loaded.op.operation_id,
            "contract_hash": loaded.contract_hash,
            "definition_hash": definition_hash,
            "has_mock": loaded.op.mock.is_some(),
            "problems": [],
        }),
    ))
}

/// `GET /revisions/{integration}/{operation_id}`: oldest first, definitions included.
pub(crate) fn revisions(app: &App, name: &str, operation: &str) -> ApiResult {
    let integ = integration(app, name)?;
    let key = format!("{name}/{operation}");
    let op = integ.operation(operation);
    let revisions = if crate::contract::valid_operation_id(operation) {
        app.store.revisions(&key).map_err(store_err)?
    } else {
        Vec::new()
    };
    // Revisions outlive a deleted operation file; an id with neither is unknown.
    if op.is_none() && revisions.is_empty() {
        return Err(unknown_operation(integ, operation));
    }
    let list: Vec<Value> = revisions
        .iter()
        .map(|r| {
            let mut v = revision_summary(r);
            v["definition"] = r.definition.clone();
            v
        })
        .collect();
    let mut out = Map::new();
    out.insert("integration".into(), json!(name));
    out.insert("operation_id".into(), json!(operation));
    out.insert(
        "current_contract_hash".into(),
        json!(op.map(|o| o.contract_hash.clone())),
    );
    out.insert("revisions".into(), Value::Array(list));
    Ok((StatusCode::OK, Value::Object(out)))
}
