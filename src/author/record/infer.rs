//! The pure inferences of drafting: id-like path segments, stable operation names, JSON Schema
//! from samples, and the coarse "body shape" that separates outcomes into variants.
//!
//! # Decisions
//! - **Id-like segments** become captures: decimal numbers (`42`), UUIDs (any version, any
//!   case), hex object ids (16+ hex digits with a digit and a letter, e.g. Mongo's 24), and in
//!   the `salesforce` profile record ids: 18 characters whose last three are the case-safe
//!   checksum of the first 15, or 15 alphanumerics with a digit whose 3-character key prefix
//!   looks like one (`001`, `003`, `a0X`: a digit or lowercase letter, then two alphanumerics)
//!   and that are not all digits.
//! - **Names**: method and path, lowercased, `[a-z0-9_.-]` kept and every other run of
//!   characters turned into one `_`, at most 128 characters (`GET /sobjects/Contact/{id}` →
//!   `get_sobjects_contact_id`). In the `salesforce` profile the `services/data/vNN.N` prefix is
//!   left out of the name. A name already taken gets `_` and the first 8 hex digits of the
//!   SHA-256 of `METHOD path-template` (never `DefaultHasher`: names must be stable across
//!   runs and builds).
//! - **Schemas**: the union of the JSON types seen (integer and number merge to number);
//!   objects list every property seen, `required` only those present in every sample; arrays
//!   get `items` from every element seen. No `format`, `enum`, `pattern` or
//!   `additionalProperties`: a draft describes what was seen without guessing constraints.

use crate::contract::hash::sha256_hex;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// A decimal number: ASCII digits only (1–40 of them).
pub fn is_decimal_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 40 && s.bytes().all(|b| b.is_ascii_digit())
}

/// `8-4-4-4-12` hex digits.
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// 16 or more hex digits with at least one digit and one letter (Mongo ObjectIds, hashes).
pub fn is_hex_id(s: &str) -> bool {
    s.len() >= 16
        && s.bytes().all(|b| b.is_ascii_hexdigit())
        && s.bytes().any(|b| b.is_ascii_digit())
        && s.bytes().any(|b| b.is_ascii_alphabetic())
}

/// A Salesforce record id (see the module doc).
pub fn is_salesforce_id(s: &str) -> bool {
    let b = s.as_bytes();
    if !b.iter().all(u8::is_ascii_alphanumeric) || !b.iter().any(u8::is_ascii_digit) {
        return false;
    }
    match b.len() {
        18 => crate::profile::salesforce::to_18(&s[..15]) == s,
        15 => {
            (b[0].is_ascii_digit() || b[0].is_ascii_lowercase())
                && !b.iter().all(u8::is_ascii_digit)
        }
        _ => false,
    }
}

/// Whether a (decoded) path segment names one record rather than a resource.
pub fn is_id_segment(s: &str, salesforce: bool) -> bool {
    is_decimal_number(s) || is_uuid(s) || is_hex_id(s) || (salesforce && is_salesforce_id(s))
}

/// `[a-z0-9_.-]{1,128}` from free text: lowercased, other runs become one `_`, trimmed of
/// `_`, cut at 128. Empty input gives `op`.
pub fn sanitize_name(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-' {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        } else {
            continue;
        }
    }
    let mut out = out.trim_matches('_').to_string();
    out.truncate(128);
    let out = out.trim_end_matches('_').to_string();
    if out.is_empty() || out == "." || out == ".." {
        "op".to_string()
    } else {
        out
    }
}

/// The stable name of a new HTTP operation from its method and template segments (captures
/// as `{name}`).
pub fn operation_name(method: &str, template_segments: &[String], salesforce: bool) -> String {
    let mut segs: Vec<&str> = template_segments.iter().map(String::as_str).collect();
    if salesforce
        && segs.len() >= 3
        && segs[0] == "services"
        && segs[1] == "data"
        && (segs[2] == "*" || segs[2].starts_with('v'))
    {
        segs.drain(..3);
    }
    let mut text = method.to_ascii_lowercase();
    for s in segs {
        text.push('_');
        text.push_str(s.trim_start_matches('{').trim_end_matches('}'));
    }
    if template_segments.is_empty() {
        text.push_str("_root");
    }
    sanitize_name(&text)
}

/// `name` made unique with the first 8 hex digits of SHA-256 of `key`.
pub fn disambiguate(name: &str, key: &str) -> String {
    let suffix = &sha256_hex(key.as_bytes())[..8];
    let mut base = name.to_string();
    base.truncate(128 - 9);
    format!("{}_{suffix}", base.trim_end_matches('_'))
}

/// An identifier for a capture (`[A-Za-z_][A-Za-z0-9_]*`) from free text, lowercased.
pub fn capture_ident(text: &str) -> Option<String> {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_string();
    match out.chars().next() {
        None => None,
        Some(c) if c.is_ascii_digit() => Some(format!("p_{out}")),
        Some(_) => Some(out),
    }
}

/// A JSON Schema describing every sample (see the module doc). No samples: `{}`.
pub fn infer_schema<'a>(samples: impl IntoIterator<Item = &'a Value>) -> Value {
    let mut s = Shape::default();
    for v in samples {
        s.add(v);
    }
    s.schema()
}

#[derive(Default)]
struct Shape {
    seen: usize,
    null: bool,
    boolean: bool,
    integer: bool,
    number: bool,
    string: bool,
    /// Objects seen, and per property: (how many had it, its shape).
    objects: usize,
    props: BTreeMap<String, (usize, Shape)>,
    arrays: usize,
    items: Option<Box<Shape>>,
}

impl Shape {
    fn add(&mut self, v: &Value) {
        self.seen += 1;
        match v {
            Value::Null => self.null = true,
            Value::Bool(_) => self.boolean = true,
            Value::Number(n) => {
                if n.is_i64() || n.is_u64() {
                    self.integer = true
                } else {
                    self.number = true
                }
            }
            Value::String(_) => self.string = true,
            Value::Array(a) => {
                self.arrays += 1;
                let items = self.items.get_or_insert_with(Box::default);
                for e in a {
                    items.add(e);
                }
            }
            Value::Object(m) => {
                self.objects += 1;
                for (k, c) in m {
                    let e = self.props.entry(k.clone()).or_default();
                    e.0 += 1;
                    e.1.add(c);
                }
            }
        }
    }

    fn schema(&self) -> Value {
        if self.seen == 0 {
            return json!({});
        }
        let mut types: Vec<&str> = Vec::new();
        if self.objects > 0 {
            types.push("object");
        }
        if self.arrays > 0 {
            types.push("array");
        }
        if self.string {
            types.push("string");
        }
        if self.number {
            types.push("number");
        } else if self.integer {
            types.push("integer");
        }
        if self.boolean {
            types.push("boolean");
        }
        if self.null {
            types.push("null");
        }
        let mut out = Map::new();
        out.insert(
            "type".into(),
            if types.len() == 1 {
                json!(types[0])
            } else {
                json!(types)
            },
        );
        if self.objects > 0 {
            let props: Map<String, Value> = self
                .props
                .iter()
                .map(|(k, (_, s))| (k.clone(), s.schema()))
                .collect();
            let required: Vec<&String> = self
                .props
                .iter()
                .filter(|(_, (n, _))| *n == self.objects)
                .map(|(k, _)| k)
                .collect();
            if !props.is_empty() {
                out.insert("properties".into(), Value::Object(props));
            }
            if !required.is_empty() {
                out.insert("required".into(), json!(required));
            }
        }
        if let Some(items) = &self.items {
            if items.seen > 0 {
                out.insert("items".into(), items.schema());
            }
        }
        Value::Object(out)
    }
}

/// The coarse shape of a body that separates outcomes (decision): the JSON type; for an
/// object its sorted member names, an array member marked empty or not; for an array whether
/// it is empty and the member names of its first element. Values below that do not matter —
/// two contacts with different phone numbers (or a `null` phone) are one outcome.
pub fn shape_key(v: Option<&Value>) -> String {
    fn kind(v: &Value) -> &'static str {
        match v {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "num",
            Value::String(_) => "str",
            Value::Array(a) if a.is_empty() => "[]",
            Value::Array(_) => "[+]",
            Value::Object(_) => "{}",
        }
    }
    match v {
        None => "none".into(),
        Some(Value::Object(m)) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, c)| match c {
                    Value::Array(_) => format!("{k}:{}", kind(c)),
                    _ => k.clone(),
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Some(Value::Array(a)) => match a.first() {
            None => "[]".into(),
            Some(Value::Object(m)) => {
                format!("[{{{}}}]", m.keys().cloned().collect::<Vec<_>>().join(","))
            }
            Some(first) => format!("[{}]", kind(first)),
        },
        Some(other) => kind(other).into(),
    }
}

/// Member names that hold a count of results, and the result list itself.
const COUNT_MEMBERS: &[&str] = &["totalSize", "total", "total_count", "totalCount", "count"];
const LIST_MEMBERS: &[&str] = &[
    "records", "items", "results", "data", "entries", "hits", "values",
];

/// Whether a body is "empty" — a lookup or query that found nothing: an empty array, `{}`,
/// an object whose only member is an empty array (`{"orders": []}`), or an object whose count
/// member (`totalSize`, `total`, `count`…) is 0 or whose result list (`records`, `items`,
/// `results`…) is empty. (`{"id":…,"errors":[]}` is not empty.)
pub fn is_empty_body(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(m)) => {
            m.is_empty()
                || (m.len() == 1 && m.values().all(|v| v.as_array().is_some_and(Vec::is_empty)))
                || COUNT_MEMBERS
                    .iter()
                    .any(|k| m.get(*k).and_then(Value::as_u64) == Some(0))
                || LIST_MEMBERS.iter().any(|k| {
                    m.get(*k)
                        .and_then(Value::as_array)
                        .is_some_and(Vec::is_empty)
                })
        }
        _ => false,
    }
}

/// The variant name of an HTTP outcome: `ok`, `created`, `no_content`, `not_found`, … with
/// `_empty` for an empty body (see [`is_empty_body`]).
pub fn http_variant_name(status: u16, body: Option<&Value>) -> String {
    const NAMES: &[(u16, &str)] = &[
        (200, "ok"),
        (201, "created"),
        (202, "accepted"),
        (204, "no_content"),
        (300, "multiple_choices"),
        (304, "not_modified"),
        (400, "bad_request"),
        (401, "unauthorized"),
        (403, "forbidden"),
        (404, "not_found"),
        (405, "method_not_allowed"),
        (409, "conflict"),
        (410, "gone"),
        (412, "precondition_failed"),
        (415, "unsupported_media_type"),
        (422, "unprocessable"),
        (429, "rate_limited"),
        (500, "server_error"),
        (502, "bad_gateway"),
        (503, "unavailable"),
        (504, "gateway_timeout"),
    ];
    let base = match NAMES.iter().find(|(s, _)| *s == status) {
        Some((_, n)) => *n,
        None => match status / 100 {
            1 | 2 => "success",
            3 => "redirect",
            4 => "client_error",
            _ => "server_error",
        },
    };
    if (200..300).contains(&status) && is_empty_body(body) {
        format!("{base}_empty")
    } else {
        base.to_string()
    }
}

/// Trim every array longer than `max` (at any depth) to its first `max` elements. Returns how
/// many arrays were trimmed.
pub fn trim_arrays(v: &mut Value, max: usize) -> usize {
    match v {
        Value::Array(a) => {
            let mut n = 0;
            if a.len() > max {
                a.truncate(max);
                n += 1;
            }
            n + a.iter_mut().map(|c| trim_arrays(c, max)).sum::<usize>()
        }
        Value::Object(m) => m.values_mut().map(|c| trim_arrays(c, max)).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_like_segments() {
        assert!(is_id_segment("42", false));
        assert!(is_id_segment("3f2504e0-4f89-11d3-9a0c-0305e82c3301", false));
        assert!(is_id_segment("507f1f77bcf86cd799439011", false));
        assert!(!is_id_segment("v60.0", true));
        assert!(!is_id_segment("sobjects", true));
        assert!(!is_id_segment("Contact", true));
        // 18 characters with a valid checksum, and its 15-character form.
        assert!(is_id_segment("0015000000Gv7qJAAR", true));
        assert!(!is_id_segment("0015000000Gv7qJAAA", true), "bad checksum");
        assert!(is_id_segment("0015000000Gv7qJ", true));
        assert!(
            !is_id_segment("0015000000Gv7qJ", false),
            "salesforce ids only in salesforce"
        );
        assert!(!is_id_segment("ContactHistoryX", true), "no digit");
        assert!(!is_id_segment("Xa15000000Gv7qJ", true), "key prefix shape");
    }

    #[test]
    fn names_are_sanitized_and_stable() {
        let segs: Vec<String> = ["services", "data", "*", "sobjects", "Contact", "{id}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            operation_name("GET", &segs, true),
            "get_sobjects_contact_id"
        );
        assert_eq!(
            operation_name("GET", &segs, false),
            "get_services_data_sobjects_contact_id"
        );
        assert_eq!(operation_name("POST", &[], false), "post_root");
        assert_eq!(sanitize_name("A  b//C.d-e"), "a_b_c.d-e");
        assert_eq!(sanitize_name("***"), "op");
        assert_eq!(sanitize_name(&"x".repeat(300)).len(), 128);
        let d = disambiguate(&"y".repeat(128), "GET /a");
        assert_eq!(d.len(), 128);
        assert!(crate::contract::valid_operation_id(&d));
        assert_eq!(d, disambiguate(&"y".repeat(128), "GET /a"));
        assert_ne!(d, disambiguate(&"y".repeat(128), "GET /b"));
        assert_eq!(capture_ident("WHERE Phone"), Some("where_phone".into()));
        assert_eq!(capture_ident("9x"), Some("p_9x".into()));
        assert_eq!(capture_ident("= '"), None);
    }

    #[test]
    fn schemas_merge_samples() {
        let a = json!({"id": "1", "n": 1, "tags": ["x"], "opt": null});
        let b = json!({"id": "2", "n": 1.5, "tags": []});
        let s = infer_schema([&a, &b]);
        assert_eq!(
            s,
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "n": {"type": "number"},
                    "opt": {"type": "null"},
                    "tags": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["id", "n", "tags"]
            })
        );
        assert_eq!(
            infer_schema([&json!(1), &json!("a")]),
            json!({"type": ["string", "integer"]})
        );
        assert_eq!(infer_schema(std::iter::empty()), json!({}));
        let v = crate::contract::compile_schema(&s).unwrap();
        assert!(v.is_valid(&a) && v.is_valid(&b));
    }

    #[test]
    fn shapes_and_variant_names() {
        let empty = json!({"totalSize": 0, "done": true, "records": []});
        let found = json!({"totalSize": 1, "done": true, "records": [{"Id": "1"}]});
        assert_ne!(shape_key(Some(&empty)), shape_key(Some(&found)));
        assert_eq!(
            shape_key(Some(&json!({"Id": "1", "Phone": null}))),
            shape_key(Some(&json!({"Id": "2", "Phone": "555"})))
        );
        assert_eq!(http_variant_name(200, Some(&empty)), "ok_empty");
        assert_eq!(http_variant_name(200, Some(&found)), "ok");
        assert_eq!(http_variant_name(404, Some(&json!([]))), "not_found");
        assert_eq!(http_variant_name(204, None), "no_content");
        assert_eq!(
            http_variant_name(
                201,
                Some(&json!({"id": "1", "success": true, "errors": []}))
            ),
            "created"
        );
        let mut big = json!({"a": (0..60).collect::<Vec<_>>(), "b": [[1, 2, 3]]});
        assert_eq!(trim_arrays(&mut big, 50), 1);
        assert_eq!(big["a"].as_array().unwrap().len(), 50);
        assert_eq!(trim_arrays(&mut big, 2), 2);
    }
}
