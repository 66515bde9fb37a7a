//! OpenAPI import (`--from openapi`): OpenAPI 3.0 and 3.1 documents, JSON or YAML, read as
//! one `serde_json::Value` so both versions share one path.
//!
//! # What maps
//! - One operation per path + method (`get`, `put`, `post`, `delete`, `options`, `head`,
//!   `patch`, `trace`). Its id is the `operationId` normalised (`get-board` → `get_board`,
//!   `listPets` → `list_pets`), else derived from method and path (`get_pets_pet_id`); its
//!   description the `summary` (else `description`).
//! - `match`: the method, and the path with each `{param}` a capture (named as the
//!   parameter, non-identifier characters as `_`), also inside a segment with text around it
//!   (`{Sid}.json`). A **required** query parameter becomes a
//!   `match.query` capture `{name}`. A form-encoded or multipart request body (the media type
//!   picked below) is `match.body` `form` / `multipart`, so `drift` sends it that way.
//! - Input schema: the path and required query parameters (captures are text, so an
//!   `integer`/`number`/`boolean` parameter becomes a string with a pattern spelling that
//!   type; its other constraints are listed as not mapped), plus the `application/json`
//!   (else form-encoded, else multipart: its fields are members, typed by this schema when a
//!   call arrives) request body — an object body's properties are merged in (as the proxy merges an
//!   object body into the input), any other body is the input's `body`. Path-level and
//!   operation-level parameters are merged (the operation's win).
//! - Output schema: the first 2xx response (lowest code; `2XX` counts as 200) wrapped in the
//!   profile's envelope `{"status", "data"}`; `data` is its `application/json` (or `+json`)
//!   schema, absent when it has no content.
//! - Schemas: local `$ref`s (`#/components/…`) are inlined (a cycle is kept as a `$defs`
//!   reference); 3.0's `nullable: true` becomes a `null` type, its boolean
//!   `exclusiveMinimum`/`exclusiveMaximum` become 2020-12 numbers, `example` becomes
//!   `examples`.
//! - Mock: one variant per named example of that response (`examples.<name>.value`), else one
//!   variant `example` for its `example`; each with one example whose input is generated from
//!   the input schema. With no example at all, the mock is [`crate::author::generate`]'s
//!   draft; when it cannot generate one, the operation is written without a mock (contract
//!   only) and the report says why.
//!
//! # What does not (each listed in the report with its JSON path)
//! - header and cookie parameters, optional query parameters (a `match.query` template
//!   requires its parameter), request bodies that are neither JSON nor a form, 2xx bodies
//!   that are not JSON, remote `$ref`s,
//!   example values given by `externalValue`, an operation without a 2xx response.
//! - Listed as notes, by design: the other responses (only the first 2xx is mocked),
//!   `callbacks`, `webhooks`, `security`, `servers` (the integration's `upstream` is the
//!   base).

use super::{capture_name, normalise_id, Draft, Imported, Note};
use crate::contract::{BodyEncoding, MatchSpec, OperationFile, ProfileKind};
use crate::mock::path::pointer_push;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Read one OpenAPI document (module doc).
pub fn import(file: &Path, text: &str, profile: ProfileKind) -> Result<Imported, String> {
    let doc: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text)
            .map_err(|e| format!("{}: not a JSON OpenAPI document: {e}", file.display()))?
    } else {
        yaml_serde::from_str(text)
            .map_err(|e| format!("{}: not a YAML OpenAPI document: {e}", file.display()))?
    };
    let version = doc
        .get("openapi")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            format!(
                "{}: openapi: missing: not an OpenAPI 3 document (Swagger 2.0 is not read)",
                file.display()
            )
        })?
        .to_string();
    let v30 = if version.starts_with("3.0") {
        true
    } else if version.starts_with("3.1") {
        false
    } else {
        return Err(format!(
            "{}: openapi: `{version}`: expected 3.0.x or 3.1.x",
            file.display()
        ));
    };
    let mut cx = Cx::new(file, &doc, v30);
    for k in ["webhooks", "security", "servers"] {
        if doc.get(k).is_some() {
            cx.info.push(format!(
                "{}: {k}: not imported (by design: {})",
                file.display(),
                match k {
                    "webhooks" => "understudy answers requests, it sends none",
                    "servers" => "the integration's `upstream` is the base URL",
                    _ => "understudy does not check credentials",
                }
            ));
        }
    }
    let empty = Map::new();
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    // (path, method, path item with its `$ref` followed, operation, JSON path), in document order.
    let mut jobs: Vec<(&str, &str, Arc<Value>, Value, String)> = Vec::new();
    for (path, item) in paths {
        let item_at = pointer_push("paths", path);
        let Some(item) = cx.follow(item, &item_at) else {
            continue;
        };
        let item = Arc::new(item);
        for m in METHODS {
            let Some(operation) = item.get(*m) else {
                continue;
            };
            jobs.push((
                path,
                m,
                item.clone(),
                operation.clone(),
                format!("{item_at}/{m}"),
            ));
        }
    }
    // The operations are independent: drafted on every core (a 10 MB document has
    // thousands), each with its own notes, merged in document order.
    let done = crate::operation::load::par_map(jobs, |(path, m, item, operation, at)| {
        let mut one = Cx::new(file, &doc, v30);
        let d = one.operation(path, m, &item, &operation, &at, profile);
        (d, one.notes, one.info)
    });
    let mut drafts = Vec::new();
    for (d, notes, info) in done {
        drafts.extend(d);
        for n in notes {
            cx.push_note(n);
        }
        cx.info.extend(info);
    }
    Ok(Imported {
        drafts,
        notes: cx.notes,
        info: cx.info,
    })
}

struct Cx<'a> {
    file: &'a Path,
    doc: &'a Value,
    v30: bool,
    notes: Vec<Note>,
    /// The notes already given, so each is given once (a set: a large document has tens of
    /// thousands, and a list search per note made the import quadratic).
    seen: HashSet<Note>,
    info: Vec<String>,
}

impl<'a> Cx<'a> {
    fn new(file: &'a Path, doc: &'a Value, v30: bool) -> Cx<'a> {
        Cx {
            file,
            doc,
            v30,
            notes: Vec::new(),
            seen: HashSet::new(),
            info: Vec::new(),
        }
    }

    /// A note, once (path-level parameters are seen by every method of the path).
    fn note(&mut self, at: &str, msg: impl Into<String>) {
        self.push_note(Note::new(self.file, at.trim_start_matches('/'), msg));
    }

    fn push_note(&mut self, n: Note) {
        if self.seen.insert(n.clone()) {
            self.notes.push(n);
        }
    }

    fn operation(
        &mut self,
        path: &str,
        method: &str,
        item: &Value,
        op: &Value,
        at: &str,
        profile: ProfileKind,
    ) -> Option<Draft> {
        let mut reasons = Vec::new();
        let id = op
            .get("operationId")
            .and_then(Value::as_str)
            .map(normalise_id)
            .unwrap_or_else(|| normalise_id(&format!("{method} {path}")));
        for k in ["callbacks", "security"] {
            if op.get(k).is_some() {
                self.info.push(format!(
                    "{}: {}/{k}: not imported (by design)",
                    self.file.display(),
                    at.trim_start_matches('/')
                ));
            }
        }
        // Parameters: path level, then operation level (same name + in replaces).
        let mut params: BTreeMap<(String, String), (Value, String)> = BTreeMap::new();
        for (list, base) in [
            (
                item.get("parameters"),
                at.rsplit_once('/').map(|x| x.0).unwrap_or(""),
            ),
            (op.get("parameters"), at),
        ] {
            for (i, p) in list
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let pat = format!("{base}/parameters/{i}");
                let Some(p) = self.follow(p, &pat) else {
                    continue;
                };
                let name = p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let loc = p
                    .get("in")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                params.insert((loc, name), (p, pat));
            }
        }
        let mut props = Map::new();
        let mut required: Vec<Value> = Vec::new();
        let mut query = BTreeMap::new();
        let mut path_caps: BTreeMap<String, String> = BTreeMap::new();
        for ((loc, name), (p, pat)) in &params {
            let schema = p
                .get("schema")
                .map(|s| self.schema(s, &format!("{pat}/schema")))
                .unwrap_or_else(|| json!({}));
            let req = p.get("required").and_then(Value::as_bool).unwrap_or(false);
            match loc.as_str() {
                "path" | "query" if loc == "path" || req => {
                    let cap = capture_name(name);
                    let example = p
                        .get("example")
                        .or_else(|| p.get("examples").and_then(|e| e.as_object()?.values().next()?.get("value")))
                        .cloned();
                    let s = self.capture_schema(&schema, example, pat);
                    props.insert(cap.clone(), s);
                    required.push(json!(cap));
                    if loc == "path" {
                        path_caps.insert(name.clone(), cap);
                    } else {
                        query.insert(name.clone(), format!("{{{cap}}}"));
                    }
                }
                "query" => self.note(
                    pat,
                    format!("optional query parameter `{name}` is not part of the match (a `match.query` template requires its parameter): calls with or without it get the same answer, and it is not in the input"),
                ),
                other => self.note(
                    pat,
                    format!("{other} parameter `{name}` is not mapped: the input is built from the path, the query and the body only"),
                ),
            }
        }
        // The path template.
        let mut segs = Vec::new();
        for seg in path.split('/').filter(|s| !s.is_empty()) {
            if let Some(n) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                match path_caps.get(n) {
                    Some(cap) => segs.push(format!("{{{cap}}}")),
                    None => {
                        let cap = capture_name(n);
                        props.insert(cap.clone(), json!({"type": "string", "examples": ["1"]}));
                        required.push(json!(cap));
                        segs.push(format!("{{{cap}}}"));
                    }
                }
            } else if seg.contains('{') && !seg.contains('*') {
                // Text around parameters inside one segment (`{Sid}.json`, `v{version}`).
                let mut out = String::new();
                let mut rest = seg;
                while let Some(i) = rest.find('{') {
                    out.push_str(&rest[..i]);
                    let Some(j) = rest[i..].find('}') else {
                        break;
                    };
                    let n = &rest[i + 1..i + j];
                    let cap = match path_caps.get(n) {
                        Some(cap) => cap.clone(),
                        None => {
                            let cap = capture_name(n);
                            props.insert(cap.clone(), json!({"type": "string", "examples": ["1"]}));
                            required.push(json!(cap));
                            cap
                        }
                    };
                    out.push_str(&format!("{{{cap}}}"));
                    rest = &rest[i + j + 1..];
                }
                out.push_str(rest);
                if out.contains("}{") || out.matches('{').count() != out.matches('}').count() {
                    self.note(
                        &pointer_push("paths", path),
                        format!("path segment `{seg}`: two parameters with no text between them, or an unclosed brace: matched as `*`, its values are not in the input"),
                    );
                    segs.push("*".into());
                } else {
                    segs.push(out);
                }
            } else if seg.contains(['{', '}', '*']) {
                self.note(
                    &pointer_push("paths", path),
                    format!("path segment `{seg}` has `*` or a stray brace: matched as `*`"),
                );
                segs.push("*".into());
            } else {
                segs.push(seg.to_string());
            }
        }
        // The request body.
        let mut body_defs: Option<Value> = None;
        let mut body_encoding: Option<BodyEncoding> = None;
        if let Some(body) = op.get("requestBody") {
            let bat = format!("{at}/requestBody");
            if let Some(body) = self.follow(body, &bat) {
                let req = body
                    .get("required")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                match json_media(&body).or_else(|| form_media(&body)) {
                    Some((ct, media)) => {
                        body_encoding = BodyEncoding::form_of(&ct);
                        let sat = pointer_push(&format!("{bat}/content"), &ct) + "/schema";
                        let s = media
                            .get("schema")
                            .map(|s| self.schema(s, &sat))
                            .unwrap_or_else(|| json!({}));
                        body_defs = s.get("$defs").cloned();
                        let object_props = s
                            .get("properties")
                            .and_then(Value::as_object)
                            .filter(|_| s.get("type").is_none_or(|t| t == "object"));
                        match object_props {
                            Some(bp) => {
                                for (k, v) in bp {
                                    props.insert(k.clone(), v.clone());
                                }
                                if req {
                                    for r in s
                                        .get("required")
                                        .and_then(Value::as_array)
                                        .into_iter()
                                        .flatten()
                                    {
                                        required.push(r.clone());
                                    }
                                }
                            }
                            None => {
                                props.insert("body".into(), s);
                                if req {
                                    required.push(json!("body"));
                                }
                            }
                        }
                    }
                    None => self.note(
                        &format!("{bat}/content"),
                        "the request body is neither JSON nor a form (form-encoded, multipart): not in the input",
                    ),
                }
            }
        }
        // A recursive schema's `$defs` (its `#/$defs/…` references resolve from the root):
        // hoisted from the members to the input schema's root.
        let mut defs = Map::new();
        for v in props.values_mut() {
            if let Some(Value::Object(d)) = v.as_object_mut().and_then(|m| m.remove("$defs")) {
                defs.extend(d);
            }
        }
        if let Some(Value::Object(d)) = body_defs.take() {
            defs.extend(d);
        }
        let mut input_schema = json!({"type": "object", "properties": props});
        if !defs.is_empty() {
            input_schema["$defs"] = Value::Object(defs);
        }
        if !required.is_empty() {
            let mut seen = Vec::new();
            for r in required {
                if !seen.contains(&r) {
                    seen.push(r);
                }
            }
            input_schema["required"] = Value::Array(seen);
        }
        // The first 2xx response.
        let responses = op.get("responses").and_then(Value::as_object);
        let mut codes: Vec<(u16, &String)> = responses
            .into_iter()
            .flatten()
            .filter_map(|(k, _)| {
                let n = if k.eq_ignore_ascii_case("2XX") {
                    200
                } else {
                    k.parse().ok()?
                };
                (200..300).contains(&n).then_some((n, k))
            })
            .collect();
        codes.sort();
        let Some(&(status, key)) = codes.first() else {
            self.note(
                &format!("{at}/responses"),
                format!("no 2xx response: operation `{id}` not imported"),
            );
            return None;
        };
        let rat = pointer_push(&format!("{at}/responses"), key);
        for (k, _) in responses.into_iter().flatten() {
            if k != key {
                self.info.push(format!(
                    "{}: {}: not mocked (only the first 2xx response is)",
                    self.file.display(),
                    pointer_push(&format!("{at}/responses"), k).trim_start_matches('/')
                ));
            }
        }
        let resp = responses
            .and_then(|r| r.get(key))
            .and_then(|r| self.follow(r, &rat))
            .unwrap_or_else(|| json!({}));
        let mut examples: Vec<(String, Value, String)> = Vec::new();
        let data_schema = match json_media(&resp) {
            Some((ct, media)) => {
                let mat = pointer_push(&format!("{rat}/content"), &ct);
                if let Some(ex) = media.get("examples").and_then(Value::as_object) {
                    for (name, e) in ex {
                        let eat = pointer_push(&format!("{mat}/examples"), name);
                        let Some(e) = self.follow(e, &eat) else {
                            continue;
                        };
                        match e.get("value") {
                            Some(v) => examples.push((name.clone(), v.clone(), format!("{eat}/value"))),
                            None => self.note(
                                &eat,
                                "an example without `value` (`externalValue` is not fetched): not a variant",
                            ),
                        }
                    }
                } else if let Some(v) = media.get("example") {
                    examples.push(("example".into(), v.clone(), format!("{mat}/example")));
                }
                Some(
                    media
                        .get("schema")
                        .map(|s| self.schema(s, &format!("{mat}/schema")))
                        .unwrap_or_else(|| json!({})),
                )
            }
            None => {
                if resp
                    .get("content")
                    .and_then(Value::as_object)
                    .is_some_and(|c| !c.is_empty())
                {
                    self.note(
                        &format!("{rat}/content"),
                        "the response is not JSON: the mock answers without a body",
                    );
                }
                None
            }
        };
        let mut output_schema = json!({
            "type": "object",
            "required": ["status"],
            "properties": {"status": {"type": "integer"}, "headers": {"type": "object"}},
        });
        if let Some(d) = &data_schema {
            output_schema["required"] = json!(["status", "data"]);
            let mut d = d.clone();
            if let Some(defs) = d.as_object_mut().and_then(|m| m.remove("$defs")) {
                output_schema["$defs"] = defs;
            }
            output_schema["properties"]["data"] = d;
        }
        let description = op
            .get("summary")
            .or_else(|| op.get("description"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut file = OperationFile {
            operation_id: id.clone(),
            description,
            title: None,
            match_spec: Some(MatchSpec {
                method: method.to_ascii_uppercase(),
                path: format!("/{}", segs.join("/")),
                query,
                headers: BTreeMap::new(),
                body: body_encoding,
            }),
            write: None,
            input_schema: input_schema.into(),
            output_schema: output_schema.into(),
            idempotency: None,
            annotations: None,
            result_form: None,
            mock: None,
        };
        let hash = file.contract_hash(profile);
        let mock = self.mock(
            (&file, &hash),
            (status, data_schema.as_ref()),
            &examples,
            profile,
            &mut reasons,
            at,
        );
        file.mock = mock.map(Into::into);
        super::rehash(&mut file, profile);
        Some(Draft {
            op: file,
            sources: vec![format!(
                "{}#{}",
                self.file.display(),
                at.trim_start_matches('/')
            )],
            reasons,
        })
    }

    /// The schema of a path or query capture: captures are text, so a typed parameter becomes
    /// a string spelling that type (module doc), with an example value for `generate`.
    fn capture_schema(&mut self, s: &Value, example: Option<Value>, at: &str) -> Value {
        let ty = s.get("type").and_then(Value::as_str).unwrap_or("string");
        let text = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
            _ => None,
        };
        let example = example
            .as_ref()
            .and_then(text)
            .or_else(|| s.get("examples").and_then(|e| e.get(0)).and_then(text))
            .or_else(|| s.get("default").and_then(text))
            .or_else(|| s.get("enum").and_then(|e| e.get(0)).and_then(text))
            .or_else(|| s.get("minimum").and_then(text));
        let mut out = match ty {
            "integer" => json!({"type": "string", "pattern": "^-?[0-9]+$"}),
            "number" => json!({"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?$"}),
            "boolean" => json!({"type": "string", "enum": ["true", "false"]}),
            "string" => {
                let mut m = s.clone();
                if let Value::Object(o) = &mut m {
                    o.remove("examples");
                }
                m
            }
            other => {
                self.note(
                    at,
                    format!("a `{other}` parameter: captured as text, its schema is not kept"),
                );
                json!({"type": "string"})
            }
        };
        if matches!(ty, "integer" | "number") {
            let lost: Vec<&str> = [
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
                "multipleOf",
            ]
            .into_iter()
            .filter(|k| s.get(*k).is_some())
            .collect();
            if !lost.is_empty() {
                self.note(
                    at,
                    format!("{} of an {ty} parameter: not checked (captures are text; the input schema checks only that it spells an {ty})", lost.join(", ")),
                );
            }
        }
        let default = match ty {
            "boolean" => "true",
            "integer" | "number" => "1",
            _ => "example",
        };
        if out.get("enum").is_none() && out.get("const").is_none() {
            out["examples"] = json!([example.unwrap_or_else(|| default.to_string())]);
        }
        out
    }

    /// One variant per named example; else `generate`; else none (reasons say why).
    fn mock(
        &mut self,
        (op, hash): (&OperationFile, &str),
        (status, data_schema): (u16, Option<&Value>),
        examples: &[(String, Value, String)],
        profile: ProfileKind,
        reasons: &mut Vec<String>,
        at: &str,
    ) -> Option<Value> {
        let has_data = data_schema.is_some();
        let g = crate::author::generate::generate_hashed(op, profile, hash);
        for r in &g.replaced {
            self.note(
                at,
                format!("a schema `example`/`default` fails its own schema ({r}): replaced by a generated value"),
            );
        }
        // Examples that fail the response schema are reported and replaced by the generated
        // value (a draft never keeps a value its own contract refuses).
        let validator = data_schema.and_then(|s| crate::contract::compile_schema(s).ok());
        let generated_data = g
            .definition
            .as_ref()
            .map(|d| d["variants"]["default"]["result"]["data"].clone());
        let mut kept: Vec<(String, Value)> = Vec::new();
        for (name, value, eat) in examples {
            let why = validator.as_ref().and_then(|v| {
                v.iter_errors(value).next().map(|e| {
                    let p = e.instance_path().to_string();
                    format!("at `{}`: {e}", if p.is_empty() { "/" } else { &p })
                })
            });
            match (why, &generated_data) {
                (None, _) => kept.push((name.clone(), value.clone())),
                (Some(why), Some(d)) => {
                    self.note(
                        eat,
                        format!("the example fails the response schema ({why}): replaced by a generated value"),
                    );
                    kept.push((name.clone(), d.clone()));
                }
                (Some(why), None) => self.note(
                    eat,
                    format!("the example fails the response schema ({why}) and no value could be generated: not a variant"),
                ),
            }
        }
        let examples = kept;
        if examples.is_empty() {
            if !g.supported {
                reasons.push(format!(
                    "no example in the document and no draft could be generated: {} — written without a mock",
                    g.reasons.join("; ")
                ));
                return None;
            }
            let mut def = g.definition?;
            // The documented status, not the generator's default.
            set_status(&mut def["variants"]["default"]["result"], status);
            for e in def["examples"].as_array_mut().into_iter().flatten() {
                set_status(&mut e["expected"], status);
            }
            return Some(def);
        }
        // The input every example is asked with: generated from the input schema.
        let input = match &g.definition {
            Some(d) => d["examples"][0]["input"].clone(),
            None => {
                let only_input = OperationFile {
                    output_schema: json!({}).into(),
                    ..op.clone()
                };
                let gi = crate::author::generate::generate(&only_input, profile);
                match gi.definition {
                    Some(d) => d["examples"][0]["input"].clone(),
                    None => {
                        reasons.push(format!(
                            "no input could be generated for the examples: {} — written without a mock",
                            gi.reasons.join("; ")
                        ));
                        return None;
                    }
                }
            }
        };
        let mut variants = Map::new();
        let mut exs = Vec::new();
        for (name, value) in &examples {
            let vname = variant_name(name, &variants);
            let result = if has_data {
                json!({"status": status, "data": value})
            } else {
                json!({"status": status})
            };
            variants.insert(vname.clone(), json!({"result": result.clone()}));
            exs.push(json!({"variant": vname, "input": input, "expected": result}));
            if variants.len() >= crate::mock::model::limits::MAX_VARIANTS {
                reasons.push(format!(
                    "more than {} named examples: the rest are not variants",
                    crate::mock::model::limits::MAX_VARIANTS
                ));
                break;
            }
        }
        let default = exs[0]["variant"].clone();
        Some(json!({
            "schema_version": 1,
            "default_variant": default,
            "variants": variants,
            "examples": exs,
        }))
    }
}

fn set_status(result: &mut Value, status: u16) {
    if let Some(m) = result.as_object_mut() {
        m.insert("status".into(), json!(status));
    }
}

/// A variant name from an example name: kept when it is free, else suffixed.
fn variant_name(name: &str, taken: &Map<String, Value>) -> String {
    let base = if name.is_empty() { "example" } else { name };
    let mut n = base.to_string();
    let mut i = 2;
    while taken.contains_key(&n) {
        n = format!("{base}_{i}");
        i += 1;
    }
    n
}

/// The JSON media type of a request body or response: `application/json`, else any
/// `…+json` or `…/json` one.
fn json_media(v: &Value) -> Option<(String, Value)> {
    let content = v.get("content")?.as_object()?;
    let pick = content.get_key_value("application/json").or_else(|| {
        content.iter().find(|(k, _)| {
            let base = k.split(';').next().unwrap_or("").trim();
            base.ends_with("+json") || base.ends_with("/json")
        })
    })?;
    Some((pick.0.clone(), pick.1.clone()))
}

/// The form media type of a request body (`application/x-www-form-urlencoded`, else
/// `multipart/form-data`): its fields are input members like a JSON object's
/// (`crate::http::form`).
fn form_media(v: &Value) -> Option<(String, Value)> {
    let content = v.get("content")?.as_object()?;
    [BodyEncoding::Form, BodyEncoding::Multipart]
        .iter()
        .find_map(|want| {
            content
                .iter()
                .find(|(k, _)| BodyEncoding::form_of(k) == Some(*want))
        })
        .map(|(k, m)| (k.clone(), m.clone()))
}

mod schema;

#[cfg(test)]
mod tests {
    use super::*;

    fn cx(doc: &Value, v30: bool) -> Cx<'_> {
        Cx::new(Path::new("t.yaml"), doc, v30)
    }

    #[test]
    fn schemas_are_converted_and_refs_inlined() {
        let doc = json!({"components": {"schemas": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
            "B": {"type": "integer", "nullable": true, "minimum": 0, "exclusiveMinimum": true, "example": 3},
            "N": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/N"}}}
        }}});
        let mut c = cx(&doc, true);
        let s = c.schema(&json!({"$ref": "#/components/schemas/A"}), "x");
        assert_eq!(
            s,
            json!({"type": "object", "properties": {"b": {"type": ["integer", "null"], "exclusiveMinimum": 0, "examples": [3]}}})
        );
        let n = c.schema(&json!({"$ref": "#/components/schemas/N"}), "x");
        assert_eq!(n["properties"]["next"], json!({"$ref": "#/$defs/n"}));
        assert!(crate::contract::compile_schema(&n).is_ok(), "{n}");
        let bad = c.schema(&json!({"$ref": "other.yaml#/X"}), "x");
        assert_eq!(bad, json!({}));
        assert_eq!(c.notes.len(), 1);
    }
}
