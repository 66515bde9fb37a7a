//! MCP resources and prompts as files beside the tools (docs/src/reference/mcp.md): `resources/<name>.json` and
//! `prompts/<name>.json` inside an `mcp` integration's operations directory.
//!
//! Each file becomes an ordinary operation (operation id = the resource or prompt name), so
//! `check` (examples validate, unknown keys, limits), contract hashes, revisions, pins, hot
//! reload and evidence work for them exactly as for tools. The file's own metadata travels in
//! the derived input schema under [`RESOURCE_KEY`] / [`PROMPT_KEY`] (an annotation keyword
//! JSON Schema ignores), so the contract hash covers the URI, template, MIME type, arguments
//! and completions too, and the MCP endpoint reads them back from the pinned contract.
//!
//! - A resource's input is its template variables (none for a fixed `uri`); its mock's result
//!   is the `contents` array of `resources/read` (each item `uri` and `text` or `blob`).
//! - A prompt's input is its arguments (strings); its mock's result is
//!   `{"description"?, "messages": [...]}`.
//! - Names share one namespace with the integration's tools (duplicates are the existing
//!   "one file per operation" problem); a file's stem must equal its `name`.
//! - Extra checks here: `uri` is an absolute URI, `uri_template` is RFC 6570 level 1 (only
//!   `{var}` expressions, at least one), exactly one of the two, no two resources with the
//!   same URI or template, completion keys name a template variable or prompt argument.

use crate::error::Problem;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

use super::load::LoadedOperation;
use crate::contract::uri_template::{is_absolute_uri, match_template, template_vars};

/// The input-schema annotation carrying a resource file's metadata.
pub const RESOURCE_KEY: &str = "x-understudy-mcp-resource";
/// The input-schema annotation carrying a prompt file's metadata.
pub const PROMPT_KEY: &str = "x-understudy-mcp-prompt";

/// `resources/<name>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "understudy MCP resource file")]
#[schemars(extend("oneOf" = [{"required": ["uri"]}, {"required": ["uri_template"]}]))]
pub struct ResourceFile {
    /// The resource's name and operation id (`[a-z0-9_.-]{1,128}`), equal to the file name without `.json`.
    #[schemars(regex(pattern = r"^[a-z0-9_.-]{1,128}$"))]
    pub name: String,
    /// A fixed resource: an absolute URI (`file:///notes.txt`). Exactly one of `uri` and `uri_template`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1F\x7F]+$"))]
    pub uri: Option<String>,
    /// A resource template, RFC 6570 level 1 (`{var}` expressions, at least one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri_template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Template variable → the values `completion/complete` offers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub completions: BTreeMap<String, Vec<String>>,
    /// The mock definition (version 1); its results are the `contents` array of `resources/read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mock: Option<Value>,
}

/// One argument of a prompt, as in `prompts/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptArgument {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

/// `prompts/<name>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "understudy MCP prompt file")]
pub struct PromptFile {
    /// The prompt's name and operation id (`[a-z0-9_.-]{1,128}`), equal to the file name without `.json`.
    #[schemars(regex(pattern = r"^[a-z0-9_.-]{1,128}$"))]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgument>,
    /// Argument name → the values `completion/complete` offers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub completions: BTreeMap<String, Vec<String>>,
    /// The mock definition (version 1); its results are `{"description"?, "messages": [...]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mock: Option<Value>,
}

impl ResourceFile {
    /// A resource (`uri`) or resource template (`uriTemplate`) as a server lists it in
    /// `resources/list` / `resources/templates/list`: name, title, description, MIME type and
    /// size kept (`annotations`, `icons` and `_meta` are not part of the file); `None` without
    /// a string `name` and a string `uri` or `uriTemplate`.
    pub fn from_listed(v: &Value) -> Option<ResourceFile> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let uri = text("uri");
        let uri_template = if uri.is_none() {
            Some(text("uriTemplate")?)
        } else {
            None
        };
        Some(ResourceFile {
            name: text("name")?,
            uri,
            uri_template,
            title: text("title"),
            description: text("description"),
            mime_type: text("mimeType"),
            size: v.get("size").and_then(Value::as_u64),
            completions: BTreeMap::new(),
            mock: None,
        })
    }

    /// The URI or template it is known by.
    pub fn key(&self) -> &str {
        self.uri
            .as_deref()
            .or(self.uri_template.as_deref())
            .unwrap_or("")
    }

    /// The input of a read of `uri`: `{}` for the fixed URI, the variables for a template
    /// that matches; `None` when it names another resource.
    pub fn input_for(&self, uri: &str) -> Option<Value> {
        match (&self.uri, &self.uri_template) {
            (Some(u), _) => (u == uri).then(|| json!({})),
            (None, Some(t)) => match_template(t, uri).map(Value::Object),
            _ => None,
        }
    }

    /// The template variables (none for a fixed URI).
    pub fn variables(&self) -> Vec<String> {
        self.uri_template
            .as_deref()
            .and_then(|t| template_vars(t).ok())
            .unwrap_or_default()
    }
}

impl PromptFile {
    /// A prompt as a server lists it in `prompts/list` (name, title, description, arguments
    /// with their name, title, description and `required`); `None` without a string `name`.
    pub fn from_listed(v: &Value) -> Option<PromptFile> {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let arguments = v
            .get("arguments")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| {
                        Some(PromptArgument {
                            name: text(x, "name")?,
                            title: text(x, "title"),
                            description: text(x, "description"),
                            required: x.get("required") == Some(&Value::Bool(true)),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(PromptFile {
            name: text(v, "name")?,
            title: text(v, "title"),
            description: text(v, "description"),
            arguments,
            completions: BTreeMap::new(),
            mock: None,
        })
    }
}

/// Which of the two files beside the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtraKind {
    Resource,
    Prompt,
}

impl ExtraKind {
    /// The subdirectory of the operations directory.
    pub fn dir(self) -> &'static str {
        match self {
            ExtraKind::Resource => "resources",
            ExtraKind::Prompt => "prompts",
        }
    }
}

/// One resource or prompt file's content (`file` names it in problems) as the operation it
/// loads as, with the file's own checks (a resource's URI checks stand alone here: URIs are
/// not compared with other files).
pub fn extra_operation(
    value: &Value,
    file: &Path,
    kind: ExtraKind,
) -> Result<LoadedOperation, Vec<Problem>> {
    let op = match kind {
        ExtraKind::Resource => resource_operation(value, file, &mut BTreeMap::new())?,
        ExtraKind::Prompt => prompt_operation(value, file)?,
    };
    super::load::parse_operation(&op, file, crate::contract::ProfileKind::Mcp).map_err(|p| vec![p])
}

/// The resources and prompts of an `mcp` operations directory, as operations, and the
/// problems found (parse errors and the checks of the module doc). Missing `resources/` or
/// `prompts/` directories are fine.
pub fn load_extras(dir: &Path) -> (Vec<LoadedOperation>, Vec<Problem>) {
    let mut ops = Vec::new();
    let mut problems = Vec::new();
    let mut uris: BTreeMap<String, std::path::PathBuf> = BTreeMap::new();
    for (sub, resource) in [("resources", true), ("prompts", false)] {
        let d = dir.join(sub);
        if !d.is_dir() {
            continue;
        }
        for file in json_files(&d) {
            let value = match std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read the file: {e}"))
                .and_then(|t| {
                    serde_json::from_str::<Value>(&t).map_err(|e| format!("not valid JSON: {e}"))
                }) {
                Ok(v) => v,
                Err(m) => {
                    problems.push(Problem::new(&file, "", m));
                    continue;
                }
            };
            let converted = if resource {
                resource_operation(&value, &file, &mut uris)
            } else {
                prompt_operation(&value, &file)
            };
            match converted {
                Ok(op) => match super::load::parse_operation(
                    &op,
                    &file,
                    crate::contract::ProfileKind::Mcp,
                ) {
                    Ok(l) => ops.push(l),
                    Err(p) => problems.push(p),
                },
                Err(p) => problems.extend(p),
            }
        }
    }
    (ops, problems)
}

fn json_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|e| {
            e.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.is_file()
                        && p.extension().is_some_and(|x| x == "json")
                        && !p
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn parse<T: for<'de> Deserialize<'de>>(value: &Value, file: &Path) -> Result<T, Vec<Problem>> {
    let value = crate::util::json::without_schema_member(value)
        .map_err(|m| vec![Problem::new(file, crate::util::json::SCHEMA_MEMBER, m)])?;
    serde_path_to_error::deserialize(value.as_ref()).map_err(|e| {
        vec![Problem::new(
            file,
            crate::config::slash_path(e.path()),
            e.inner().to_string(),
        )]
    })
}

fn string_props(names: &[(String, Option<String>)]) -> Map<String, Value> {
    names
        .iter()
        .map(|(n, d)| {
            let mut p = json!({"type": "string"});
            if let Some(d) = d {
                p["description"] = json!(d);
            }
            (n.clone(), p)
        })
        .collect()
}

fn resource_operation(
    value: &Value,
    file: &Path,
    uris: &mut BTreeMap<String, std::path::PathBuf>,
) -> Result<Value, Vec<Problem>> {
    let r: ResourceFile = parse(value, file)?;
    let mut problems = Vec::new();
    let vars = match (&r.uri, &r.uri_template) {
        (Some(u), None) => {
            if !is_absolute_uri(u) {
                problems.push(Problem::new(
                    file,
                    "uri",
                    format!("`{u}` is not an absolute URI (expected e.g. `file:///notes.txt` or `test://static`)"),
                ));
            }
            Vec::new()
        }
        (None, Some(t)) => match template_vars(t) {
            Ok(v) => v,
            Err(m) => {
                problems.push(Problem::new(file, "uri_template", m));
                Vec::new()
            }
        },
        _ => {
            problems.push(Problem::new(
                file,
                "",
                "expected exactly one of `uri` (a fixed resource) or `uri_template` (RFC 6570 level 1)",
            ));
            Vec::new()
        }
    };
    if let Some(key) = r.uri.as_ref().or(r.uri_template.as_ref()) {
        if let Some(first) = uris.get(key) {
            problems.push(Problem::new(
                file,
                if r.uri.is_some() {
                    "uri"
                } else {
                    "uri_template"
                },
                format!("`{key}` is also the URI of {}", first.display()),
            ));
        } else {
            uris.insert(key.clone(), file.to_path_buf());
        }
    }
    for k in r.completions.keys() {
        if !vars.contains(k) {
            problems.push(Problem::new(
                file,
                format!("completions/{k}"),
                format!("`{k}` is not a variable of the URI template"),
            ));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut meta = serde_json::to_value(&r).unwrap_or_default();
    if let Value::Object(m) = &mut meta {
        m.remove("mock");
    }
    let names: Vec<(String, Option<String>)> = vars.iter().map(|v| (v.clone(), None)).collect();
    let mut op = json!({
        "operation_id": r.name,
        "annotations": {"readOnlyHint": true},
        "input_schema": {
            "type": "object",
            "properties": string_props(&names),
            "required": vars,
            RESOURCE_KEY: meta,
        },
        "output_schema": {
            "type": "object",
            "required": ["contents"],
            "properties": {"contents": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["uri"],
                    "properties": {"uri": {"type": "string"}, "mimeType": {"type": "string"},
                                   "text": {"type": "string"}, "blob": {"type": "string"}},
                    "anyOf": [{"required": ["text"]}, {"required": ["blob"]}]
                }
            }}
        },
    });
    set_common(&mut op, r.title, r.description, r.mock.map(wrap_contents));
    Ok(op)
}

fn prompt_operation(value: &Value, file: &Path) -> Result<Value, Vec<Problem>> {
    let p: PromptFile = parse(value, file)?;
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for (i, a) in p.arguments.iter().enumerate() {
        if seen.contains(&a.name) {
            problems.push(Problem::new(
                file,
                format!("arguments/{i}/name"),
                format!("argument `{}` is declared twice", a.name),
            ));
        }
        seen.push(a.name.clone());
    }
    for k in p.completions.keys() {
        if !seen.contains(k) {
            problems.push(Problem::new(
                file,
                format!("completions/{k}"),
                format!("`{k}` is not an argument of the prompt"),
            ));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut meta = serde_json::to_value(&p).unwrap_or_default();
    if let Value::Object(m) = &mut meta {
        m.remove("mock");
    }
    let names: Vec<(String, Option<String>)> = p
        .arguments
        .iter()
        .map(|a| (a.name.clone(), a.description.clone()))
        .collect();
    let required: Vec<&str> = p
        .arguments
        .iter()
        .filter(|a| a.required)
        .map(|a| a.name.as_str())
        .collect();
    let mut op = json!({
        "operation_id": p.name,
        "annotations": {"readOnlyHint": true},
        "input_schema": {
            "type": "object",
            "properties": string_props(&names),
            "required": required,
            PROMPT_KEY: meta,
        },
        "output_schema": {
            "type": "object",
            "required": ["messages"],
            "properties": {
                "description": {"type": "string"},
                "messages": {"type": "array", "items": {"type": "object", "required": ["role", "content"],
                    "properties": {"role": {"enum": ["user", "assistant"]}, "content": {"type": "object", "required": ["type"]}}}}
            }
        },
    });
    set_common(&mut op, p.title, p.description, p.mock);
    Ok(op)
}

/// A resource mock's results are the `contents` array; the operation's results are
/// `{"contents": [...]}` (MCP results are objects), so every `result` and `expected` is
/// wrapped.
fn wrap_contents(mut mock: Value) -> Value {
    let wrap = |v: &mut Value| *v = json!({"contents": v.take()});
    if let Some(vs) = mock.get_mut("variants").and_then(Value::as_object_mut) {
        for v in vs.values_mut() {
            if let Some(r) = v.get_mut("result") {
                wrap(r);
            }
            if let Some(rules) = v.get_mut("rules").and_then(Value::as_array_mut) {
                for rule in rules {
                    if let Some(r) = rule.get_mut("result") {
                        wrap(r);
                    }
                }
            }
        }
    }
    if let Some(es) = mock.get_mut("examples").and_then(Value::as_array_mut) {
        for e in es {
            if let Some(r) = e.get_mut("expected") {
                wrap(r);
            }
        }
    }
    mock
}

fn set_common(
    op: &mut Value,
    title: Option<String>,
    description: Option<String>,
    mock: Option<Value>,
) {
    if let Some(t) = title {
        op["title"] = json!(t);
    }
    if let Some(d) = description {
        op["description"] = json!(d);
    }
    if let Some(m) = mock {
        op["mock"] = m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, v: Value) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, v.to_string()).unwrap();
    }

    #[test]
    fn resources_and_prompts_load_as_operations_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let contents = json!([{"uri": "test://a", "text": "hi"}]);
        write(
            dir.path(),
            "resources/a.json",
            json!({"name": "a", "uri": "test://a", "mime_type": "text/plain",
            "mock": {"schema_version": 1, "default_variant": "ok", "variants": {"ok": {"result": contents}},
                     "examples": [{"variant": "ok", "input": {}, "expected": contents}]}}),
        );
        write(
            dir.path(),
            "prompts/p.json",
            json!({"name": "p", "description": "d",
            "arguments": [{"name": "x", "required": true}], "completions": {"x": ["one"]},
            "mock": {"schema_version": 1, "default_variant": "ok", "variants": {"ok": {"result":
                {"messages": [{"role": "user", "content": {"type": "text", "text": {"$input": "x"}}}]}}},
                "examples": [{"variant": "ok", "input": {"x": "v"}, "expected":
                {"messages": [{"role": "user", "content": {"type": "text", "text": "v"}}]}}]}}),
        );
        let (ops, problems) = load_extras(dir.path());
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].op.input_schema[RESOURCE_KEY]["uri"], "test://a");
        assert_eq!(
            ops[1].op.input_schema[PROMPT_KEY]["arguments"][0]["name"],
            "x"
        );
        assert_eq!(ops[1].op.input_schema["required"], json!(["x"]));
        for l in &ops {
            let p = super::super::check::check_operation_hashed(
                &l.op,
                crate::contract::ProfileKind::Mcp,
                &l.file,
                None,
                None,
            );
            assert!(p.is_empty(), "{p:?}");
        }
        // Broken files: a bad template, a duplicate URI, an unknown key, a bad completion key.
        write(
            dir.path(),
            "resources/b.json",
            json!({"name": "b", "uri_template": "test://{+x}"}),
        );
        write(
            dir.path(),
            "resources/c.json",
            json!({"name": "c", "uri": "test://a"}),
        );
        write(
            dir.path(),
            "resources/d.json",
            json!({"name": "d", "uri": "test://d", "mimeType": "x"}),
        );
        write(
            dir.path(),
            "prompts/q.json",
            json!({"name": "q", "completions": {"nope": []}}),
        );
        let (_, problems) = load_extras(dir.path());
        let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 4, "{text:?}");
        assert!(text.iter().any(|t| t.contains("level-1")), "{text:?}");
        assert!(
            text.iter().any(|t| t.contains("also the URI of")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|t| t.contains("unknown field `mimeType`")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|t| t.contains("not an argument")),
            "{text:?}"
        );
    }
}
