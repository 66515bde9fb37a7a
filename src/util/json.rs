//! JSON depth bounds. serde_json refuses more than 128 levels when it parses, so every value
//! that is parsed at the edge and later stored must stay well under that:
//! [`MAX_BODY_DEPTH`] bounds a request body (the proxy and the MCP profile check it), and
//! [`MAX_STORED_DEPTH`] bounds what the store accepts (it refuses deeper values, so an
//! acknowledged call can never make an attempt's evidence unreadable). And
//! [`cut_secrets`]: known secret values cut out of every string of a value (the proxy's
//! evidence and the tool-testing API's answers). And [`without_schema_member`]: the `$schema`
//! member every file a user writes may carry for editors, taken off before the strict parse.

use serde_json::Value;
use std::borrow::Cow;

/// What `hyper::http::HeaderName::from_bytes` accepts (an RFC 9110 token), as a JSON Schema
/// `pattern` (the schemas of `scrub.headers`, a fault's `headers`, `idempotency.header`).
pub const HEADER_NAME_PATTERN: &str = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

/// The top-level member naming a file's JSON Schema (`"$schema": "../../schemas/operation.schema.json"`)
/// for editors (`schemas/`, `understudy schema NAME`). Every file a user writes may carry it;
/// understudy ignores its value.
pub const SCHEMA_MEMBER: &str = "$schema";

/// `value` without its top-level [`SCHEMA_MEMBER`], borrowed when there is none, so the
/// parsers that refuse unknown members (`deny_unknown_fields`) accept it. Err (the message)
/// when the member is there but not a string.
pub fn without_schema_member(value: &Value) -> Result<Cow<'_, Value>, String> {
    if !value
        .as_object()
        .is_some_and(|m| m.contains_key(SCHEMA_MEMBER))
    {
        return Ok(Cow::Borrowed(value));
    }
    let mut owned = value.clone();
    strip_schema_member(&mut owned)?;
    Ok(Cow::Owned(owned))
}

/// [`without_schema_member`] in place.
pub fn strip_schema_member(value: &mut Value) -> Result<(), String> {
    if let Some(m) = value.as_object_mut() {
        match m.get(SCHEMA_MEMBER) {
            None | Some(Value::String(_)) => {
                m.remove(SCHEMA_MEMBER);
            }
            Some(other) => {
                return Err(format!(
                    "expected a string (the URL or path of this file's JSON Schema), got {other}"
                ))
            }
        }
    }
    Ok(())
}

/// How deeply a request body's arrays and objects may nest. serde_json refuses more than 127
/// levels while parsing; a body just under that would be stored inside an evidence event and a
/// rendered result a few levels deeper, beyond what the store can read back. 64 levels is far
/// more than any tool input needs.
pub const MAX_BODY_DEPTH: usize = 64;

/// The deepest JSON value (arguments, result, error, state) a call may store. Records are
/// read back with serde_json, which refuses more than 128 levels; an evidence export wraps
/// an event's values in three more. [`crate::store::Store::write_call`] refuses deeper
/// values, so an acknowledged call can never make an attempt's evidence unreadable.
pub const MAX_STORED_DEPTH: usize = 100;

/// Whether JSON text nests more than `limit` arrays/objects, read from the bytes before any
/// parse (brackets inside strings do not count), so a body that is too deep is refused as
/// such rather than as a parser's recursion error.
pub fn text_deeper_than(bytes: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for &b in bytes {
        if in_str {
            match b {
                _ if esc => esc = false,
                b'\\' => esc = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// The nesting depth of a JSON value (a scalar is 0, `[]` and `{}` are 1). Recursive: call it
/// only on values serde_json parsed (at most 127 levels).
pub fn json_depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(json_depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Whether `v` nests more than `limit` arrays/objects (stops at the first path that does).
pub fn deeper_than(v: &Value, limit: usize) -> bool {
    match v {
        Value::Array(a) => limit == 0 || a.iter().any(|x| deeper_than(x, limit - 1)),
        Value::Object(m) => limit == 0 || m.values().any(|x| deeper_than(x, limit - 1)),
        _ => false,
    }
}

/// Cut every occurrence of `secrets` out of every string (keys included) of `v`.
pub fn cut_secrets(v: &mut Value, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    let cut = |s: &str| -> Option<String> {
        let mut out = s.to_string();
        let mut changed = false;
        for sec in secrets {
            if out.contains(sec.as_str()) {
                out = out.replace(sec.as_str(), super::scrub::SCRUBBED);
                changed = true;
            }
        }
        changed.then_some(out)
    };
    match v {
        Value::String(s) => {
            if let Some(n) = cut(s) {
                *s = n;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| cut_secrets(x, secrets)),
        Value::Object(m) => {
            let old = std::mem::take(m);
            for (k, mut x) in old {
                cut_secrets(&mut x, secrets);
                m.insert(cut(&k).unwrap_or(k), x);
            }
        }
        _ => {}
    }
}

/// What kind of JSON value `v` is, for messages ("a string"; never the value itself).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// [`type_name`] without its article, as JSON Schema names the type ("boolean", "number";
/// every number is `number`): derived from the one mapping, never a second one.
pub fn bare_type_name(v: &Value) -> &'static str {
    let t = type_name(v);
    t.strip_prefix("an ")
        .or_else(|| t.strip_prefix("a "))
        .unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_is_counted_in_nested_arrays_and_objects() {
        let mut v = Value::from(1);
        assert!(!deeper_than(&v, 0));
        assert_eq!(json_depth(&v), 0);
        for _ in 0..3 {
            v = serde_json::json!([{ "a": v }]);
        }
        assert!(deeper_than(&v, 5) && !deeper_than(&v, 6));
        assert_eq!(json_depth(&v), 6);
    }

    #[test]
    fn secrets_are_cut_from_every_string() {
        let mut v = serde_json::json!({"a": "x Bearer-tok-123456 y", "Bearer-tok-123456": [1, "Bearer-tok-123456"]});
        cut_secrets(&mut v, &["Bearer-tok-123456".to_string()]);
        assert!(!v.to_string().contains("tok-123456"), "{v}");
    }
}
