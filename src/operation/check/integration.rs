//! The cross-file checks of one integration (docs/src/reference/mock-definition.md#checks-and-limits): `initial_state` conflicts, match
//! ties, duplicate operation ids.

use super::Problem;
use crate::contract::CompiledMatch;
use crate::contract::OperationFile;
use crate::contract::ProfileKind;
use crate::mock::eval::json_equal;
use crate::mock::path::pointer_push;
use crate::operation::LoadedOperation;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One operation as the cross-file checks see it: its file, the file as written and, when
/// already compiled (a reload reuses the other files' compiled operations), its `match`.
pub struct CrossItem<'a> {
    pub file: &'a Path,
    pub op: &'a OperationFile,
    pub matcher: Option<&'a CompiledMatch>,
}

/// The cross-file checks of one integration's operations (docs/src/reference/operation-files.md, docs/src/reference/mock-definition.md#state): the same
/// `initial_state` key with two different values, two operations that tie (equal specificity
/// and a request both can match), the same operation id twice.
pub fn check_integration(ops: &[LoadedOperation], profile: ProfileKind) -> Vec<Problem> {
    let items: Vec<CrossItem> = ops
        .iter()
        .map(|l| CrossItem {
            file: &l.file,
            op: &l.op,
            matcher: None,
        })
        .collect();
    check_cross(&items, profile)
}

/// [`check_integration`] over [`CrossItem`]s: a `match` already compiled is not compiled
/// again, so a reload's cross-file checks cost an index walk, not a compile per file.
pub fn check_cross(ops: &[CrossItem], profile: ProfileKind) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut seen_ids: BTreeMap<&str, &Path> = BTreeMap::new();
    for l in ops {
        if let Some(first) = seen_ids.insert(&l.op.operation_id, l.file) {
            seen_ids.insert(&l.op.operation_id, first);
            out.push(Problem::new(
                l.file,
                "operation_id",
                format!(
                    "`{}` is also the operation id of {}: expected one file per operation",
                    l.op.operation_id,
                    first.display()
                ),
            ));
        }
    }
    let inits: Vec<_> = ops
        .iter()
        .filter_map(|l| Some((l.op.mock.as_ref()?.initial_state()?, l.file)))
        .collect();
    let mut state: BTreeMap<&str, (&Value, &Path)> = BTreeMap::new();
    for (init, here) in &inits {
        for (k, v) in init {
            match state.get(k.as_str()) {
                None => {
                    state.insert(k, (v, here));
                }
                Some((first, file)) if !json_equal(first, v) => out.push(Problem::new(
                    here,
                    pointer_push("mock/initial_state", k),
                    format!(
                        "`{k}` is {v} here but {first} in {}: the initial states of one integration are merged, so a key must have one value",
                        file.display()
                    ),
                )),
                Some(_) => {}
            }
        }
    }
    if profile.is_http() {
        let owned: Vec<Option<CompiledMatch>> = ops
            .iter()
            .map(|l| match l.matcher {
                Some(_) => None,
                None => CompiledMatch::compile(l.op.match_spec.as_ref()?).ok(),
            })
            .collect();
        let compiled: Vec<(&CrossItem, &CompiledMatch)> = ops
            .iter()
            .zip(&owned)
            .filter_map(|(l, o)| Some((l, l.matcher.or(o.as_ref())?)))
            .collect();
        let matchers: Vec<&CompiledMatch> = compiled.iter().map(|(_, m)| *m).collect();
        for (i, j) in crate::contract::template::find_ties(&matchers) {
            let (a, (b, mb)) = (compiled[i].0, &compiled[j]);
            let (lit, mixed, cons) = mb.specificity();
            out.push(Problem::new(
                b.file,
                "match",
                format!(
                    "ties with `{}` ({}): a request can match both with equal specificity ({lit} literal path segments, {mixed} with text around a capture, {cons} query/header constraints); expected one of them to be more specific (a literal segment, a query or header constraint)",
                    a.op.operation_id,
                    a.file.display()
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::OperationFile;
    use serde_json::json;

    fn op(v: Value) -> OperationFile {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn cross_file_conflicts_and_ties() {
        let load = |name: &str, path: &str, init: Value| LoadedOperation {
            file: format!("ops/{name}.json").into(),
            op: op(
                json!({"operation_id": name, "match": {"method": "GET", "path": path},
                "mock": {"schema_version": 1, "default_variant": "a", "initial_state": init, "variants": {}}}),
            ),
            contract_hash: String::new(),
        };
        let ops = [
            load("a", "/x/{id}", json!({"k": 1, "same": true})),
            load("b", "/x/*", json!({"k": 2, "same": true})),
            load("c", "/x/literal", json!({"k": 1.0})),
        ];
        let p: Vec<String> = check_integration(&ops, crate::contract::ProfileKind::Rest)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].starts_with("ops/b.json: mock/initial_state/k: `k` is 2 here but 1 in ops/a.json"),
            "{p:?}"
        );
        assert!(
            p[1].starts_with("ops/b.json: match: ties with `a` (ops/a.json)"),
            "{p:?}"
        );
        assert!(check_integration(&ops, crate::contract::ProfileKind::Mcp).len() == 1);
    }
}
