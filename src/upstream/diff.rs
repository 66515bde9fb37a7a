//! The one mock-vs-real diff: where a real answer differs from what the mock renders for the
//! same input (`understudy drift`, and the `diff` of an on-demand real call,
//! `POST /tools/execute` with `"target": "upstream"`).
//!
//! Objects are compared member by member (a member only in the real answer is `added`, only
//! in the mock `removed`); arrays element by element over their common length, and a length
//! difference is a value difference: each element only one side has is `added` or `removed`
//! at its index; a JSON type that differs (`string` →
//! `number`, `object` → `null`) is `changed_type` and its inside is not compared further.
//! Integers and other numbers are one type, `number`, and equal when numerically equal.
//! Values (scalars that differ, array lengths) are reported only when asked.
//!
//! [`diff`] compares two native envelopes (`{"status","data"}`): `status` is always compared,
//! then `data`; the envelope's `headers` are not (a real answer's envelope carries none:
//! [`super::answer::envelope`]). [`diff_value`] compares two whole values (an MCP tool's
//! output).
//!
//! Every [`Difference`] names its place twice, from one walk: [`Difference::path`], the
//! JSONPath-like `$.data.records[0].FirstName` people read in drift's report, and
//! [`Difference::pointer`], the RFC 6901 JSON Pointer `/data/records/0/FirstName` a program
//! resolves (the API's `diff[].path`).

use serde_json::{json, Value};

use crate::util::json::bare_type_name as type_name;

/// One difference.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// JSONPath-like: `$.data.list[0].name`, `$.data["a b"]`.
    pub path: String,
    /// The same place as an RFC 6901 JSON Pointer: `/data/list/0/name`, `/data/a b`; `/` for
    /// the whole value.
    pub pointer: String,
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
    /// `{"path","kind","mock","real"}` (drift's report).
    pub fn to_json(&self) -> Value {
        json!({"path": self.path, "kind": self.kind.as_str(), "mock": self.mock, "real": self.real})
    }

    /// `{"path","mock","upstream"}`, the path a JSON Pointer (the tool-testing API's `diff`).
    pub fn to_api_json(&self) -> Value {
        json!({"path": self.pointer, "mock": self.mock, "upstream": self.real})
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

/// A place in the compared values, in both notations.
#[derive(Clone)]
struct Place {
    path: String,
    pointer: String,
}

impl Place {
    fn root() -> Place {
        Place {
            path: "$".into(),
            pointer: String::new(),
        }
    }

    fn member(&self, key: &str) -> Place {
        let plain = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && !key.starts_with(|c: char| c.is_ascii_digit());
        let path = if plain {
            format!("{}.{key}", self.path)
        } else {
            format!("{}[{}]", self.path, Value::String(key.to_string()))
        };
        let pointer = format!(
            "{}/{}",
            self.pointer,
            key.replace('~', "~0").replace('/', "~1")
        );
        Place { path, pointer }
    }

    fn index(&self, i: usize) -> Place {
        Place {
            path: format!("{}[{i}]", self.path),
            pointer: format!("{}/{i}", self.pointer),
        }
    }

    fn at(self, kind: Kind, mock: Option<&Value>, real: Option<&Value>) -> Difference {
        Difference {
            path: self.path,
            pointer: if self.pointer.is_empty() {
                "/".into()
            } else {
                self.pointer
            },
            kind,
            mock: mock.cloned(),
            real: real.cloned(),
        }
    }
}

/// Every difference between the mock's rendered envelope and the real one (module doc): the
/// status always, then `data` (values only when `values`).
pub fn diff(mock: &Value, real: &Value, values: bool) -> Vec<Difference> {
    let mut out = Vec::new();
    let root = Place::root();
    // The status is part of the contract's behaviour: always compared.
    if let (Some(a), Some(b)) = (mock.get("status"), real.get("status")) {
        if !crate::mock::path::json_equal(a, b) {
            out.push(
                root.member("status")
                    .at(Kind::ChangedValue, Some(a), Some(b)),
            );
        }
    }
    let data = root.member("data");
    match (mock.get("data"), real.get("data")) {
        (Some(a), Some(b)) => walk(a, b, data, values, &mut out),
        (Some(a), None) => out.push(data.at(Kind::Removed, Some(a), None)),
        (None, Some(b)) => out.push(data.at(Kind::Added, None, Some(b))),
        (None, None) => {}
    }
    out
}

/// Every difference between two whole values (module doc).
pub fn diff_value(mock: &Value, real: &Value, values: bool) -> Vec<Difference> {
    let mut out = Vec::new();
    walk(mock, real, Place::root(), values, &mut out);
    out
}

fn walk(a: &Value, b: &Value, place: Place, values: bool, out: &mut Vec<Difference>) {
    if type_name(a) != type_name(b) {
        out.push(place.at(Kind::ChangedType, Some(a), Some(b)));
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                let p = place.member(k);
                match y.get(k) {
                    Some(vb) => walk(va, vb, p, values, out),
                    None => out.push(p.at(Kind::Removed, Some(va), None)),
                }
            }
            for (k, vb) in y {
                if !x.contains_key(k) {
                    out.push(place.member(k).at(Kind::Added, None, Some(vb)));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                walk(va, vb, place.index(i), values, out);
            }
            // A length difference is a value difference: each element only one side has.
            if values {
                for (i, va) in x.iter().enumerate().skip(y.len()) {
                    out.push(place.index(i).at(Kind::Removed, Some(va), None));
                }
                for (i, vb) in y.iter().enumerate().skip(x.len()) {
                    out.push(place.index(i).at(Kind::Added, None, Some(vb)));
                }
            }
        }
        _ => {
            if values && !crate::mock::path::json_equal(a, b) {
                out.push(place.at(Kind::ChangedValue, Some(a), Some(b)));
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
        // A length difference is each element only one side has (was `$.data.list.length`).
        assert!(v
            .iter()
            .any(|d| d.path == "$.data.list[1]" && d.kind == Kind::Added));
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

    /// The tool-testing API's rendering (the former `admin::execute_upstream` diff's test).
    #[test]
    fn diffs_are_field_level() {
        let d: Vec<Value> = diff(
            &json!({"status": 200, "data": {"a": 1, "b": [1, 2]}}),
            &json!({"status": 200, "data": {"a": 2, "b": [1], "c": true}}),
            true,
        )
        .iter()
        .map(Difference::to_api_json)
        .collect();
        assert_eq!(
            d,
            vec![
                json!({"path": "/data/a", "mock": 1, "upstream": 2}),
                json!({"path": "/data/b/1", "mock": 2, "upstream": null}),
                json!({"path": "/data/c", "mock": null, "upstream": true}),
            ]
        );
    }
}
