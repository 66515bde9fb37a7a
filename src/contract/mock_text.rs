//! An operation file's `mock`, kept as compact JSON text and parsed where it is used.
//!
//! A parsed definition is a tree of maps: 10 000 operation files held ~150 MiB of them from
//! start-up on, although a run calls few operations and each one's engine is compiled from
//! the definition on first use (docs/src/operations/performance.md). The text is a tenth of
//! that. [`MockText::parse`] gives a fresh value (check, hashes, revisions, compiling the
//! engine: each once); [`MockText::value`] keeps the parsed value for what a call reads again
//! and again (the MCP notifications a variant declares), so only operations that are called
//! hold one.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `mock` member of an operation file (module doc).
#[derive(Default)]
pub struct MockText {
    text: Box<str>,
    parsed: OnceLock<Value>,
}

impl MockText {
    /// The definition `v`, kept as its compact text.
    pub fn new(v: &Value) -> MockText {
        MockText {
            text: serde_json::to_string(v)
                .unwrap_or_default()
                .into_boxed_str(),
            parsed: OnceLock::new(),
        }
    }

    /// The definition, parsed now (not kept).
    pub fn parse(&self) -> Value {
        // The text was written from a `Value` read by serde_json (its depth within the same
        // limit), so it parses; `null` would be refused as "not a valid definition".
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// The definition, parsed by the first call and kept for the next ones.
    pub fn value(&self) -> &Value {
        self.parsed.get_or_init(|| self.parse())
    }

    /// A member of the definition (through [`MockText::value`]: the parsed value is kept).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value().get(key)
    }

    /// Whether [`MockText::value`] parsed it (kept since).
    pub fn is_parsed(&self) -> bool {
        self.parsed.get().is_some()
    }

    /// The compact JSON text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// `contract_hash` as written, if it is a string (read without building the tree).
    pub fn contract_hash(&self) -> Option<String> {
        match self.head().contract_hash? {
            Value::String(h) => Some(h),
            _ => None,
        }
    }

    /// `initial_state` as written, if it is an object (read without building the rest).
    pub fn initial_state(&self) -> Option<serde_json::Map<String, Value>> {
        match self.head().initial_state? {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The two members read at every load, the rest skipped unparsed. Only of an object: a
    /// derived `Deserialize` would also read an array's items as the members, in order.
    fn head(&self) -> Head {
        if !self.text.starts_with('{') {
            return Head::default();
        }
        serde_json::from_str(&self.text).unwrap_or_default()
    }

    /// Changes the definition: `f` edits the parsed value, which is kept as text again.
    pub fn edit(&mut self, f: impl FnOnce(&mut Value)) {
        let mut v = self.parse();
        f(&mut v);
        *self = MockText::new(&v);
    }
}

#[derive(Default, Deserialize)]
struct Head {
    contract_hash: Option<Value>,
    initial_state: Option<Value>,
}

impl From<Value> for MockText {
    fn from(v: Value) -> MockText {
        MockText::new(&v)
    }
}

/// `mock["variants"]`: as [`MockText::get`], `null` when missing.
impl std::ops::Index<&str> for MockText {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        &self.value()[key]
    }
}

impl Clone for MockText {
    fn clone(&self) -> MockText {
        MockText {
            text: self.text.clone(),
            parsed: OnceLock::new(),
        }
    }
}

impl PartialEq for MockText {
    fn eq(&self, other: &MockText) -> bool {
        self.text == other.text
    }
}

impl std::fmt::Debug for MockText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for MockText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.parse().serialize(s)
    }
}

impl<'de> Deserialize<'de> for MockText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MockText, D::Error> {
        Value::deserialize(d).map(|v| MockText::new(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kept_as_compact_text_and_parsed_back_whole() {
        let v = json!({"contract_hash": "sha256:ab", "schema_version": 1,
                       "variants": {"a": {"result": {"n": 1.5, "s": "x\"y"}}}});
        let m = MockText::new(&v);
        assert_eq!(m.parse(), v);
        assert!(!m.is_parsed(), "parse() keeps nothing");
        assert_eq!(m.text(), serde_json::to_string(&v).unwrap());
        assert!(!m.text().contains(' '), "compact: {}", m.text());
        assert_eq!(m.value(), &v);
        assert!(m.is_parsed());
        assert!(!m.clone().is_parsed(), "a clone is text only");
        assert_eq!(m["variants"]["a"]["result"]["n"], 1.5);
        assert_eq!(m.get("schema_version"), Some(&json!(1)));
        assert_eq!((m.get("nope"), &m["nope"]), (None, &Value::Null));
        assert_eq!(serde_json::to_value(&m).unwrap(), v);
        let back: MockText = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, m);
        assert_eq!(m.clone(), m);
        assert_ne!(MockText::new(&json!({"a": 2})), m);
    }

    #[test]
    fn the_recorded_contract_hash_only_when_it_is_a_string() {
        let h = |v: Value| MockText::new(&v).contract_hash();
        assert_eq!(
            h(json!({"contract_hash": "sha256:1", "x": [1]})).as_deref(),
            Some("sha256:1")
        );
        assert_eq!(h(json!({"contract_hash": 3})), None);
        assert_eq!(h(json!({"schema_version": 1})), None);
        assert_eq!(h(json!([1, 2])), None);
        // An array is not an object whose first member is `contract_hash`.
        assert_eq!(h(json!(["sha256:1"])), None);
    }

    #[test]
    fn the_initial_state_only_when_it_is_an_object() {
        let s = |v: Value| MockText::new(&v).initial_state();
        assert_eq!(
            s(json!({"initial_state": {"k": [1]}, "variants": {}})),
            json!({"k": [1]}).as_object().cloned()
        );
        assert_eq!(s(json!({"initial_state": [1]})), None);
        assert_eq!(s(json!({"variants": {}})), None);
        assert_eq!(s(json!("text")), None);
        assert_eq!(s(json!([null, {"k": 1}])), None);
    }

    #[test]
    fn an_edit_is_kept_and_forgets_the_parsed_value() {
        let mut m = MockText::new(&json!({"a": 1}));
        assert_eq!(m.value()["a"], 1);
        m.edit(|v| v["a"] = json!(2));
        assert!(!m.is_parsed());
        assert_eq!(m.value()["a"], 2);
        assert_eq!(m.text(), r#"{"a":2}"#);
    }
}
