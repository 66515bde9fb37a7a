//! Dot paths (docs/src/reference/mock-definition.md#selection: `a.b.0.c`) and the JSON comparisons of conditions.
//!
//! A [`DotPath`] is parsed once, when a definition is compiled, and then resolved against an
//! input or a state without allocating. Also here: [`json_equal`] (deep equality with numbers
//! compared by value) and [`pointer_push`], which builds the `variants/found/result/…` paths
//! that errors carry.
//!
//! Decisions (the documented rules leave them open):
//! - A path is one or more non-empty segments separated by `.`: `""`, `"a..b"`, `".a"` and
//!   `"a."` are malformed. A segment may hold any other character (spaces included); there is no
//!   escape for a key that contains a `.`.
//! - A segment indexes an array when it is a canonical decimal integer (`0`, or a non-zero digit
//!   followed by digits, fitting `usize`): `01` and `-1` are keys only. On an object every
//!   segment, numeric or not, is a key (`"0"` reads the member named `0`).
//! - A segment on a scalar (string, number, bool, null) does not resolve. A present `null` is a
//!   value: it resolves.

use serde_json::{Map, Number, Value};

/// One parsed segment: the member name, and the array index it also spells, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Segment {
    key: Box<str>,
    index: Option<usize>,
}

/// A parsed dot path. `Send + Sync`, resolved without allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DotPath {
    text: Box<str>,
    segments: Box<[Segment]>,
}

impl DotPath {
    /// Parse `a.b.0.c`. The error says what is wrong, for a `invalid_fixture_literal` message.
    pub fn parse(text: &str) -> Result<DotPath, String> {
        if text.is_empty() {
            return Err("a path must name at least one member (got the empty string)".into());
        }
        let mut segments = Vec::new();
        for (i, seg) in text.split('.').enumerate() {
            if seg.is_empty() {
                return Err(format!(
                    "path `{text}` has an empty segment (number {}); segments are separated by single dots",
                    i + 1
                ));
            }
            segments.push(Segment {
                key: seg.into(),
                index: array_index(seg),
            });
        }
        Ok(DotPath {
            text: text.into(),
            segments: segments.into_boxed_slice(),
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value at this path under `root`, or `Err(i)` where `i` is the first segment that
    /// did not resolve.
    pub fn resolve<'a>(&self, root: &'a Value) -> Result<&'a Value, usize> {
        let mut cur = root;
        for (i, seg) in self.segments.iter().enumerate() {
            cur = step(cur, seg).ok_or(i)?;
        }
        Ok(cur)
    }

    /// The value at this path under an object root (a state), or `Err(i)` as in [`resolve`].
    ///
    /// [`resolve`]: DotPath::resolve
    pub fn resolve_in<'a>(&self, root: &'a Map<String, Value>) -> Result<&'a Value, usize> {
        let (first, rest) = self
            .segments
            .split_first()
            .expect("a parsed path has at least one segment");
        let mut cur = root.get(&*first.key).ok_or(0usize)?;
        for (i, seg) in rest.iter().enumerate() {
            cur = step(cur, seg).ok_or(i + 1)?;
        }
        Ok(cur)
    }

    /// The member names of the path, in order (`*` included as written).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().map(|s| &*s.key)
    }

    /// Every value this path reaches when a segment that is exactly `*` matches every element
    /// of an array or every member of an object (the `sources` paths of tool-call contracts,
    /// docs/src/reference/contracts.md), in document order. Without a `*` segment this is [`resolve`] as a list.
    /// The mock engine never calls it: in a definition `*` is an ordinary member name.
    ///
    /// [`resolve`]: DotPath::resolve
    pub fn resolve_wildcard<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut cur = vec![root];
        for seg in self.segments.iter() {
            let mut next = Vec::new();
            for v in cur {
                match v {
                    Value::Array(a) if &*seg.key == "*" => next.extend(a.iter()),
                    Value::Object(m) if &*seg.key == "*" => next.extend(m.values()),
                    _ => next.extend(step(v, seg)),
                }
            }
            cur = next;
        }
        cur
    }

    /// A human description of where resolution stopped (`Err(i)` of [`resolve`]).
    ///
    /// [`resolve`]: DotPath::resolve
    pub fn describe_miss(&self, i: usize) -> String {
        let seg = &self.segments[i].key;
        if i == 0 {
            format!("no `{seg}` at the top level")
        } else {
            let parent: Vec<&str> = self.segments[..i].iter().map(|s| &*s.key).collect();
            format!("no `{seg}` under `{}`", parent.join("."))
        }
    }
}

impl std::fmt::Display for DotPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn array_index(seg: &str) -> Option<usize> {
    let b = seg.as_bytes();
    let canonical = b.iter().all(u8::is_ascii_digit) && (b.len() == 1 || b[0] != b'0');
    if canonical {
        seg.parse().ok()
    } else {
        None
    }
}

#[inline]
fn step<'a>(cur: &'a Value, seg: &Segment) -> Option<&'a Value> {
    match cur {
        Value::Object(m) => m.get(&*seg.key),
        Value::Array(a) => a.get(seg.index?),
        _ => None,
    }
}

/// Deep JSON equality where numbers compare by value (`1` equals `1.0`, `-0.0` equals `0`).
/// Objects are equal when they have the same keys with equal values; arrays element by element.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_equal(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Equal as written: the two values serialize to the same JSON text. Unlike [`json_equal`],
/// `1` and `1.0` differ, and so do `0.0` and `-0.0` (which `==` on `Value` confuses).
pub fn json_identical(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y && x.as_f64().map(f64::is_sign_negative) == y.as_f64().map(f64::is_sign_negative)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_identical(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k, v), (l, w))| k == l && json_identical(v, w))
        }
        _ => a == b,
    }
}

/// Numbers by value, exactly: two integers compare as integers; an integer and a float are
/// equal only when the float is integral and spells that very integer (no rounding through
/// f64, so `9007199254740993` does not equal `9007199254740992.0`).
pub fn number_equal(x: &Number, y: &Number) -> bool {
    match (as_int(x), as_int(y)) {
        (Some(i), Some(j)) => i == j,
        (Some(i), None) => float_is_int(y.as_f64(), i),
        (None, Some(j)) => float_is_int(x.as_f64(), j),
        (None, None) => x.as_f64() == y.as_f64(),
    }
}

fn as_int(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

fn float_is_int(f: Option<f64>, i: i128) -> bool {
    // 2^64 bounds every integer serde_json holds; beyond it no float equals one of them.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    match f {
        Some(f) if f.fract() == 0.0 && f.abs() <= LIMIT => f as i128 == i,
        _ => false,
    }
}

/// `parent/segment` with the segment escaped as in JSON Pointer (`~` → `~0`, `/` → `~1`).
/// The root is the empty string: `pointer_push("", "variants")` is `variants`.
pub fn pointer_push(parent: &str, segment: &str) -> String {
    let mut out = String::with_capacity(parent.len() + segment.len() + 1);
    out.push_str(parent);
    if !parent.is_empty() {
        out.push('/');
    }
    for c in segment.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn splits_on_dots_and_recognises_indices() {
        let p = DotPath::parse("a.b.0.c").unwrap();
        assert_eq!(p.as_str(), "a.b.0.c");
        let idx: Vec<Option<usize>> = p.segments.iter().map(|s| s.index).collect();
        assert_eq!(idx, vec![None, None, Some(0), None]);
    }

    #[test]
    fn rejects_empty_paths_and_segments() {
        for bad in ["", ".", "a..b", ".a", "a."] {
            assert!(DotPath::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn only_canonical_integers_index() {
        assert_eq!(array_index("0"), Some(0));
        assert_eq!(array_index("10"), Some(10));
        assert_eq!(array_index("01"), None);
        assert_eq!(array_index("-1"), None);
        assert_eq!(array_index("1a"), None);
        assert_eq!(array_index("99999999999999999999999"), None);
    }

    #[test]
    fn keeps_spaces_and_other_characters() {
        let p = DotPath::parse("first name.x-y").unwrap();
        assert_eq!(&*p.segments[0].key, "first name");
    }
}

#[cfg(test)]
mod resolve_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolves_objects_and_arrays() {
        let v = json!({"a": {"b": [ {"c": 1}, {"c": 2} ]}});
        let p = DotPath::parse("a.b.1.c").unwrap();
        assert_eq!(p.resolve(&v), Ok(&json!(2)));
    }

    #[test]
    fn numeric_segment_is_a_key_on_objects() {
        let v = json!({"0": "zero"});
        assert_eq!(DotPath::parse("0").unwrap().resolve(&v), Ok(&json!("zero")));
    }

    #[test]
    fn reports_first_missing_segment() {
        let v = json!({"a": {"b": 1}});
        let p = DotPath::parse("a.x.y").unwrap();
        assert_eq!(p.resolve(&v), Err(1));
        assert_eq!(p.describe_miss(1), "no `x` under `a`");
        let p = DotPath::parse("a.b.c").unwrap();
        assert_eq!(p.resolve(&v), Err(2), "a scalar has no members");
        let p = DotPath::parse("z").unwrap();
        assert_eq!(p.describe_miss(0), "no `z` at the top level");
    }

    #[test]
    fn out_of_bounds_and_non_index_on_arrays_miss() {
        let v = json!({"a": [1]});
        assert_eq!(DotPath::parse("a.1").unwrap().resolve(&v), Err(1));
        assert_eq!(DotPath::parse("a.x").unwrap().resolve(&v), Err(1));
        assert_eq!(DotPath::parse("a.00").unwrap().resolve(&v), Err(1));
    }

    #[test]
    fn null_is_present() {
        let v = json!({"a": null});
        assert_eq!(DotPath::parse("a").unwrap().resolve(&v), Ok(&Value::Null));
    }

    #[test]
    fn resolves_in_a_state_map() {
        let v = json!({"a": [true]});
        let m = v.as_object().unwrap();
        assert_eq!(
            DotPath::parse("a.0").unwrap().resolve_in(m),
            Ok(&json!(true))
        );
        assert_eq!(DotPath::parse("b").unwrap().resolve_in(m), Err(0));
    }
}

#[cfg(test)]
mod equality_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_equal(&json!(1), &json!(1.0)));
        assert!(json_equal(&json!(-0.0), &json!(0)));
        assert!(!json_equal(&json!(1), &json!(1.5)));
        assert!(json_equal(&json!(u64::MAX), &json!(u64::MAX)));
        assert!(!json_equal(
            &json!(i64::MAX),
            &json!(9_223_372_036_854_775_808.0)
        ));
        assert!(!json_equal(
            &json!(9_007_199_254_740_993u64),
            &json!(9_007_199_254_740_992.0)
        ));
    }

    #[test]
    fn deep_structures() {
        assert!(json_equal(
            &json!({"a": [1, {"b": 2.0}]}),
            &json!({"a": [1.0, {"b": 2}]})
        ));
        assert!(!json_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!json_equal(&json!([1, 2]), &json!([2, 1])));
        assert!(!json_equal(&json!("1"), &json!(1)));
        assert!(!json_equal(&json!(null), &json!(false)));
    }
}

#[cfg(test)]
mod pointer_tests {
    use super::*;

    #[test]
    fn escapes_like_json_pointer() {
        assert_eq!(pointer_push("", "variants"), "variants");
        assert_eq!(pointer_push("variants", "a/b~c"), "variants/a~1b~0c");
    }
}

#[cfg(test)]
mod identical_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identical_means_the_same_json_text() {
        for (a, b) in [
            (
                json!({"a": [1, "x", null], "b": {"c": true}}),
                json!({"b": {"c": true}, "a": [1, "x", null]}),
            ),
            (json!(1.5), json!(1.5)),
            (json!(-3), json!(-3)),
        ] {
            assert!(json_identical(&a, &b), "{a} {b}");
            assert_eq!(a.to_string(), b.to_string());
        }
        for (a, b) in [
            (json!(1), json!(1.0)),
            (json!(0.0), json!(-0.0)),
            (json!({"a": 1}), json!({"b": 1})),
            (json!({"a": 1}), json!({"a": 1, "b": 2})),
            (json!([1]), json!([1, 1])),
            (json!("1"), json!(1)),
        ] {
            assert!(!json_identical(&a, &b), "{a} {b}");
            assert_ne!(a.to_string(), b.to_string());
        }
    }
}
