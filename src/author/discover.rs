//! `understudy discover --integration NAME [--config F] [--out DIR]` (docs/src/guides/record.md, docs/src/reference/cli.md): ask the
//! integration's real MCP server for its tools and write one operation file per tool.
//!
//! **Connecting** (the integration's `upstream` URL, `http://` or `https://` through
//! [`crate::upstream::Upstream`]: rustls with the web PKI roots plus `upstream_ca`) is the
//! one MCP client, [`crate::upstream::mcp_client`]: stateless first (`server/discover`), the
//! session era (`initialize`) otherwise, `tools/list` paged with `nextCursor`, the session
//! ended with `DELETE`. A server that cannot be reached, or that refuses both eras, is exit
//! code 1 with the reason.
//!
//! **Writing** `<operations dir>/<tool>.json` (or `--out DIR`) per tool:
//! - `operation_id` = the tool name; a name that is not a valid operation id
//!   (`[a-z0-9_.-]{1,128}`: MCP allows capitals, understudy's file names do not) is reported
//!   and skipped, as is a repeated name;
//! - `title`, `description`, `input_schema` (`inputSchema`; `{"type":"object"}` when absent),
//!   `annotations` as discovered; `icons`, `execution` and `_meta` are not part of a contract
//!   and are dropped;
//! - with an `outputSchema`: `output_schema` = it (a mock's result is then the structured
//!   output); without one: `"result_form": "call_tool_result"` and an output schema of the
//!   CallToolResult object ([`call_tool_result_schema`]) — docs/src/reference/mock-definition.md#the-envelope-rule's default for a tool
//!   discovered without an `outputSchema`.
//!
//! An existing file keeps everything that is not the discovered contract (`mock`, `write`,
//! `idempotency`). What happens to it, as the summary reports:
//! - **unchanged**: same contract and metadata, the file is not touched;
//! - **updated**: same contract hash, other metadata (`title`, `annotations`, `result_form`)
//!   rewritten; its mock stays valid;
//! - **changed**: the contract hash changed and the file had no mock: rewritten;
//! - **stale**: the contract hash changed and the file has a mock: the contract is rewritten
//!   and the mock kept **as it is** — never relabelled with the new hash. A mock that
//!   carried no `contract_hash` gets the hash of the contract it was written against (the old
//!   one), so `understudy check` reports it stale until someone updates it;
//! - tools the server no longer offers are reported, and their files left alone.
//!
//! Every written file is run through the per-file checks of `check`; problems are reported
//! (the file is still written: the contract is what the server says).
//!
//! **Resources and prompts** (docs/src/reference/mcp.md): `resources/list`, `resources/templates/list` and
//! `prompts/list` are asked too (every page); each listed item becomes
//! `resources/<name>.json` / `prompts/<name>.json` beside the tools (the
//! [`ResourceFile::from_listed`] / [`PromptFile::from_listed`] fields — the same files
//! `understudy record` drafts), without a mock. A server that refuses one of these lists (no
//! such capability) is said in the summary and has none. The same fates apply: an existing
//! file keeps its `mock` and `completions`; its contract is the one its file loads as
//! (`crate::operation::mcp_files::extra_operation`). Names that are not valid operation ids,
//! or that a tool or another resource or prompt already has, are skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::contract::ProfileKind;
use crate::contract::{valid_operation_id, OperationFile, ResultForm};
use crate::operation::load::load_file;
use crate::operation::mcp_files::{extra_operation, ExtraKind, PromptFile, ResourceFile};
use crate::upstream::mcp_client::{Limits, McpClient};
use crate::upstream::Upstream;

pub use crate::upstream::mcp_client::{EraChoice, SESSION_VERSION, STATELESS_VERSION};

/// How long one request may take (connect + answer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The tools a server listed, and how they were asked for.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub url: String,
    /// The negotiated protocol version.
    pub protocol_version: String,
    pub stateless: bool,
    /// `serverInfo.name`, when the server said.
    pub server_name: Option<String>,
    /// The tool objects, in the server's order, across pages.
    pub tools: Vec<Value>,
    /// The resources, then the resource templates, as listed.
    pub resources: Vec<Value>,
    pub prompts: Vec<Value>,
    /// Lists the server refused (`resources/list: …`): it has none of those.
    pub refused: Vec<String>,
}

/// How one tool fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    New,
    Unchanged,
    Updated,
    Changed,
    Stale {
        mock_hash: String,
        current_hash: String,
    },
    Skipped(String),
}

impl Fate {
    pub fn label(&self) -> &'static str {
        match self {
            Fate::New => "new",
            Fate::Unchanged => "unchanged",
            Fate::Updated => "updated",
            Fate::Changed => "changed",
            Fate::Stale { .. } => "stale",
            Fate::Skipped(_) => "skipped",
        }
    }
}

/// One line of the summary.
#[derive(Debug, Clone)]
pub struct Entry {
    pub tool: String,
    pub file: Option<PathBuf>,
    pub fate: Fate,
    /// `check` problems of the written file.
    pub problems: Vec<String>,
}

impl Entry {
    /// A listed item that got no file, and why.
    fn skipped(tool: impl Into<String>, why: impl Into<String>) -> Entry {
        Entry {
            tool: tool.into(),
            file: None,
            fate: Fate::Skipped(why.into()),
            problems: Vec::new(),
        }
    }
}

/// What `discover` did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub entries: Vec<Entry>,
    /// Operation files of tools the server no longer lists (left alone).
    pub gone: Vec<String>,
}

impl Report {
    pub fn count(&self, label: &str) -> usize {
        self.entries
            .iter()
            .filter(|e| e.fate.label() == label)
            .count()
    }
}

/// Ask the MCP server at `url` for every tool, in the era `era` allows (the negotiation of
/// [`McpClient::connect`]).
pub async fn discover_tools(
    upstream: &Upstream,
    url: &str,
    era: EraChoice,
) -> Result<Discovered, String> {
    let mut c = McpClient::new(upstream, url).with_limits(Limits {
        read_timeout: REQUEST_TIMEOUT,
        ..Limits::default()
    });
    let negotiated = c.connect(era).await.map_err(|e| e.to_string())?.clone();
    let tools = c.list_tools().await;
    let mut found = Discovered {
        url: url.to_string(),
        protocol_version: negotiated.protocol_version,
        stateless: negotiated.stateless,
        server_name: negotiated.server_name,
        tools: Vec::new(),
        resources: Vec::new(),
        prompts: Vec::new(),
        refused: Vec::new(),
    };
    if let Ok(t) = &tools {
        found.tools = t.clone();
        for (method, member) in [
            ("resources/list", "resources"),
            ("resources/templates/list", "resourceTemplates"),
            ("prompts/list", "prompts"),
        ] {
            match c.list(method, member).await {
                Ok(items) if member == "prompts" => found.prompts = items,
                Ok(items) => found.resources.extend(items),
                Err(e) => found.refused.push(e.to_string()),
            }
        }
    }
    c.close().await;
    tools.map_err(|e| e.to_string())?;
    Ok(found)
}

// ---------------------------------------------------------------------------------------------
// Tools → operation files

/// The output schema of a `call_tool_result` operation: the CallToolResult object.
pub fn call_tool_result_schema() -> Value {
    json!({
        "type": "object",
        "required": ["content"],
        "properties": {
            "content": {
                "type": "array",
                "items": { "type": "object", "required": ["type"],
                           "properties": { "type": { "type": "string" } } }
            },
            "structuredContent": {},
            "isError": { "type": "boolean" }
        }
    })
}

/// The contract of a discovered tool as an operation file without a mock, or why the tool
/// cannot be one.
pub fn operation_of_tool(tool: &Value) -> Result<OperationFile, String> {
    let Some(name) = tool.get("name").and_then(Value::as_str) else {
        return Err("the tool has no string `name`".into());
    };
    if !valid_operation_id(name) {
        return Err(format!(
            "`{name}` is not a valid operation_id ([a-z0-9_.-]{{1,128}}, the operation file's name): understudy cannot mock this tool"
        ));
    }
    let text = |k: &str| {
        tool.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let input_schema = match tool.get("inputSchema") {
        Some(s @ Value::Object(_)) => s.clone(),
        _ => json!({ "type": "object" }),
    };
    let (output_schema, result_form) = match tool.get("outputSchema") {
        Some(s @ Value::Object(o)) if !o.is_empty() => (s.clone(), None),
        _ => (call_tool_result_schema(), Some(ResultForm::CallToolResult)),
    };
    Ok(OperationFile {
        operation_id: name.to_string(),
        description: text("description"),
        title: text("title"),
        match_spec: None,
        write: None,
        input_schema: input_schema.into(),
        output_schema: output_schema.into(),
        idempotency: None,
        annotations: tool
            .get("annotations")
            .filter(|a| a.as_object().is_some_and(|o| !o.is_empty()))
            .cloned(),
        result_form,
        mock: None,
    })
}

/// Write (or update) one operation file per tool in `dir` (see the module doc).
pub fn write_operations(dir: &Path, tools: &[Value]) -> Result<Report, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{}: cannot create the directory: {e}", dir.display()))?;
    let profile = ProfileKind::Mcp;
    let mut report = Report::default();
    let mut seen = BTreeSet::new();
    for tool in tools {
        let label = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let discovered = match operation_of_tool(tool) {
            Ok(o) => o,
            Err(why) => {
                report.entries.push(Entry::skipped(label, why));
                continue;
            }
        };
        if !seen.insert(discovered.operation_id.clone()) {
            report.entries.push(Entry::skipped(
                label,
                "the server listed this name more than once; the first is kept",
            ));
            continue;
        }
        let file = dir.join(format!("{}.json", discovered.operation_id));
        let (fate, content) = if file.exists() {
            match load_file(&file, profile) {
                Ok(existing) => merge(existing.op, discovered, profile),
                Err(p) => {
                    report.entries.push(Entry {
                        tool: label,
                        file: Some(file),
                        fate: Fate::Skipped(format!(
                            "the existing file cannot be read ({}); left as it is",
                            p.message
                        )),
                        problems: Vec::new(),
                    });
                    continue;
                }
            }
        } else {
            (Fate::New, Some(discovered))
        };
        let mut problems = Vec::new();
        if let Some(op) = content {
            write_file(&file, &op)?;
            problems = crate::operation::check::check_operation(&op, profile, &file)
                .into_iter()
                .map(|p| {
                    if p.path.is_empty() {
                        p.message
                    } else {
                        format!("{}: {}", p.path, p.message)
                    }
                })
                .collect();
        }
        report.entries.push(Entry {
            tool: label,
            file: Some(file),
            fate,
            problems,
        });
    }
    report.gone = existing_ids(dir)
        .into_iter()
        .filter(|id| !seen.contains(id))
        .collect();
    Ok(report)
}

/// Write (or update) `resources/<name>.json` and `prompts/<name>.json` for what the server
/// listed (module doc), into `report`; `taken` holds the tools' names.
pub fn write_extras(
    dir: &Path,
    resources: &[Value],
    prompts: &[Value],
    report: &mut Report,
) -> Result<(), String> {
    let mut seen: BTreeSet<String> = report
        .entries
        .iter()
        .filter(|e| e.file.is_some())
        .map(|e| e.tool.clone())
        .collect();
    let listed = resources
        .iter()
        .map(|v| {
            (
                ExtraKind::Resource,
                v,
                ResourceFile::from_listed(v).map(|r| (r.name.clone(), serde_json::to_value(r))),
            )
        })
        .chain(prompts.iter().map(|v| {
            (
                ExtraKind::Prompt,
                v,
                PromptFile::from_listed(v).map(|p| (p.name.clone(), serde_json::to_value(p))),
            )
        }));
    for (kind, raw, parsed) in listed {
        let dir_name = kind.dir();
        let (name, file) = match parsed {
            Some((name, Ok(file))) => (name, file),
            _ => {
                let name = raw.get("name").and_then(Value::as_str).unwrap_or("?");
                report.entries.push(Entry::skipped(
                    format!("{dir_name}/{name}"),
                    "listed without a string `name` and URI (or template)",
                ));
                continue;
            }
        };
        let label = format!("{dir_name}/{name}");
        let why = if !valid_operation_id(&name) {
            Some(format!("`{name}` is not a valid operation id ([a-z0-9_.-]{{1,128}}, the file's name): understudy cannot serve it"))
        } else if !seen.insert(name.clone()) {
            Some(
                "a tool, resource or prompt listed before has that name; the first is kept"
                    .to_string(),
            )
        } else {
            None
        };
        if let Some(why) = why {
            report.entries.push(Entry::skipped(label, why));
            continue;
        }
        let sub = dir.join(dir_name);
        std::fs::create_dir_all(&sub)
            .map_err(|e| format!("{}: cannot create the directory: {e}", sub.display()))?;
        let path = sub.join(format!("{name}.json"));
        let (fate, content) = match std::fs::read_to_string(&path) {
            Err(_) => (Fate::New, Some(file)),
            Ok(text) => match serde_json::from_str::<Value>(&text) {
                Ok(old) => merge_extra(old, file, kind, &path),
                Err(e) => {
                    report.entries.push(Entry {
                        tool: label,
                        file: Some(path),
                        fate: Fate::Skipped(format!(
                            "the existing file cannot be read ({e}); left as it is"
                        )),
                        problems: Vec::new(),
                    });
                    continue;
                }
            },
        };
        let mut problems = Vec::new();
        if let Some(v) = content {
            let mut text = serde_json::to_string_pretty(&v)
                .map_err(|e| format!("{}: cannot serialize: {e}", path.display()))?;
            text.push('\n');
            crate::util::fs::write_atomic(&path, text.as_bytes())
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            problems = match extra_operation(&v, &path, kind) {
                Ok(l) => crate::operation::check::check_operation(&l.op, ProfileKind::Mcp, &path)
                    .into_iter()
                    .map(|p| problem_line(&p.path, &p.message))
                    .collect(),
                Err(ps) => ps
                    .into_iter()
                    .map(|p| problem_line(&p.path, &p.message))
                    .collect(),
            };
        }
        report.entries.push(Entry {
            tool: label,
            file: Some(path),
            fate,
            problems,
        });
    }
    Ok(())
}

fn problem_line(path: &str, message: &str) -> String {
    if path.is_empty() {
        message.to_string()
    } else {
        format!("{path}: {message}")
    }
}

/// A listed resource or prompt merged into its existing file: the file keeps its `mock` and
/// `completions`; the fates of [`merge`] by the contract hash of the operation it loads as.
fn merge_extra(old: Value, listed: Value, kind: ExtraKind, path: &Path) -> (Fate, Option<Value>) {
    let hash = |v: &Value| {
        extra_operation(v, path, kind)
            .ok()
            .map(|l| l.op.contract_hash(ProfileKind::Mcp))
    };
    let mut merged = listed;
    for k in ["completions", "mock"] {
        if let Some(x) = old.get(k) {
            merged[k] = x.clone();
        }
    }
    let (old_hash, new_hash) = (hash(&old), hash(&merged));
    if old_hash == new_hash {
        return if merged == old {
            (Fate::Unchanged, None)
        } else {
            (Fate::Updated, Some(merged))
        };
    }
    let Some(mock) = merged.get_mut("mock").and_then(Value::as_object_mut) else {
        return (Fate::Changed, Some(merged));
    };
    let old_hash = old_hash.unwrap_or_default();
    let mock_hash = mock
        .get("contract_hash")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| old_hash.clone());
    mock.entry("contract_hash")
        .or_insert_with(|| Value::String(old_hash));
    (
        Fate::Stale {
            mock_hash,
            current_hash: new_hash.unwrap_or_default(),
        },
        Some(merged),
    )
}

/// The discovered contract merged into an existing file: the fate, and the file to write
/// (`None` when nothing changes).
fn merge(
    existing: OperationFile,
    discovered: OperationFile,
    profile: ProfileKind,
) -> (Fate, Option<OperationFile>) {
    let old_hash = existing.contract_hash(profile);
    let new_hash = discovered.contract_hash(profile);
    let mut merged = OperationFile {
        mock: existing.mock.clone(),
        write: existing.write,
        idempotency: existing.idempotency.clone(),
        match_spec: existing.match_spec.clone(),
        ..discovered
    };
    if old_hash == new_hash {
        return if merged == existing {
            (Fate::Unchanged, None)
        } else {
            (Fate::Updated, Some(merged))
        };
    }
    let Some(mock) = merged.mock.as_mut() else {
        return (Fate::Changed, Some(merged));
    };
    // The mock stays exactly as it was, labelled with the contract it was written against.
    let mock_hash = existing
        .recorded_contract_hash()
        .unwrap_or_else(|| old_hash.clone());
    mock.edit(|v| {
        if let Value::Object(m) = v {
            m.entry("contract_hash")
                .or_insert_with(|| Value::String(old_hash.clone()));
        }
    });
    (
        Fate::Stale {
            mock_hash,
            current_hash: new_hash,
        },
        Some(merged),
    )
}

/// Write an operation file atomically (a temporary file renamed over it).
fn write_file(file: &Path, op: &OperationFile) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(op)
        .map_err(|e| format!("{}: cannot serialize: {e}", file.display()))?;
    text.push('\n');
    crate::util::fs::write_atomic(file, text.as_bytes())
        .map_err(|e| format!("{}: cannot write: {e}", file.display()))
}

/// The operation ids of the `*.json` files in `dir`.
fn existing_ids(dir: &Path) -> Vec<String> {
    let mut ids = BTreeSet::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "json") {
                if let Some(stem) = p.file_stem().and_then(|s| s.to_str()) {
                    if !stem.starts_with('.') {
                        ids.insert(stem.to_string());
                    }
                }
            }
        }
    }
    ids.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_with_output_schema_is_structured() {
        let t = json!({"name": "lookup", "title": "Lookup", "description": "Find",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "annotations": {"readOnlyHint": true}, "icons": []});
        let op = operation_of_tool(&t).unwrap();
        assert_eq!(op.operation_id, "lookup");
        assert_eq!(op.title.as_deref(), Some("Lookup"));
        assert_eq!(op.result_form, None);
        assert_eq!(*op.output_schema, t["outputSchema"]);
        assert_eq!(op.annotations, Some(json!({"readOnlyHint": true})));
    }

    #[test]
    fn tool_without_output_schema_is_a_call_tool_result() {
        let op = operation_of_tool(&json!({"name": "send"})).unwrap();
        assert_eq!(op.result_form, Some(ResultForm::CallToolResult));
        assert_eq!(*op.input_schema, json!({"type": "object"}));
        assert_eq!(*op.output_schema, call_tool_result_schema());
        assert!(operation_of_tool(&json!({"name": "Send"}))
            .unwrap_err()
            .contains("not a valid operation_id"));
        assert!(operation_of_tool(&json!({"title": "x"})).is_err());
    }

    #[test]
    fn merge_keeps_the_mock_and_marks_it_stale() {
        let old = operation_of_tool(&json!({"name": "t", "description": "old"})).unwrap();
        let mut with_mock = old.clone();
        with_mock.mock = Some(json!({"schema_version": 1}).into());
        with_mock.write = Some(false);
        let same = old.clone();
        assert_eq!(
            merge(with_mock.clone(), same, crate::contract::ProfileKind::Mcp).0,
            Fate::Unchanged
        );
        let mut retitled = old.clone();
        retitled.title = Some("T".into());
        let (fate, file) = merge(
            with_mock.clone(),
            retitled,
            crate::contract::ProfileKind::Mcp,
        );
        assert_eq!(fate, Fate::Updated);
        assert_eq!(file.unwrap().write, Some(false));
        let new = operation_of_tool(&json!({"name": "t", "description": "new"})).unwrap();
        let (fate, file) = merge(
            with_mock.clone(),
            new.clone(),
            crate::contract::ProfileKind::Mcp,
        );
        let file = file.unwrap();
        let old_hash = old.contract_hash(crate::contract::ProfileKind::Mcp);
        assert_eq!(
            fate,
            Fate::Stale {
                mock_hash: old_hash.clone(),
                current_hash: new.contract_hash(crate::contract::ProfileKind::Mcp)
            }
        );
        assert_eq!(file.description.as_deref(), Some("new"));
        assert_eq!(file.mock.unwrap()["contract_hash"], json!(old_hash));
        let (fate, _) = merge(old, new, crate::contract::ProfileKind::Mcp);
        assert_eq!(fate, Fate::Changed);
    }
}
