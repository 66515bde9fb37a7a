//! Dot paths of tool-call contracts (docs/src/reference/contracts.md uses the rules of docs/src/reference/mock-definition.md, see
//! [`crate::mock::path`]) plus the `*` segment of `sources` paths.
//!
//! The walking is [`crate::mock::path::DotPath`]'s (one walker for every dot path), whose rules —
//! non-empty segments separated by single dots; a canonical decimal integer (`0`, `12`, not
//! `01`) indexes an array; on an object every segment is a member name; a scalar has no
//! members; a present `null` resolves — this type keeps, adding one: a segment that is exactly `*` matches
//! every element of an array or every member of an object. `*` is accepted only where the
//! caller says so (`sources` paths); elsewhere it is rejected when the contract is parsed.

use serde_json::Value;

use crate::mock::path::DotPath;

/// A parsed contract path: a [`DotPath`] (the one walker of docs/src/reference/mock-definition.md paths) and whether it
/// holds a `*` segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VPath {
    path: DotPath,
    wildcard: bool,
}

impl VPath {
    /// Parse `a.b.0.c` (and `a.*.c` when `wildcard` is true). The error says what is wrong.
    pub fn parse(text: &str, wildcard: bool) -> Result<VPath, String> {
        // Same syntax errors, word for word, as the mock definitions' paths.
        let path = DotPath::parse(text)?;
        let has_star = path.keys().any(|k| k == "*");
        if has_star && !wildcard {
            return Err(format!(
                "path `{text}`: `*` is allowed only in `sources` paths"
            ));
        }
        Ok(VPath {
            path,
            wildcard: has_star,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        self.path.as_str()
    }

    /// The member names / indices, `None` for `*`.
    pub fn segments(&self) -> impl Iterator<Item = Option<&str>> {
        self.path.keys().map(|k| (k != "*").then_some(k))
    }

    /// The single value at this path (a path without `*`), if it resolves.
    pub fn get<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        if self.wildcard {
            return None;
        }
        self.path.resolve(root).ok()
    }

    /// Every value this path reaches under `root`, in document order.
    pub fn resolve_all<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        if self.wildcard {
            self.path.resolve_wildcard(root)
        } else {
            self.path.resolve(root).into_iter().collect()
        }
    }
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
        assert_eq!(p.resolve_all(&v), vec![&json!("a"), &json!("b")]);
        let m = json!({"m": {"k1": 1, "k2": 2}});
        assert_eq!(VPath::parse("m.*", true).unwrap().resolve_all(&m).len(), 2);
        assert!(p.get(&v).is_none(), "a wildcard path has no single value");
    }

    #[test]
    fn keeps_the_rules_of_section_3() {
        let v = json!({"a": [10, 20], "0": "zero", "n": null});
        assert_eq!(
            VPath::parse("a.1", false).unwrap().get(&v),
            Some(&json!(20))
        );
        assert_eq!(VPath::parse("a.01", false).unwrap().get(&v), None);
        assert_eq!(
            VPath::parse("0", false).unwrap().get(&v),
            Some(&json!("zero"))
        );
        assert_eq!(
            VPath::parse("n", false).unwrap().get(&v),
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
}
