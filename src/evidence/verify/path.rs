//! Dot paths of tool-call contracts (docs/src/reference/contracts.md uses the rules of docs/src/reference/mock-definition.md, see
//! [`crate::mock::path`]) plus the `*` segment of `sources` paths.
//!
//! The walking is [`crate::mock::path::DotPath`]'s (one walker for every dot path), whose rules —
//! non-empty segments separated by single dots; a canonical decimal integer (`0`, `12`, not
//! `01`) indexes an array; on an object every segment is a member name; a scalar has no
//! members; a present `null` resolves — this type keeps, adding one: a segment that is exactly `*` matches
//! every element of an array or every member of an object. `*` is accepted only where the
//! caller says so (`sources` paths); elsewhere it is rejected when the contract is parsed.

use std::borrow::Cow;

use serde_json::Value;

use crate::mock::path::DotPath;
use crate::util::json::{text_deeper_than, MAX_BODY_DEPTH};

/// The path step that reads a string as the JSON text it holds: `content.*.text.$json.id`
/// reaches `id` inside the JSON object an MCP text block carries. A string that is not JSON
/// (or is nested deeper than the engine's bound) reaches nothing.
pub const JSON_STEP: &str = "$json";

/// A parsed contract path: [`DotPath`]s (the one walker of docs/src/reference/mock-definition.md
/// paths) separated by `$json` steps, and whether it holds a `*` segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VPath {
    whole: DotPath,
    /// The walks between `$json` steps; `None` where two steps (or an end) meet.
    pieces: Vec<Option<DotPath>>,
    wildcard: bool,
}

impl VPath {
    /// Parse `a.b.0.c` (and `a.*.c` when `wildcard` is true; `a.$json.b` anywhere). The error
    /// says what is wrong.
    pub fn parse(text: &str, wildcard: bool) -> Result<VPath, String> {
        // Same syntax errors, word for word, as the mock definitions' paths.
        let whole = DotPath::parse(text)?;
        let mut pieces = Vec::new();
        let mut current: Vec<&str> = Vec::new();
        for seg in whole.keys() {
            if seg == JSON_STEP {
                pieces.push(piece(&current)?);
                current.clear();
            } else {
                current.push(seg);
            }
        }
        pieces.push(piece(&current)?);
        let has_star = whole.keys().any(|k| k == "*");
        if has_star && !wildcard {
            return Err(format!(
                "path `{text}`: `*` is allowed only in `sources` paths"
            ));
        }
        Ok(VPath {
            whole,
            pieces,
            wildcard: has_star,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        self.whole.as_str()
    }

    /// The member names / indices, `None` for `*` (`$json` included as written).
    pub fn segments(&self) -> impl Iterator<Item = Option<&str>> {
        self.whole.keys().map(|k| (k != "*").then_some(k))
    }

    /// The single value at this path (a path without `*`), if it resolves.
    pub fn get<'a>(&self, root: &'a Value) -> Option<Cow<'a, Value>> {
        if self.wildcard {
            return None;
        }
        self.resolve_all(root).into_iter().next()
    }

    /// Every value this path reaches under `root`, in document order.
    pub fn resolve_all<'a>(&self, root: &'a Value) -> Vec<Cow<'a, Value>> {
        let mut cur = vec![Cow::Borrowed(root)];
        for (i, piece) in self.pieces.iter().enumerate() {
            if i > 0 {
                cur = cur
                    .iter()
                    .filter_map(|v| json_text(v))
                    .map(Cow::Owned)
                    .collect();
            }
            let Some(p) = piece else { continue };
            let mut next = Vec::new();
            for v in cur {
                match v {
                    Cow::Borrowed(b) => {
                        next.extend(p.resolve_wildcard(b).into_iter().map(Cow::Borrowed))
                    }
                    Cow::Owned(o) => next.extend(
                        p.resolve_wildcard(&o)
                            .into_iter()
                            .map(|x| Cow::Owned(x.clone())),
                    ),
                }
            }
            cur = next;
        }
        cur
    }
}

fn piece(segments: &[&str]) -> Result<Option<DotPath>, String> {
    if segments.is_empty() {
        return Ok(None);
    }
    DotPath::parse(&segments.join(".")).map(Some)
}

/// The JSON a string holds, if it holds JSON.
fn json_text(v: &Value) -> Option<Value> {
    let Value::String(s) = v else { return None };
    if text_deeper_than(s.as_bytes(), MAX_BODY_DEPTH) {
        return None;
    }
    serde_json::from_str(s).ok()
}

impl std::fmt::Display for VPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wildcard_reaches_every_element_and_member() {
        let v = json!({"data": {"records": [{"Id": "a"}, {"Id": "b"}, {"x": 1}]}});
        let p = VPath::parse("data.records.*.Id", true).unwrap();
        assert_eq!(
            p.resolve_all(&v),
            vec![Cow::Borrowed(&json!("a")), Cow::Borrowed(&json!("b"))]
        );
        let m = json!({"m": {"k1": 1, "k2": 2}});
        assert_eq!(VPath::parse("m.*", true).unwrap().resolve_all(&m).len(), 2);
        assert!(p.get(&v).is_none(), "a wildcard path has no single value");
    }

    #[test]
    fn keeps_the_rules_of_section_3() {
        let v = json!({"a": [10, 20], "0": "zero", "n": null});
        assert_eq!(
            VPath::parse("a.1", false).unwrap().get(&v).as_deref(),
            Some(&json!(20))
        );
        assert_eq!(VPath::parse("a.01", false).unwrap().get(&v), None);
        assert_eq!(
            VPath::parse("0", false).unwrap().get(&v).as_deref(),
            Some(&json!("zero"))
        );
        assert_eq!(
            VPath::parse("n", false).unwrap().get(&v).as_deref(),
            Some(&Value::Null)
        );
        assert_eq!(VPath::parse("a.1.x", false).unwrap().get(&v), None);
        for bad in ["", "a..b", ".a", "a."] {
            assert!(VPath::parse(bad, true).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn wildcard_only_where_allowed() {
        assert!(VPath::parse("a.*", false)
            .unwrap_err()
            .contains("only in `sources`"));
        assert!(VPath::parse("a.*", true).is_ok());
        // `*x` is an ordinary member name.
        assert!(VPath::parse("a.*x", false).is_ok());
    }

    #[test]
    fn json_step_reads_the_json_an_mcp_text_block_holds() {
        // An MCP CallToolResult whose answer is JSON in a text block (no structured output).
        let r = json!({"content": [
            {"type": "text", "text": "{\"customer\": {\"id\": \"C-7\"}, \"tags\": [\"a\"]}"},
            {"type": "text", "text": "not json"},
            {"type": "image", "data": "…"}
        ]});
        let p = VPath::parse("content.*.text.$json.customer.id", true).unwrap();
        assert_eq!(p.resolve_all(&r), vec![Cow::<Value>::Owned(json!("C-7"))]);
        // Without the step the whole string is the value: an id never equals it.
        let whole = VPath::parse("content.*.text", true).unwrap();
        assert!(!whole.resolve_all(&r).contains(&Cow::Owned(json!("C-7"))));
        // The step at the end gives the parsed value itself; on a single path, `get`.
        let p = VPath::parse("content.0.text.$json", false).unwrap();
        assert_eq!(p.get(&r).unwrap()["tags"], json!(["a"]));
        let p = VPath::parse("content.0.text.$json.tags.0", false).unwrap();
        assert_eq!(p.get(&r).as_deref(), Some(&json!("a")));
        // A text that is not JSON, or a non-string, reaches nothing.
        assert!(VPath::parse("content.1.text.$json", false)
            .unwrap()
            .get(&r)
            .is_none());
        assert!(VPath::parse("content.$json", false)
            .unwrap()
            .get(&r)
            .is_none());
        // The root itself may be a JSON string.
        let s = json!("{\"id\": 3}");
        assert_eq!(
            VPath::parse("$json.id", false).unwrap().get(&s).as_deref(),
            Some(&json!(3))
        );
        // Too deep is not JSON.
        let deep = Value::String(format!("{}{}", "[".repeat(100), "]".repeat(100)));
        assert!(VPath::parse("$json", false).unwrap().get(&deep).is_none());
    }
}
