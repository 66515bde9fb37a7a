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
//! When a schema needs more (`pattern`, `oneOf`/`anyOf`/`allOf`/`not`/`if`, `$ref`,
//! `patternProperties`, …) and no `const`/`default`/`examples`/`enum` settles the value, the
//! answer is `supported: false` with a reason per place, never a draft that would fail.
//! Every draft is run through [`check_operation`] before it is called supported.

use crate::contract::ProfileKind;
use crate::contract::{OperationFile, ResultForm};
use crate::mock::eval::Engine;
use crate::mock::model::Definition;
use crate::mock::path::pointer_push;
use crate::operation::check::check_operation;
use serde_json::{json, Map, Number, Value};
use std::path::Path;

/// What [`generate`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateResult {
    pub supported: bool,
    /// Why not (empty when supported): `json/path: what the generator cannot do`.
    pub reasons: Vec<String>,
    /// The draft definition (the `mock` member, `contract_hash` included) when supported.
    pub definition: Option<Value>,
}

impl GenerateResult {
    /// `{"supported","reasons","definition"}`.
    pub fn to_json(&self) -> Value {
        json!({ "supported": self.supported, "reasons": self.reasons, "definition": self.definition })
    }

    fn unsupported(reasons: Vec<String>) -> GenerateResult {
        GenerateResult {
            supported: false,
            reasons,
            definition: None,
        }
    }
}

/// Build a checked draft definition for `op` under `profile` (see the module doc).
pub fn generate(op: &OperationFile, profile: ProfileKind) -> GenerateResult {
    let kind = profile;
    let mut g = Gen {
        reasons: Vec::new(),
        wrapped_body: false,
    };
    let input = g.value(&op.input_schema, "input_schema", 0);
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
        "contract_hash": op.contract_hash(profile),
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
    draft.mock = Some(definition.clone());
    let problems = check_operation(&draft, profile, Path::new(&op.operation_id));
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
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "pattern",
    "patternProperties",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "prefixItems",
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
];

struct Gen {
    reasons: Vec<String>,
    /// An HTTP output schema that does not describe the envelope was wrapped as `data`.
    wrapped_body: bool,
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
        if let Some(v) = fixed(schema) {
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
        if let Some(v) = fixed(schema) {
            return v.clone();
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
        for (k, s) in props.into_iter().flatten() {
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
        let mut s = match m.get("format").and_then(Value::as_str) {
            None => "example".to_string(),
            Some(f) => match FORMATS.iter().find(|(name, _)| *name == f) {
                Some((_, lit)) => lit.to_string(),
                None => return self.beyond(&format!("{at}/format"), format!("the format `{f}`")),
            },
        };
        let min = m.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = m
            .get("maxLength")
            .and_then(Value::as_u64)
            .map(|n| n as usize);
        if m.contains_key("format")
            && (s.chars().count() < min || max.is_some_and(|x| s.chars().count() > x))
        {
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

/// A value the schema itself settles: `const`, `default`, the first of `examples`, the first
/// of `enum`.
fn fixed(schema: &Value) -> Option<&Value> {
    schema
        .get("const")
        .or_else(|| schema.get("default"))
        .or_else(|| {
            schema
                .get("examples")
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
mod tests {
    use super::*;

    fn op(v: Value) -> OperationFile {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn salesforce_create_gets_201_and_a_checked_draft() {
        let o = op(json!({
            "operation_id": "create_contact",
            "match": {"method": "POST", "path": "/services/data/*/sobjects/Contact"},
            "input_schema": {"type": "object", "required": ["LastName", "Email"], "properties": {
                "LastName": {"type": "string", "minLength": 2},
                "Email": {"type": "string", "format": "email"},
                "BirthDate": {"type": "string", "format": "date"},
                "Tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "Age": {"type": "integer", "minimum": 18, "maximum": 120},
                "Kind": {"enum": ["patient", "carer"]}
            }},
            "output_schema": {"type": "object", "required": ["status", "data"], "properties": {
                "status": {"type": "integer"},
                "data": {"type": "object", "required": ["id", "success", "errors"], "properties": {
                    "id": {"type": "string", "minLength": 15, "maxLength": 18},
                    "success": {"const": true},
                    "errors": {"type": "array", "maxItems": 0}
                }}
            }}
        }));
        let r = generate(&o, crate::contract::ProfileKind::Salesforce);
        assert!(r.supported, "{:?}", r.reasons);
        let d = r.definition.unwrap();
        assert_eq!(
            d["contract_hash"],
            json!(o.contract_hash(crate::contract::ProfileKind::Salesforce))
        );
        let ex = &d["examples"][0];
        assert_eq!(ex["input"]["Email"], "jane.doe@example.com");
        assert_eq!(ex["input"]["Tags"].as_array().unwrap().len(), 2);
        assert_eq!(ex["input"]["Age"], 18);
        assert_eq!(ex["input"]["Kind"], "patient");
        assert_eq!(ex["expected"]["status"], 201);
        assert_eq!(ex["expected"]["data"]["success"], true);
        assert_eq!(ex["expected"]["data"]["errors"], json!([]));
        assert_eq!(ex["expected"], d["variants"]["default"]["result"]);
    }

    #[test]
    fn bare_body_output_schemas_are_explained() {
        let o = op(json!({
            "operation_id": "get_contact",
            "match": {"method": "GET", "path": "/sobjects/Contact/{id}"},
            "output_schema": {"type": "object", "required": ["Id"], "properties": {"Id": {"type": "string"}}}
        }));
        let r = generate(&o, crate::contract::ProfileKind::Salesforce);
        assert!(!r.supported);
        assert!(
            r.reasons[0].contains("describes a bare response body"),
            "{:?}",
            r.reasons
        );
        // A broad output schema is wrapped in the envelope.
        let o =
            op(json!({"operation_id": "get_contact", "match": {"method": "GET", "path": "/x"}}));
        let r = generate(&o, crate::contract::ProfileKind::Salesforce);
        assert_eq!(
            r.definition.unwrap()["variants"]["default"]["result"],
            json!({"status": 200, "data": {}})
        );
        let o = op(json!({"operation_id": "upd", "match": {"method": "PATCH", "path": "/x"}}));
        let r = generate(&o, crate::contract::ProfileKind::Salesforce);
        assert_eq!(
            r.definition.unwrap()["variants"]["default"]["result"],
            json!({"status": 204})
        );
    }

    #[test]
    fn envelope_schemas_are_generated_as_they_are() {
        let o = op(json!({
            "operation_id": "ping",
            "match": {"method": "GET", "path": "/ping"},
            "output_schema": {"type": "object", "required": ["status", "data"], "properties": {
                "status": {"type": "integer", "minimum": 200, "maximum": 299},
                "data": {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
            }}
        }));
        let r = generate(&o, crate::contract::ProfileKind::Rest);
        assert!(r.supported, "{:?}", r.reasons);
        assert_eq!(
            r.definition.unwrap()["variants"]["default"]["result"],
            json!({"status": 200, "data": {"ok": true}})
        );
    }

    #[test]
    fn beyond_the_generator_says_why() {
        let o = op(json!({
            "operation_id": "lookup",
            "match": {"method": "GET", "path": "/x"},
            "input_schema": {"type": "object", "required": ["phone"], "properties": {"phone": {"type": "string", "pattern": "^\\+[0-9]+$"}}},
            "output_schema": {"oneOf": [{"type": "object"}, {"type": "array"}]}
        }));
        let r = generate(&o, crate::contract::ProfileKind::Rest);
        assert!(!r.supported);
        assert!(r.definition.is_none());
        assert!(
            r.reasons
                .iter()
                .any(|x| x.starts_with("input_schema/properties/phone: `pattern`")),
            "{:?}",
            r.reasons
        );
        assert!(
            r.reasons
                .iter()
                .any(|x| x.starts_with("output_schema: `oneOf`")),
            "{:?}",
            r.reasons
        );
        // A default settles a pattern.
        let o = op(json!({
            "operation_id": "lookup",
            "match": {"method": "GET", "path": "/x"},
            "input_schema": {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^\\+[0-9]+$", "default": "+15550100"}}}
        }));
        assert!(generate(&o, crate::contract::ProfileKind::Rest).supported);
        // A default that violates the schema is caught by check.
        let o = op(json!({
            "operation_id": "lookup",
            "match": {"method": "GET", "path": "/x"},
            "input_schema": {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^\\+[0-9]+$", "default": "nope"}}}
        }));
        let r = generate(&o, crate::contract::ProfileKind::Rest);
        assert!(!r.supported);
        assert!(
            r.reasons[0].starts_with("mock/examples/0/input"),
            "{:?}",
            r.reasons
        );
    }

    #[test]
    fn mcp_results() {
        let o = op(json!({
            "operation_id": "get_weather",
            "input_schema": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
            "output_schema": {"type": "object", "required": ["temp"], "properties": {"temp": {"type": "number", "exclusiveMinimum": -100}}}
        }));
        let r = generate(&o, crate::contract::ProfileKind::Mcp);
        assert!(r.supported, "{:?}", r.reasons);
        assert_eq!(
            r.definition.unwrap()["variants"]["default"]["result"],
            json!({"temp": 1})
        );
        let o = op(json!({"operation_id": "echo", "result_form": "call_tool_result"}));
        let r = generate(&o, crate::contract::ProfileKind::Mcp);
        assert!(r.supported, "{:?}", r.reasons);
        assert_eq!(
            r.definition.unwrap()["variants"]["default"]["result"]["content"][0]["type"],
            "text"
        );
        let o = op(json!({"operation_id": "echo", "match": {"method": "GET", "path": "/x"}}));
        let r = generate(&o, crate::contract::ProfileKind::Mcp);
        assert!(!r.supported);
        assert!(r.reasons[0].starts_with("match: "), "{:?}", r.reasons);
    }
}
