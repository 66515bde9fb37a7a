//! Form bodies as input: `application/x-www-form-urlencoded` and `multipart/form-data`
//! request bodies parsed once, at the edge, into the same JSON value a JSON body gives, so
//! routing, the input, validation, evidence, recording and scrubbing treat them alike
//! (docs/src/guides/import-drift.md#form-bodies).
//!
//! - Every field becomes a member named as sent; a key sent more than once becomes an array
//!   of its values in order (`MediaUrl=a&MediaUrl=b` → `{"MediaUrl": ["a", "b"]}`). Bracket
//!   names are nested members (`metadata[order]=1` → `{"metadata": {"order": "1"}}`,
//!   `tags[]=a` → `{"tags": ["a"]}`: [`insert_field`]); indices (`items[0][price]`) become an
//!   array where the input schema says the member is one.
//! - Values are text. [`type_by_schema`] then gives a field the type the operation's input
//!   schema says it has (`integer`, `number`, `boolean`, `null`, `array`, `object` as JSON
//!   text), where the text spells that type; a field the schema does not name, or text that
//!   does not spell the type, stays text (so validation reports it, naming the field).
//! - A multipart part is a field named by its `Content-Disposition` `name`; a file part
//!   (with `filename`) is its content as text when it is UTF-8, else
//!   `"[binary: N bytes]"` — the bytes themselves are never an input.
//! - Bounded: at most [`MAX_FIELDS`] fields, names of at most [`MAX_NAME`] bytes, part
//!   headers of at most [`MAX_PART_HEADERS`] bytes; the body itself is bounded by the
//!   listener's body limit. Beyond a bound the body is an input error, never a panic.

use serde_json::{Map, Value};

use crate::contract::template::parse_query;

/// At most this many fields (urlencoded pairs or multipart parts) in one body.
pub const MAX_FIELDS: usize = 1000;
/// At most this many bytes in a field name.
pub const MAX_NAME: usize = 256;
/// At most this many bytes of headers in one multipart part.
pub const MAX_PART_HEADERS: usize = 8 * 1024;

/// What a `Content-Type` says a body is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyKind {
    /// `application/x-www-form-urlencoded`.
    Form,
    /// `multipart/form-data` with its boundary.
    Multipart(String),
    /// Anything else (JSON, or no content type): read as JSON.
    Json,
}

/// The kind of body a `Content-Type` header value announces (case-insensitive media type;
/// the `boundary` parameter of a multipart type, quotes removed).
pub fn body_kind(content_type: Option<&str>) -> BodyKind {
    let Some(ct) = content_type else {
        return BodyKind::Json;
    };
    let mut parts = ct.split(';');
    let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    match media.as_str() {
        "application/x-www-form-urlencoded" => BodyKind::Form,
        "multipart/form-data" => {
            let boundary = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("boundary"))
                .map(|(_, v)| v.trim().trim_matches('"').to_string())
                .unwrap_or_default();
            BodyKind::Multipart(boundary)
        }
        _ => BodyKind::Json,
    }
}

/// Parse a form body of `kind` (`Ok(None)` for an empty body; [`BodyKind::Json`] is not
/// this module's and gives `Ok(None)` too). `Err` names what was wrong.
pub fn parse(kind: &BodyKind, body: &[u8]) -> Result<Option<Value>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match kind {
        BodyKind::Form => parse_urlencoded(body).map(Some),
        BodyKind::Multipart(b) => parse_multipart(body, b).map(Some),
        BodyKind::Json => Ok(None),
    }
}

/// An `application/x-www-form-urlencoded` body as an object (module doc).
pub fn parse_urlencoded(body: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(body)
        .map_err(|_| "the form-encoded request body is not ASCII/UTF-8 text".to_string())?;
    let mut fields = Fields::default();
    for (k, v) in parse_query(text.trim()) {
        fields.push(k, Value::String(v))?;
    }
    Ok(fields.into_value())
}

/// A `multipart/form-data` body as an object (module doc).
pub fn parse_multipart(body: &[u8], boundary: &str) -> Result<Value, String> {
    if boundary.is_empty() || boundary.len() > 70 {
        return Err(
            "the multipart request body's Content-Type has no usable `boundary` (1 to 70 characters)"
                .into(),
        );
    }
    let delim = format!("--{boundary}");
    let d = delim.as_bytes();
    let mut pos = find(body, d, 0)
        .ok_or_else(|| format!("the multipart request body has no `{delim}` delimiter line"))?;
    let mut fields = Fields::default();
    loop {
        pos += d.len();
        // `--` after the delimiter closes the body.
        if body[pos..].starts_with(b"--") {
            return Ok(fields.into_value());
        }
        pos = skip_line_end(body, pos)
            .ok_or("the multipart request body has text after a delimiter on its line")?;
        let next = find(body, d, pos).ok_or_else(|| {
            format!("the multipart request body ends without its closing `{delim}--` line")
        })?;
        // The part runs to the line break before the next delimiter.
        let mut end = next;
        if end > pos && body[end - 1] == b'\n' {
            end -= 1;
            if end > pos && body[end - 1] == b'\r' {
                end -= 1;
            }
        }
        let (name, value) = part(&body[pos..end.max(pos)], fields.len())?;
        fields.push(name, value)?;
        pos = next;
    }
}

/// One part: its headers, then an empty line, then its content.
fn part(p: &[u8], index: usize) -> Result<(String, Value), String> {
    let (head, content) = match find(p, b"\r\n\r\n", 0) {
        Some(i) => (&p[..i], &p[i + 4..]),
        None => match find(p, b"\n\n", 0) {
            Some(i) => (&p[..i], &p[i + 2..]),
            None if p.starts_with(b"\r\n") => (&p[..0], &p[2..]),
            None => {
                return Err(format!(
                    "multipart part {index} has no empty line after its headers"
                ))
            }
        },
    };
    if head.len() > MAX_PART_HEADERS {
        return Err(format!(
            "multipart part {index} has more than {MAX_PART_HEADERS} bytes of headers"
        ));
    }
    let head = String::from_utf8_lossy(head);
    let mut name = None;
    let mut filename = None;
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if !k.trim().eq_ignore_ascii_case("content-disposition") {
            continue;
        }
        for param in v.split(';').skip(1) {
            let Some((pk, pv)) = param.split_once('=') else {
                continue;
            };
            let pv = pv.trim().trim_matches('"').to_string();
            match pk.trim().to_ascii_lowercase().as_str() {
                "name" => name = Some(pv),
                "filename" => filename = Some(pv),
                _ => {}
            }
        }
    }
    let name = name.ok_or_else(|| {
        format!("multipart part {index} has no `Content-Disposition: form-data; name=\"…\"`")
    })?;
    let value = match std::str::from_utf8(content) {
        Ok(t) => Value::String(t.to_string()),
        Err(_) if filename.is_some() => Value::String(format!("[binary: {} bytes]", content.len())),
        Err(_) => {
            return Err(format!(
                "multipart field `{}` is not UTF-8 text (only a file part may be binary)",
                short(&name)
            ))
        }
    };
    Ok((name, value))
}

/// After a delimiter: optional spaces, then a line end; the position after it.
fn skip_line_end(b: &[u8], mut i: usize) -> Option<usize> {
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    if b[i..].starts_with(b"\r\n") {
        Some(i + 2)
    } else if b[i..].starts_with(b"\n") {
        Some(i + 1)
    } else {
        None
    }
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

fn short(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Fields in order, a repeated name becoming an array.
#[derive(Default)]
struct Fields {
    map: Map<String, Value>,
    count: usize,
}

impl Fields {
    fn len(&self) -> usize {
        self.count
    }

    fn push(&mut self, name: String, value: Value) -> Result<(), String> {
        self.count += 1;
        if self.count > MAX_FIELDS {
            return Err(format!(
                "the form request body has more than {MAX_FIELDS} fields"
            ));
        }
        if name.len() > MAX_NAME {
            return Err(format!(
                "form field `{}…` has a name longer than {MAX_NAME} bytes",
                short(&name)
            ));
        }
        insert_field(&mut self.map, name, value);
        Ok(())
    }

    fn into_value(self) -> Value {
        Value::Object(self.map)
    }
}

/// Add one field to a form's object: a name seen before becomes an array of its values
/// (the one rule for repeated keys, shared by the HAR and Postman importers). A name in
/// bracket notation (Stripe, Rack, PHP: `metadata[order]=1`, `a[b][c]=1`, `tags[]=x`) is a
/// nested member: `{"metadata": {"order": "1"}}`, `{"a": {"b": {"c": "1"}}}`,
/// `{"tags": ["x"]}` (`[]` only last; at most [`MAX_NESTING`] brackets). A name that does
/// not fit what is already there (`a=1&a[b]=2`), or is not well formed (`a[b`, `a[]x`,
/// `[b]`), stays a flat member under its whole name.
pub fn insert_field(map: &mut Map<String, Value>, name: String, value: Value) {
    if let Some((base, keys)) = brackets(&name) {
        if fits(map.get(base), &keys) {
            let slot = map
                .entry(base.to_string())
                .or_insert_with(|| empty_for(keys[0]));
            put(slot, &keys, value);
            return;
        }
    }
    insert_flat(map, name, value);
}

/// At most this many `[key]` groups in one field name ([`insert_field`]).
pub const MAX_NESTING: usize = 8;

/// `a[b][]` → (`a`, [`b`, ``]); `None` when the name has no well-formed brackets.
fn brackets(name: &str) -> Option<(&str, Vec<&str>)> {
    let open = name.find('[')?;
    let base = &name[..open];
    if base.is_empty() || base.contains(']') {
        return None;
    }
    let mut keys = Vec::new();
    let mut rest = &name[open..];
    while !rest.is_empty() {
        let inner = rest.strip_prefix('[')?;
        let close = inner.find(']')?;
        let key = &inner[..close];
        if key.contains('[') {
            return None;
        }
        keys.push(key);
        rest = &inner[close + 1..];
    }
    let append_only_last = keys[..keys.len() - 1].iter().all(|k| !k.is_empty());
    (keys.len() <= MAX_NESTING && append_only_last).then_some((base, keys))
}

fn empty_for(key: &str) -> Value {
    if key.is_empty() {
        Value::Array(Vec::new())
    } else {
        Value::Object(Map::new())
    }
}

/// Whether `keys` can be put under `slot` without changing what is there into something else.
fn fits(slot: Option<&Value>, keys: &[&str]) -> bool {
    let Some((k, rest)) = keys.split_first() else {
        return true;
    };
    match slot {
        None => true,
        Some(Value::Array(_)) => k.is_empty(),
        Some(Value::Object(m)) if !k.is_empty() => rest.is_empty() || fits(m.get(*k), rest),
        Some(_) => false,
    }
}

/// Put `value` under `keys` inside `slot` (checked by [`fits`] first).
fn put(slot: &mut Value, keys: &[&str], value: Value) {
    let Some((k, rest)) = keys.split_first() else {
        return;
    };
    match slot {
        Value::Array(a) => a.push(value),
        Value::Object(m) if rest.is_empty() => insert_flat(m, k.to_string(), value),
        Value::Object(m) => {
            let child = m.entry(k.to_string()).or_insert_with(|| empty_for(rest[0]));
            put(child, rest, value);
        }
        _ => {}
    }
}

/// A member under its whole name; repeated, an array of its values.
fn insert_flat(map: &mut Map<String, Value>, name: String, value: Value) {
    match map.get_mut(&name) {
        None => {
            map.insert(name, value);
        }
        Some(Value::Array(a)) => a.push(value),
        Some(prev) => {
            let first = prev.take();
            *prev = Value::Array(vec![first, value]);
        }
    }
}

/// The fields a form sends for `value` — the inverse of [`parse_urlencoded`] followed by
/// [`type_by_schema`], used when understudy itself sends an operation's request (`match.body`
/// `form` or `multipart`): each member of an object is a field named as the member; an array
/// of scalars is the field repeated at the top (`MediaUrl=a&MediaUrl=b`) and `name[]` below
/// it; a nested object is `name[key]`; an array holding objects or arrays is `name[0][key]`;
/// numbers and booleans are spelled, strings sent as they are; `null` and empty arrays and
/// objects send nothing. A value that is not an object is one field `body`.
pub fn fields_of(value: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match value {
        Value::Object(m) => {
            for (k, v) in m {
                field(&mut out, k.clone(), v, true);
            }
        }
        other => field(&mut out, "body".into(), other, true),
    }
    out
}

fn field(out: &mut Vec<(String, String)>, name: String, v: &Value, top: bool) {
    match v {
        Value::Null => {}
        Value::String(s) => out.push((name, s.clone())),
        Value::Number(_) | Value::Bool(_) => out.push((name, v.to_string())),
        Value::Object(m) => {
            for (k, x) in m {
                field(out, format!("{name}[{k}]"), x, false);
            }
        }
        Value::Array(a) => {
            let scalars = a.iter().all(|x| !x.is_object() && !x.is_array());
            for (i, x) in a.iter().enumerate() {
                let n = match (scalars, top) {
                    (true, true) => name.clone(),
                    (true, false) => format!("{name}[]"),
                    (false, _) => format!("{name}[{i}]"),
                };
                field(out, n, x, false);
            }
        }
    }
}

/// `value` as an `application/x-www-form-urlencoded` body ([`fields_of`]; everything but RFC
/// 3986 unreserved characters percent-encoded).
pub fn encode_urlencoded(value: &Value) -> String {
    let enc = |s: &str| -> String {
        let mut o = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                o.push(b as char);
            } else {
                o.push_str(&format!("%{b:02X}"));
            }
        }
        o
    };
    fields_of(value)
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// `value` as a `multipart/form-data` body ([`fields_of`], one part per field): the boundary
/// (one that occurs in no field) and the body.
pub fn encode_multipart(value: &Value) -> (String, Vec<u8>) {
    let fields = fields_of(value);
    let mut n = 0u32;
    let boundary = loop {
        let b = format!("understudy-form-{n:08x}");
        if !fields.iter().any(|(k, v)| k.contains(&b) || v.contains(&b)) {
            break b;
        }
        n += 1;
    };
    let mut body = Vec::new();
    for (k, v) in &fields {
        let name = k.replace('\\', "\\\\").replace('"', "\\\"");
        body.extend(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n")
                .as_bytes(),
        );
        body.extend(v.as_bytes());
        body.extend(b"\r\n");
    }
    body.extend(format!("--{boundary}--\r\n").as_bytes());
    (boundary, body)
}

/// Give each field the type `schema` (an object schema: the operation's input schema) says
/// its member has, where the text spells it (module doc). Fields the schema does not name
/// are left as they are.
pub fn type_by_schema(fields: &mut Value, schema: &Value) {
    let Value::Object(fields) = fields else {
        return;
    };
    for (name, v) in fields.iter_mut() {
        if let Some(s) = property(schema, name, 0) {
            coerce(v, &s, 0);
        }
    }
}

/// The schema of member `name` of an object schema: `properties`, then the branches of
/// `allOf`/`anyOf`/`oneOf` (bounded depth).
fn property(schema: &Value, name: &str, depth: usize) -> Option<Value> {
    if depth > 8 {
        return None;
    }
    if let Some(p) = schema.get("properties").and_then(|p| p.get(name)) {
        return Some(p.clone());
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        for b in schema
            .get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(p) = property(b, name, depth + 1) {
                return Some(p);
            }
        }
    }
    None
}

/// The JSON types a schema admits (its `type`, and those of its `anyOf`/`oneOf`/`allOf`
/// branches; `enum`/`const` values' types); empty when it says nothing.
fn types(schema: &Value, depth: usize, out: &mut Vec<String>) {
    if depth > 8 {
        return;
    }
    match schema.get("type") {
        Some(Value::String(t)) => out.push(t.clone()),
        Some(Value::Array(a)) => out.extend(a.iter().filter_map(Value::as_str).map(str::to_string)),
        _ => {}
    }
    let mut consts: Vec<&Value> = schema
        .get("enum")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    consts.extend(schema.get("const"));
    for c in consts {
        out.push(crate::util::json::bare_type_name(c).to_string());
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        for b in schema
            .get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            types(b, depth + 1, out);
        }
    }
}

fn coerce(v: &mut Value, schema: &Value, depth: usize) {
    if depth > 8 {
        return;
    }
    let mut ts = Vec::new();
    types(schema, 0, &mut ts);
    if ts.is_empty() {
        return;
    }
    let items = schema.get("items").cloned().unwrap_or(Value::Null);
    // Bracket indices (`items[0][price]=…`) where the schema says array: in index order.
    if let Value::Object(m) = v {
        if ts.iter().any(|t| t == "array")
            && !m.is_empty()
            && m.keys()
                .all(|k| k.len() <= 6 && k.bytes().all(|b| b.is_ascii_digit()))
        {
            let mut pairs: Vec<(usize, Value)> = std::mem::take(m)
                .into_iter()
                .map(|(k, x)| (k.parse().unwrap_or(usize::MAX), x))
                .collect();
            pairs.sort_by_key(|(i, _)| *i);
            *v = Value::Array(pairs.into_iter().map(|(_, x)| x).collect());
        }
    }
    match v {
        Value::Object(m) if ts.iter().any(|t| t == "object") => {
            for (name, x) in m.iter_mut() {
                if let Some(s) = property(schema, name, 0) {
                    coerce(x, &s, depth + 1);
                }
            }
        }
        Value::Array(a) if ts.iter().any(|t| t == "array") => {
            for x in a {
                coerce(x, &items, depth + 1);
            }
        }
        Value::String(s) => {
            if ts.iter().any(|t| t == "string") {
                return;
            }
            if let Some(typed) = spell(s, &ts) {
                *v = typed;
            } else if ts.iter().any(|t| t == "array") {
                let mut one = Value::String(std::mem::take(s));
                coerce(&mut one, &items, depth + 1);
                *v = Value::Array(vec![one]);
            }
        }
        _ => {}
    }
}

/// `s` as the first of `types` it spells.
fn spell(s: &str, types: &[String]) -> Option<Value> {
    for t in types {
        let typed = match t.as_str() {
            "integer" => s.trim().parse::<i64>().ok().map(Value::from),
            "number" => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .and_then(|f| {
                    s.trim()
                        .parse::<i64>()
                        .ok()
                        .map(Value::from)
                        .or_else(|| serde_json::Number::from_f64(f).map(Value::Number))
                }),
            "boolean" => match s.trim() {
                "true" | "True" | "TRUE" => Some(Value::Bool(true)),
                "false" | "False" | "FALSE" => Some(Value::Bool(false)),
                _ => None,
            },
            "null" => (s.is_empty() || s == "null").then_some(Value::Null),
            "object" | "array" => serde_json::from_str::<Value>(s)
                .ok()
                .filter(|j| crate::util::json::bare_type_name(j) == t.as_str())
                .filter(|j| crate::util::json::json_depth(j) <= crate::util::json::MAX_BODY_DEPTH),
            _ => None,
        };
        if typed.is_some() {
            return typed;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds() {
        assert_eq!(body_kind(None), BodyKind::Json);
        assert_eq!(body_kind(Some("application/json")), BodyKind::Json);
        assert_eq!(
            body_kind(Some("Application/X-WWW-Form-Urlencoded; charset=utf-8")),
            BodyKind::Form
        );
        assert_eq!(
            body_kind(Some("multipart/form-data; boundary=\"abc\"")),
            BodyKind::Multipart("abc".into())
        );
    }

    #[test]
    fn urlencoded_fields_and_repeats() {
        let v = parse_urlencoded(
            b"To=%2B15551234567&Body=hi+there&MediaUrl=a&MediaUrl=b&MediaUrl=c&Empty=",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"To": "+15551234567", "Body": "hi there", "MediaUrl": ["a", "b", "c"], "Empty": ""})
        );
        assert!(parse_urlencoded(&[0xff, b'=', b'1']).is_err());
        let many = "a=1&".repeat(MAX_FIELDS + 1);
        let e = parse_urlencoded(many.as_bytes()).unwrap_err();
        assert!(e.contains("more than 1000 fields"), "{e}");
        let long = format!("{}=1", "k".repeat(MAX_NAME + 1));
        assert!(parse_urlencoded(long.as_bytes()).is_err());
    }

    #[test]
    fn bracket_names_are_nested_members() {
        let v = parse_urlencoded(
            b"metadata[order_id]=6735&metadata[note]=x&tags[]=a&tags[]=b&card[address][city]=Paris&items[0][price]=p1&items[1][price]=p2&items[1][quantity]=2",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({
                "metadata": {"order_id": "6735", "note": "x"},
                "tags": ["a", "b"],
                "card": {"address": {"city": "Paris"}},
                "items": {"0": {"price": "p1"}, "1": {"price": "p2", "quantity": "2"}},
            })
        );
        // Names that are not well formed, or do not fit what is there, stay flat.
        let v = parse_urlencoded(b"a=1&a[b]=2&[x]=3&c[d=4&e[]f=5&g[][h]=6&m[k]=1&m[k]=2").unwrap();
        assert_eq!(
            v,
            json!({"a": "1", "a[b]": "2", "[x]": "3", "c[d": "4", "e[]f": "5", "g[][h]": "6", "m": {"k": ["1", "2"]}})
        );
        let deep = format!("d{}=1", "[k]".repeat(MAX_NESTING + 1));
        let v = parse_urlencoded(deep.as_bytes()).unwrap();
        assert!(v.get(&deep[..deep.len() - 2]).is_some(), "{v}");
        // Typed by the schema: nested members, and indices where it says array.
        let mut v =
            parse_urlencoded(b"metadata[n]=3&items[1][quantity]=2&items[0][quantity]=1&tags[]=7")
                .unwrap();
        type_by_schema(
            &mut v,
            &json!({"properties": {
                "metadata": {"type": "object", "properties": {"n": {"type": "integer"}}},
                "items": {"type": "array", "items": {"type": "object", "properties": {"quantity": {"type": "integer"}}}},
                "tags": {"type": "array", "items": {"type": "integer"}},
            }}),
        );
        assert_eq!(
            v,
            json!({"metadata": {"n": 3}, "items": [{"quantity": 1}, {"quantity": 2}], "tags": [7]})
        );
    }

    #[test]
    fn multipart_fields_and_files() {
        let body = "--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nHello\r\n--XyZ\r\nContent-Disposition: form-data; name=\"tag\"\r\n\r\na\r\n--XyZ\r\nContent-Disposition: form-data; name=\"tag\"\r\n\r\nb\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.txt\"\r\nContent-Type: text/plain\r\n\r\nline1\r\nline2\r\n--XyZ--\r\n";
        let v = parse_multipart(body.as_bytes(), "XyZ").unwrap();
        assert_eq!(
            v,
            json!({"title": "Hello", "tag": ["a", "b"], "file": "line1\r\nline2"})
        );
        let mut bin =
            b"--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\n\r\n"
                .to_vec();
        bin.extend([0xff, 0xfe, 0x00]);
        bin.extend(b"\r\n--b--");
        assert_eq!(
            parse_multipart(&bin, "b").unwrap(),
            json!({"f": "[binary: 3 bytes]"})
        );
        // Not closed; no name; no boundary.
        assert!(parse_multipart(
            b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx",
            "b"
        )
        .unwrap_err()
        .contains("closing"));
        assert!(
            parse_multipart(b"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--", "b")
                .unwrap_err()
                .contains("no `Content-Disposition")
        );
        assert!(parse_multipart(b"x", "").is_err());
    }

    #[test]
    fn encoded_forms_parse_back_to_the_input() {
        let schema = json!({"properties": {
            "n": {"type": "integer"}, "ok": {"type": "boolean"},
            "MediaUrl": {"type": "array", "items": {"type": "string"}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"quantity": {"type": "integer"}}}},
        }});
        let input = json!({
            "To": "+1 555&=?", "n": 3, "ok": true, "MediaUrl": ["a", "b"], "gone": null,
            "metadata": {"order": "x y", "tags": ["t1", "t2"]},
            "items": [{"price": "p1", "quantity": 1}, {"price": "p2", "quantity": 2}],
            "empty": [],
        });
        let want = json!({
            "To": "+1 555&=?", "n": 3, "ok": true, "MediaUrl": ["a", "b"],
            "metadata": {"order": "x y", "tags": ["t1", "t2"]},
            "items": [{"price": "p1", "quantity": 1}, {"price": "p2", "quantity": 2}],
        });
        let text = encode_urlencoded(&input);
        assert!(text.contains("To=%2B1%20555%26%3D%3F"), "{text}");
        assert!(text.contains("MediaUrl=a&MediaUrl=b"), "{text}");
        assert!(text.contains("metadata%5Btags%5D%5B%5D=t1"), "{text}");
        let mut back = parse_urlencoded(text.as_bytes()).unwrap();
        type_by_schema(&mut back, &schema);
        assert_eq!(back, want);
        let (boundary, body) = encode_multipart(&input);
        let mut back = parse_multipart(&body, &boundary).unwrap();
        type_by_schema(&mut back, &schema);
        assert_eq!(back, want);
        // A field holding the first boundary gets another one.
        let (b2, body) = encode_multipart(&json!({"x": "--understudy-form-00000000"}));
        assert_ne!(b2, "understudy-form-00000000");
        assert_eq!(
            parse_multipart(&body, &b2).unwrap(),
            json!({"x": "--understudy-form-00000000"})
        );
        assert_eq!(
            fields_of(&json!("raw")),
            vec![("body".into(), "raw".into())]
        );
    }

    #[test]
    fn typed_by_the_input_schema() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
            "s": {"type": "string"}, "list": {"type": "array", "items": {"type": "integer"}},
            "opt": {"type": ["integer", "null"]}, "meta": {"type": "object"},
            "e": {"enum": [1, 2]}, "bad": {"type": "integer"}
        }});
        let mut v = json!({"n": "12", "x": "1.5", "b": "true", "s": "007", "list": "3",
            "opt": "", "meta": "{\"a\":1}", "e": "2", "bad": "twelve", "free": "1"});
        type_by_schema(&mut v, &schema);
        assert_eq!(
            v,
            json!({"n": 12, "x": 1.5, "b": true, "s": "007", "list": [3], "opt": null,
                "meta": {"a": 1}, "e": 2, "bad": "twelve", "free": "1"})
        );
        let mut arr = json!({"list": ["1", "2"]});
        type_by_schema(&mut arr, &schema);
        assert_eq!(arr, json!({"list": [1, 2]}));
    }

    proptest::proptest! {
        /// The fuzz target's property, on every `cargo test`: arbitrary bodies never panic
        /// and never give more than MAX_FIELDS fields.
        #[test]
        fn arbitrary_bodies_never_panic(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
                                        tail in "(--b(--)?\r?\n|Content-Disposition: form-data; name=\"[a-z]\"\r\n\r\n|[a-z=&%+]{0,8}){0,12}") {
            let mut with_parts = tail.into_bytes();
            with_parts.extend(&body);
            for b in [&body, &with_parts] {
                for v in [parse_urlencoded(b).ok(), parse_multipart(b, "b").ok()].into_iter().flatten() {
                    let n: usize = v.as_object().unwrap().values()
                        .map(|x| x.as_array().map_or(1, Vec::len)).sum();
                    proptest::prop_assert!(n <= MAX_FIELDS);
                    let mut v = v;
                    type_by_schema(&mut v, &json!({"properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "boolean"}}}}));
                }
            }
        }
    }
}
