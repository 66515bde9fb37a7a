//! Schema-derived draft mocks (`understudy generate`, admin `{"action":"generate"}`).
//!
//! From an operation's contract alone, build a version-1 definition with one variant
//! `default` and one example: the input is generated from the input schema, the result from
//! the output schema (wrapped in the native envelope for HTTP profiles), and the example's
//! `expected` is what the engine renders. Values come from `const`, `default`, `examples`,
//! `enum`, then the type: required and listed properties, nested objects and arrays
//! (`minItems`, at least one item), `minimum`/`maximum`, `minLength`/`maxLength`, and a fixed
//! valid literal for the formats `date`, `date-time`, `time`, `email`, `uuid`, `uri`,
//! `hostname`, `ipv4`, `ipv6`.
//!
//! `pattern` gives a string made by [`crate::author::sample`] (seeded by the JSON path, so
//! the same schema always gives the same value); `allOf` is merged, `anyOf`/`oneOf` take
//! their first branch that is not only `null`; a local `$ref` (a recursive schema's
//! `$defs`) is followed, bounded. A format the validator does not assert is any text.
//! When the schema's own `default`/`examples` fail the schema, the draft is generated again
//! without them and `replaced` says which failed where.
//! When a schema needs more (`not`/`if`, `patternProperties`, …) and no
//! `const`/`default`/`examples`/`enum` settles the value, the
//! answer is `supported: false` with a reason per place, never a draft that would fail.
//! Every draft is run through [`check_operation_hashed`] before it is called supported.

use crate::contract::ProfileKind;
use crate::contract::{MockText, OperationFile, ResultForm};
use crate::mock::eval::Engine;
use crate::mock::model::Definition;
use crate::mock::path::pointer_push;
use crate::operation::check::check_operation_hashed;
use serde_json::{json, Map, Number, Value};
use std::path::Path;

/// What [`generate`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateResult {
    pub supported: bool,
    /// Values the schemas offered (`examples`, `default`) that their own schema refuses:
    /// `json/path: why`, each replaced by a generated value.
    pub replaced: Vec<String>,
    /// Why not (empty when supported): `json/path: what the generator cannot do`.
    pub reasons: Vec<String>,
    /// The draft definition (the `mock` member, `contract_hash` included) when supported.
    pub definition: Option<Value>,
}

impl GenerateResult {
    /// `{"supported","reasons","definition"}`.
    pub fn to_json(&self) -> Value {
        json!({ "supported": self.supported, "reasons": self.reasons, "replaced": self.replaced, "definition": self.definition })
    }

    fn unsupported(reasons: Vec<String>) -> GenerateResult {
        GenerateResult {
            supported: false,
            replaced: Vec::new(),
            reasons,
            definition: None,
        }
    }
}

/// Build a checked draft definition for `op` under `profile` (see the module doc).
pub fn generate(op: &OperationFile, profile: ProfileKind) -> GenerateResult {
    generate_hashed(op, profile, &op.contract_hash(profile))
}

/// [`generate`] with `op`'s contract hash under `profile` already computed (an importer
/// computes it once per operation: hashing the contract is not free on large schemas).
pub fn generate_hashed(op: &OperationFile, profile: ProfileKind, hash: &str) -> GenerateResult {
    let first = generate_with(op, profile, true, hash);
    if first.supported {
        return first;
    }
    // A value the schema offered (`examples`, `default`) failed its own schema: generate
    // without them, and say which ones were replaced.
    let mut second = generate_with(op, profile, false, hash);
    if second.supported {
        second.replaced = first.reasons;
    }
    second
}

fn generate_with(
    op: &OperationFile,
    profile: ProfileKind,
    trust: bool,
    hash: &str,
) -> GenerateResult {
    let kind = profile;
    let mut g = Gen {
        reasons: Vec::new(),
        wrapped_body: false,
        trust,
        root: op.input_schema.as_ref().clone(),
    };
    let input = g.value(&op.input_schema, "input_schema", 0);
    g.root = op.output_schema.as_ref().clone();
    let result = match kind {
        ProfileKind::Rest | ProfileKind::Salesforce => g.envelope(op, kind),
        ProfileKind::Mcp => match op.result_form.unwrap_or(ResultForm::Structured) {
            ResultForm::CallToolResult if is_empty_schema(&op.output_schema) => {
                json!({"content": [{"type": "text", "text": "ok"}], "isError": false})
            }
            _ if is_empty_schema(&op.output_schema) => json!({}),
            _ => g.value(&op.output_schema, "output_schema", 0),
        },
    };
    if !g.reasons.is_empty() {
        return GenerateResult::unsupported(g.reasons);
    }
    let mut definition = json!({
        "contract_hash": hash,
        "schema_version": 1,
        "default_variant": "default",
        "variants": { "default": { "result": result } },
        "examples": [],
    });
    let expected = match Definition::from_value(&definition)
        .map_err(|e| e.to_string())
        .and_then(|d| Engine::new(d).map_err(|e| e.to_string()))
        .and_then(|e| {
            e.evaluate(None, &input, &e.initial_state())
                .map_err(|e| e.to_string())
        }) {
        Ok(o) => o.result,
        Err(e) => {
            return GenerateResult::unsupported(vec![format!(
                "mock: the draft does not evaluate: {e}"
            )])
        }
    };
    definition["examples"] =
        json!([{ "variant": "default", "input": input, "expected": expected }]);
    let mut draft = op.clone();
    draft.mock = Some(MockText::new(&definition));
    let problems = check_operation_hashed(
        &draft,
        profile,
        Path::new(&op.operation_id),
        Some(hash),
        None,
    );
    if !problems.is_empty() {
        let mut reasons: Vec<String> = Vec::new();
        if g.wrapped_body && problems.iter().any(|p| p.message.contains("output_schema")) {
            reasons.push(format!(
                "output_schema: for the `{kind}` profile the output schema describes the native envelope {{\"status\", \"data\", \"headers\"?}}, but this one describes a bare response body: move it under `properties/data`"
            ));
        }
        reasons.extend(problems.into_iter().map(|p| {
            if p.path.is_empty() {
                p.message
            } else {
                format!("{}: {}", p.path, p.message)
            }
        }));
        return GenerateResult::unsupported(reasons);
    }
    GenerateResult {
        supported: true,
        replaced: Vec::new(),
        reasons: Vec::new(),
        definition: Some(definition),
    }
}

fn is_empty_schema(s: &Value) -> bool {
    matches!(s, Value::Bool(true))
        || s.as_object()
            .is_some_and(|m| m.keys().all(|k| is_annotation(k)))
}

fn is_annotation(k: &str) -> bool {
    matches!(
        k,
        "$schema"
            | "$id"
            | "$comment"
            | "title"
            | "description"
            | "$defs"
            | "definitions"
            | "readOnly"
            | "writeOnly"
            | "deprecated"
    )
}

const BEYOND: &[&str] = &[
    "$dynamicRef",
    "$recursiveRef",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
];

const FORMATS: &[(&str, &str)] = &[
    ("date", "2025-01-15"),
    ("date-time", "2025-01-15T09:30:00Z"),
    ("time", "09:30:00Z"),
    ("email", "jane.doe@example.com"),
    ("idn-email", "jane.doe@example.com"),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
    ("uri", "https://example.com/"),
    ("iri", "https://example.com/"),
    ("uri-reference", "https://example.com/"),
    ("hostname", "example.com"),
    ("idn-hostname", "example.com"),
    ("ipv4", "192.0.2.1"),
    ("ipv6", "2001:db8::1"),
    ("byte", "ZXhhbXBsZQ=="),
    ("duration", "P1D"),
    ("uri-template", "https://example.com/{id}"),
    ("json-pointer", "/a/b"),
    ("regex", "^a+$"),
];

struct Gen {
    reasons: Vec<String>,
    /// An HTTP output schema that does not describe the envelope was wrapped as `data`.
    wrapped_body: bool,
    /// Use the schema's own `default` and `examples` (else only `const` and `enum`).
    trust: bool,
    /// The schema being generated from, for local `$ref`s (`#/$defs/…`).
    root: Value,
}

impl Gen {
    fn beyond(&mut self, at: &str, what: String) -> Value {
        self.reasons.push(format!(
            "{at}: {what} is beyond the schema-derived generator; give the schema a `default`, `examples` or `const`, or write the mock by hand"
        ));
        Value::Null
    }

    /// The envelope of an HTTP profile: the output schema's own envelope when it describes
    /// one (`properties` has `status` or `data`), else `{"status": 200|201, "data": …}`.
    fn envelope(&mut self, op: &OperationFile, kind: ProfileKind) -> Value {
        let method = op
            .match_spec
            .as_ref()
            .map(|m| m.method.trim().to_ascii_uppercase())
            .unwrap_or_default();
        let status = if kind == ProfileKind::Salesforce && method == "POST" {
            201
        } else {
            200
        };
        let schema = &op.output_schema;
        let props = schema.get("properties").and_then(Value::as_object);
        let describes_envelope =
            props.is_some_and(|p| p.contains_key("status") || p.contains_key("data"));
        if !describes_envelope {
            if is_empty_schema(schema)
                && kind == ProfileKind::Salesforce
                && matches!(method.as_str(), "PATCH" | "DELETE")
            {
                // Salesforce answers updates and deletes with 204 No Content.
                return json!({ "status": 204 });
            }
            let data = if is_empty_schema(schema) {
                json!({})
            } else {
                self.wrapped_body = true;
                self.value(schema, "output_schema", 0)
            };
            return json!({ "status": status, "data": data });
        }
        if let Some(k) = BEYOND.iter().find(|k| schema.get(**k).is_some()) {
            return self.beyond("output_schema", format!("`{k}`"));
        }
        let mut out = Map::new();
        let empty = json!({});
        let status_schema = props.and_then(|p| p.get("status")).unwrap_or(&empty);
        out.insert("status".into(), self.status(status_schema, status));
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let data_schema = props.and_then(|p| p.get("data"));
        if data_schema.is_some() || required.contains(&"data") {
            let d = match data_schema {
                Some(s) if !is_empty_schema(s) => self.value(s, "output_schema/properties/data", 1),
                _ => json!({}),
            };
            out.insert("data".into(), d);
        }
        if let Some(h) = props.and_then(|p| p.get("headers")) {
            if required.contains(&"headers") {
                let v = self.value(h, "output_schema/properties/headers", 1);
                out.insert("headers".into(), v);
            }
        }
        Value::Object(out)
    }

    fn status(&mut self, schema: &Value, default: u64) -> Value {
        if let Some(v) = fixed(schema, true) {
            return v.clone();
        }
        let lo = schema.get("minimum").and_then(Value::as_u64).unwrap_or(100);
        let hi = schema.get("maximum").and_then(Value::as_u64).unwrap_or(599);
        json!(default.clamp(lo, hi.max(lo)))
    }

    fn value(&mut self, schema: &Value, at: &str, depth: usize) -> Value {
        if depth > 32 {
            return self.beyond(at, "nesting deeper than 32 levels".into());
        }
        let m = match schema {
            Value::Bool(true) => return json!({}),
            Value::Bool(false) => {
                return self.beyond(at, "the schema `false` (no value is valid)".into())
            }
            Value::Object(m) => m,
            _ => return self.beyond(at, "a schema that is not an object".into()),
        };
        if let Some(v) = fixed(schema, self.trust) {
            return v.clone();
        }
        // A local reference (a recursive schema kept as `$defs`): followed, bounded by depth.
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            let target = r
                .strip_prefix('#')
                .and_then(|p| self.root.pointer(p))
                .cloned();
            return match target {
                Some(t) => self.value(&t, at, depth + 4),
                None => self.beyond(at, format!("`$ref` `{r}` (not a local reference)")),
            };
        }
        // `allOf` merged; `anyOf`/`oneOf`: the first branch that is not only `null`, merged
        // with the schema's other keywords.
        if m.contains_key("allOf") || m.contains_key("anyOf") || m.contains_key("oneOf") {
            let mut merged = m.clone();
            let all = merged.remove("allOf");
            let any = merged.remove("anyOf").or_else(|| merged.remove("oneOf"));
            for b in all.as_ref().and_then(Value::as_array).into_iter().flatten() {
                merge_into(&mut merged, b, &self.root);
            }
            if let Some(branches) = any.as_ref().and_then(Value::as_array) {
                let pick = branches
                    .iter()
                    .find(|b| b.get("type") != Some(&json!("null")))
                    .or_else(|| branches.first());
                if let Some(b) = pick {
                    merge_into(&mut merged, b, &self.root);
                }
            }
            return self.value(&Value::Object(merged), at, depth + 1);
        }
        if let Some(k) = BEYOND.iter().find(|k| m.contains_key(**k)) {
            return self.beyond(at, format!("`{k}`"));
        }
        let ty = match m.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .or_else(|| ts.iter().filter_map(Value::as_str).next())
                .unwrap_or("null"),
            Some(_) => return self.beyond(at, "a `type` that is not a string or an array".into()),
            None if [
                "properties",
                "required",
                "additionalProperties",
                "minProperties",
            ]
            .iter()
            .any(|k| m.contains_key(*k)) =>
            {
                "object"
            }
            None if m.contains_key("items") || m.contains_key("minItems") => "array",
            None if ["format", "minLength", "maxLength"]
                .iter()
                .any(|k| m.contains_key(*k)) =>
            {
                "string"
            }
            None if ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
                .iter()
                .any(|k| m.contains_key(*k)) =>
            {
                "number"
            }
            None => return json!({}),
        };
        match ty {
            "object" => self.object(m, at, depth),
            "array" => self.array(m, at, depth),
            "string" => self.string(m, at),
            "integer" => self.number(m, at, true),
            "number" => self.number(m, at, false),
            "boolean" => Value::Bool(true),
            "null" => Value::Null,
            other => self.beyond(at, format!("the type `{other}`")),
        }
    }

    fn object(&mut self, m: &Map<String, Value>, at: &str, depth: usize) -> Value {
        let mut out = Map::new();
        let empty = json!({});
        let props = m.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (k, s) in props.into_iter().flatten() {
            // Recursion bounded: an optional member that is a reference (a recursive
            // schema) stops after a few levels, any optional member deeper down.
            let optional = !required.contains(&k.as_str());
            if optional && (depth > 12 || (depth > 3 && s.get("$ref").is_some())) {
                continue;
            }
            let v = self.value(
                s,
                &pointer_push(&pointer_push(at, "properties"), k),
                depth + 1,
            );
            out.insert(k.clone(), v);
        }
        let extra = match m.get("additionalProperties") {
            Some(s @ Value::Object(_)) => s,
            _ => &empty,
        };
        for r in m
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(k) = r.as_str() else { continue };
            if !out.contains_key(k) {
                if m.get("additionalProperties") == Some(&Value::Bool(false)) {
                    return self.beyond(
                        at,
                        format!("`{k}` required but forbidden by `additionalProperties: false`"),
                    );
                }
                let v = self.value(
                    extra,
                    &pointer_push(&pointer_push(at, "required"), k),
                    depth + 1,
                );
                out.insert(k.to_string(), v);
            }
        }
        if let Some(n) = m.get("minProperties").and_then(Value::as_u64) {
            if (out.len() as u64) < n {
                return self.beyond(
                    at,
                    format!(
                        "`minProperties: {n}` with only {} known properties",
                        out.len()
                    ),
                );
            }
        }
        Value::Object(out)
    }

    fn array(&mut self, m: &Map<String, Value>, at: &str, depth: usize) -> Value {
        let min = m.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let max = m
            .get("maxItems")
            .and_then(Value::as_u64)
            .unwrap_or(u64::MAX);
        if let Some(Value::Array(prefix)) = m.get("prefixItems") {
            let prefix = prefix.clone();
            return Value::Array(
                prefix
                    .iter()
                    .enumerate()
                    .map(|(i, p)| self.value(p, &format!("{at}/prefixItems/{i}"), depth + 1))
                    .collect(),
            );
        }
        let items = match m.get("items") {
            None => {
                return if min == 0 {
                    json!([])
                } else {
                    self.beyond(at, format!("`minItems: {min}` without `items`"))
                };
            }
            Some(Value::Array(_)) => {
                return self.beyond(at, "tuple `items` (an array of schemas)".into())
            }
            Some(s) => s,
        };
        let n = min.max(1).min(max);
        if n > 1 && m.get("uniqueItems") == Some(&Value::Bool(true)) {
            return self.beyond(at, format!("`uniqueItems` with `minItems: {n}`"));
        }
        let one = self.value(items, &format!("{at}/items"), depth + 1);
        Value::Array((0..n).map(|_| one.clone()).collect())
    }

    fn string(&mut self, m: &Map<String, Value>, at: &str) -> Value {
        let known = m
            .get("format")
            .and_then(Value::as_str)
            .and_then(|f| FORMATS.iter().find(|(name, _)| *name == f));
        let min = m.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = m
            .get("maxLength")
            .and_then(Value::as_u64)
            .map(|n| n as usize);
        if let Some(p) = m.get("pattern").and_then(Value::as_str) {
            if let Some((_, lit)) = known {
                if regex::Regex::new(p).is_ok_and(|re| re.is_match(lit)) {
                    return json!(lit);
                }
            }
            return match crate::author::sample::string_for_pattern(p, at, min, max) {
                Ok(s) => Value::String(s),
                Err(e) => self.beyond(&format!("{at}/pattern"), e),
            };
        }
        // A format the validator does not know is an annotation: any text.
        let mut s = match known {
            None => "example".to_string(),
            Some((_, lit)) => lit.to_string(),
        };
        let known_format = known.is_some();
        if known_format && (s.chars().count() < min || max.is_some_and(|x| s.chars().count() > x)) {
            return self.beyond(at, "`minLength`/`maxLength` together with `format`".into());
        }
        while s.chars().count() < min {
            s.push('x');
        }
        if let Some(x) = max {
            s = s.chars().take(x).collect();
        }
        Value::String(s)
    }

    fn number(&mut self, m: &Map<String, Value>, at: &str, integer: bool) -> Value {
        let f = |k: &str| m.get(k).and_then(Value::as_f64);
        // Draft 4 spells exclusive bounds as booleans beside minimum/maximum.
        let excl_min_bool = m.get("exclusiveMinimum") == Some(&Value::Bool(true));
        let excl_max_bool = m.get("exclusiveMaximum") == Some(&Value::Bool(true));
        let step = if integer { 1.0 } else { 0.5 };
        let lo = match (f("minimum"), f("exclusiveMinimum")) {
            (Some(x), _) if excl_min_bool => Some(x + step),
            (Some(x), Some(y)) => Some(x.max(y + step)),
            (Some(x), None) => Some(x),
            (None, Some(y)) => Some(y + step),
            (None, None) => None,
        };
        let hi = match (f("maximum"), f("exclusiveMaximum")) {
            (Some(x), _) if excl_max_bool => Some(x - step),
            (Some(x), Some(y)) => Some(x.min(y - step)),
            (Some(x), None) => Some(x),
            (None, Some(y)) => Some(y - step),
            (None, None) => None,
        };
        let mut v = match (lo, hi) {
            (Some(l), _) if l <= 1.0 && hi.is_none_or(|h| h >= 1.0) => 1.0,
            (Some(l), _) => l,
            (None, Some(h)) if h < 1.0 => h,
            _ => 1.0,
        };
        if integer {
            v = v.ceil();
        }
        if let Some(mult) = f("multipleOf").filter(|x| *x > 0.0) {
            v = (v / mult).ceil() * mult;
        }
        if lo.is_some_and(|l| v < l) || hi.is_some_and(|h| v > h) {
            return self.beyond(at, "these numeric bounds".into());
        }
        if integer || v.fract() == 0.0 {
            json!(v as i64)
        } else {
            Number::from_f64(v)
                .map(Value::Number)
                .unwrap_or(Value::Null)
        }
    }
}

/// Merge an `allOf` / chosen `anyOf` branch into a schema: `properties` and `required`
/// united, `type` narrowed to the branch's when both say one, other keywords kept where the
/// schema already has them. A branch `$ref` is followed first (bounded).
fn merge_into(into: &mut Map<String, Value>, branch: &Value, root: &Value) {
    let mut b = branch.clone();
    for _ in 0..8 {
        match b.get("$ref").and_then(Value::as_str) {
            Some(r) => match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(t) => b = t.clone(),
                None => break,
            },
            None => break,
        }
    }
    let Value::Object(bm) = b else { return };
    for (k, v) in bm {
        match (k.as_str(), into.get_mut(&k)) {
            ("properties", Some(Value::Object(p))) => {
                if let Value::Object(q) = v {
                    for (n, s) in q {
                        p.entry(n).or_insert(s);
                    }
                }
            }
            ("required", Some(Value::Array(r))) => {
                for x in v.as_array().into_iter().flatten() {
                    if !r.contains(x) {
                        r.push(x.clone());
                    }
                }
            }
            ("type", Some(t)) => {
                if let (Value::Array(ts), Value::String(one)) = (&*t, &v) {
                    if ts.iter().any(|x| x == one.as_str()) {
                        *t = v;
                    }
                }
            }
            (_, Some(_)) => {}
            (_, None) => {
                into.insert(k, v);
            }
        }
    }
}

/// A value the schema itself settles: `const`, `default`, the first of `examples`, the first
/// of `enum`.
fn fixed(schema: &Value, trust: bool) -> Option<&Value> {
    schema
        .get("const")
        .or_else(|| schema.get("default").filter(|_| trust))
        .or_else(|| {
            schema
                .get("examples")
                .filter(|_| trust)
                .and_then(Value::as_array)
                .and_then(|a| a.first())
        })
        .or_else(|| {
            schema
                .get("enum")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
        })
}

#[cfg(test)]
mod tests;
