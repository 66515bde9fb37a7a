//! The pure part of `understudy drift` (SPEC 19): where a real answer's shape (and, on
//! request, values) differs from what the mock renders for the same input.
//!
//! Both sides are the native envelope (`{"status","data"}`). Paths are JSONPath-like:
//! `$.data.records[0].FirstName`. Objects are compared member by member (a member only in
//! the real answer is `added`, only in the mock `removed`); arrays element by element over
//! their common length (a length difference is a value difference); a JSON type that differs
//! (`string` → `number`, `object` → `null`) is `changed_type` and its inside is not compared
//! further. Integers and other numbers are one type, `number`. Values (scalars that differ,
//! array lengths) are reported only when asked; `status` is always compared.

use serde_json::{json, Value};

/// One difference.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub path: String,
    pub kind: Kind,
    /// The mock's value there (`None` for `added`).
    pub mock: Option<Value>,
    /// The real value there (`None` for `removed`).
    pub real: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Added,
    Removed,
    ChangedType,
    ChangedValue,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Added => "added",
            Kind::Removed => "removed",
            Kind::ChangedType => "changed_type",
            Kind::ChangedValue => "changed_value",
        }
    }
}

impl Difference {
    pub fn to_json(&self) -> Value {
        json!({"path": self.path, "kind": self.kind.as_str(), "mock": self.mock, "real": self.real})
    }

    /// One line: `$.data.x: changed type: string → number`.
    pub fn describe(&self) -> String {
        let ty = |v: &Option<Value>| v.as_ref().map(type_name).unwrap_or("-");
        match self.kind {
            Kind::Added => format!("{}: added ({})", self.path, ty(&self.real)),
            Kind::Removed => format!("{}: removed (was {})", self.path, ty(&self.mock)),
            Kind::ChangedType => format!(
                "{}: changed type: {} → {}",
                self.path,
                ty(&self.mock),
                ty(&self.real)
            ),
            Kind::ChangedValue => format!(
                "{}: changed value: {} → {}",
                self.path,
                short(self.mock.as_ref()),
                short(self.real.as_ref())
            ),
        }
    }
}

fn short(v: Option<&Value>) -> String {
    let s = v.map(Value::to_string).unwrap_or_default();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

/// The JSON type name (`number` for every number).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every difference between the mock's rendered result and the real answer (module doc).
pub fn diff(mock: &Value, real: &Value, values: bool) -> Vec<Difference> {
    let mut out = Vec::new();
    // The status is part of the contract's behaviour: always compared.
    if let (Some(a), Some(b)) = (mock.get("status"), real.get("status")) {
        if !crate::mock::path::json_equal(a, b) {
            out.push(Difference {
                path: "$.status".into(),
                kind: Kind::ChangedValue,
                mock: Some(a.clone()),
                real: Some(b.clone()),
            });
        }
    }
    match (mock.get("data"), real.get("data")) {
        (Some(a), Some(b)) => walk(a, b, "$.data".into(), values, &mut out),
        (Some(a), None) => out.push(Difference {
            path: "$.data".into(),
            kind: Kind::Removed,
            mock: Some(a.clone()),
            real: None,
        }),
        (None, Some(b)) => out.push(Difference {
            path: "$.data".into(),
            kind: Kind::Added,
            mock: None,
            real: Some(b.clone()),
        }),
        (None, None) => {}
    }
    out
}

fn member_path(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !key.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", Value::String(key.to_string()))
    }
}

fn walk(a: &Value, b: &Value, path: String, values: bool, out: &mut Vec<Difference>) {
    if type_name(a) != type_name(b) {
        out.push(Difference {
            path,
            kind: Kind::ChangedType,
            mock: Some(a.clone()),
            real: Some(b.clone()),
        });
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                let p = member_path(&path, k);
                match y.get(k) {
                    Some(vb) => walk(va, vb, p, values, out),
                    None => out.push(Difference {
                        path: p,
                        kind: Kind::Removed,
                        mock: Some(va.clone()),
                        real: None,
                    }),
                }
            }
            for (k, vb) in y {
                if !x.contains_key(k) {
                    out.push(Difference {
                        path: member_path(&path, k),
                        kind: Kind::Added,
                        mock: None,
                        real: Some(vb.clone()),
                    });
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                walk(va, vb, format!("{path}[{i}]"), values, out);
            }
            if values && x.len() != y.len() {
                out.push(Difference {
                    path: format!("{path}.length"),
                    kind: Kind::ChangedValue,
                    mock: Some(json!(x.len())),
                    real: Some(json!(y.len())),
                });
            }
        }
        _ => {
            if values && !crate::mock::path::json_equal(a, b) {
                out.push(Difference {
                    path,
                    kind: Kind::ChangedValue,
                    mock: Some(a.clone()),
                    real: Some(b.clone()),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let mock = json!({"status": 200, "data": {"id": "1", "n": 2, "gone": true, "list": [{"a": 1}], "o": {"x": 1}}});
        let real = json!({"status": 200, "data": {"id": 1, "n": 3.5, "new": null, "list": [{"a": 2, "b": 1}, {"a": 3}], "o": {"x": 1}}});
        let d = diff(&mock, &real, false);
        let got: Vec<String> = d.iter().map(Difference::describe).collect();
        assert_eq!(
            got,
            vec![
                "$.data.gone: removed (was boolean)",
                "$.data.id: changed type: string → number",
                "$.data.list[0].b: added (number)",
                "$.data.new: added (null)",
            ]
        );
        let v = diff(&mock, &real, true);
        assert!(v
            .iter()
            .any(|d| d.path == "$.data.n" && d.kind == Kind::ChangedValue));
        assert!(v.iter().any(|d| d.path == "$.data.list.length"));
        assert!(v.iter().any(|d| d.path == "$.data.list[0].a"));
    }

    #[test]
    fn status_and_odd_keys() {
        let d = diff(
            &json!({"status": 200, "data": {"a b": 1}}),
            &json!({"status": 404}),
            false,
        );
        assert_eq!(d[0].path, "$.status");
        assert_eq!(d[1].kind, Kind::Removed);
        let d = diff(&json!({"data": {"a b": 1}}), &json!({"data": {}}), false);
        assert_eq!(d[0].path, "$.data[\"a b\"]");
        assert!(diff(
            &json!({"status": 200, "data": 1}),
            &json!({"status": 200, "data": 1.0}),
            true
        )
        .is_empty());
    }
}
