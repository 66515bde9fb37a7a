//! `understudy schema NAME` prints the JSON Schema (draft 2020-12) of a file a user writes;
//! `understudy schema --all --out DIR` writes every one to `DIR/NAME.schema.json` (the
//! repository keeps them in `schemas/`), and `--check` only compares.
//!
//! The schemas are generated from the serde models the parsers use (`schemars`), so they
//! cannot drift from them: `deny_unknown_fields` shows as `additionalProperties: false`, and
//! the limits and patterns the models declare with `#[schemars(...)]` are the ones `check`
//! enforces. What a schema cannot say (rules across files, the profile an operation is loaded
//! as, evaluating a mock's examples) is listed in `docs/src/reference/schemas.md`.
//!
//! Two adjustments are made here, the same for every schema:
//! - optional members are written without `null`: understudy reads `null` as "absent", but a
//!   file should leave the member out, and editors complete better without it;
//! - every file may carry a top-level `$schema` string (the parsers take it off before the
//!   strict parse, `crate::util::json::strip_schema_member`).
//!
//! The operation, resource and prompt files keep their `mock` raw in the models (so `check`
//! can report a definition's problems with their paths); their schemas put the version-1
//! definition's schema there.

use std::path::Path;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::Exit;
use crate::cli::{SchemaArgs, SchemaName};
use crate::util::json::SCHEMA_MEMBER;

/// The file name a schema is written to by `--all`.
pub fn file_name(name: SchemaName) -> String {
    format!("{}.schema.json", name.as_str())
}

/// The schema of `name`'s files.
pub fn schema(name: SchemaName) -> Value {
    let root = match name {
        SchemaName::Project => root::<crate::config::RawConfig>(false),
        SchemaName::Operation => root::<crate::contract::OperationFile>(true),
        SchemaName::Resource => root::<crate::operation::mcp_files::ResourceFile>(true),
        SchemaName::Prompt => root::<crate::operation::mcp_files::PromptFile>(true),
        SchemaName::Contract => root::<crate::evidence::verify::model::ToolCallContract>(false),
        SchemaName::Evidence => root::<crate::evidence::Envelope>(false),
    };
    let mut v = root.to_value();
    // The envelope is written by understudy, with `null` where a value is absent: its
    // schema keeps them.
    drop_null(&mut v, name != SchemaName::Evidence);
    if let Some(props) = v.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            SCHEMA_MEMBER.to_string(),
            json!({
                "description": "The JSON Schema of this file, for editors (a URL or a path relative to the file); understudy ignores it.",
                "type": "string",
            }),
        );
    }
    v
}

/// The text written for a schema: pretty JSON and a final newline.
pub fn render(schema: &Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}

/// The root schema of `T`; with `mock`, its `mock` member is the version-1 definition.
fn root<T: JsonSchema>(mock: bool) -> Schema {
    let mut generator: SchemaGenerator = SchemaSettings::draft2020_12().into_generator();
    let definition = mock.then(|| generator.subschema_for::<crate::mock::model::Definition>());
    let mut root = generator.into_root_schema_for::<T>();
    if let Some(definition) = definition {
        if let Some(props) = root.get_mut("properties").and_then(Value::as_object_mut) {
            let mut member = Map::new();
            member.insert(
                "description".into(),
                "The mock definition (version 1): variants, rules, examples and the initial state."
                    .into(),
            );
            member.extend(
                definition
                    .to_value()
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            props.insert("mock".into(), Value::Object(member));
        }
    }
    root
}

/// With `nulls`: every `{"type": [T, "null"]}` becomes `{"type": T}`, every `anyOf: [S,
/// {"type": "null"}]` becomes `S` (what schemars writes for an `Option`), and `"default":
/// null` goes. Always: descriptions are one line per paragraph.
fn drop_null(v: &mut Value, nulls: bool) {
    match v {
        Value::Object(m) => {
            if nulls && m.get("default") == Some(&Value::Null) {
                m.remove("default");
            }
            // Doc comments are wrapped at 100 columns: one line per paragraph.
            if let Some(Value::String(d)) = m.get_mut("description") {
                *d = d
                    .split("\n\n")
                    .map(|p| p.split('\n').collect::<Vec<_>>().join(" "))
                    .collect::<Vec<_>>()
                    .join("\n\n");
            }
            if !nulls {
                m.values_mut().for_each(|x| drop_null(x, nulls));
                return;
            }
            if let Some(Value::Array(types)) = m.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    m.insert("type".into(), only);
                }
            }
            let null = json!({"type": "null"});
            let single = match m.get("anyOf") {
                Some(Value::Array(a)) if a.len() == 2 && a.contains(&null) => {
                    a.iter().find(|s| **s != null).cloned()
                }
                _ => None,
            };
            if let Some(Value::Object(inner)) = single {
                m.remove("anyOf");
                for (k, x) in inner {
                    m.entry(k).or_insert(x);
                }
            }
            m.values_mut().for_each(|x| drop_null(x, nulls));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| drop_null(x, nulls)),
        _ => {}
    }
}

/// `understudy schema`.
pub fn schema_command(args: &SchemaArgs) -> Exit {
    match (args.name, &args.out) {
        (Some(name), _) => {
            print!("{}", render(&schema(name)));
            Exit::Ok
        }
        (None, Some(dir)) => write_all(dir, args.check),
        (None, None) => {
            eprintln!("understudy schema: expected NAME or --all --out DIR");
            Exit::Usage
        }
    }
}

fn write_all(dir: &Path, check: bool) -> Exit {
    let mut differ = Vec::new();
    for name in SchemaName::ALL {
        let path = dir.join(file_name(name));
        let text = render(&schema(name));
        if check {
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                differ.push(path);
            }
            continue;
        }
        if let Err(e) = std::fs::create_dir_all(dir)
            .and_then(|()| crate::util::fs::write_atomic(&path, text.as_bytes()))
        {
            eprintln!("understudy schema: cannot write {}: {e}", path.display());
            return Exit::Problems;
        }
        println!("{}", path.display());
    }
    if differ.is_empty() {
        return Exit::Ok;
    }
    for p in &differ {
        eprintln!(
            "understudy schema: {} is not what the code generates (regenerate: understudy schema --all --out {})",
            p.display(),
            dir.display()
        );
    }
    Exit::Problems
}
