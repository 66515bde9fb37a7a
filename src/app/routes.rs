//! The routing index of an integration's operation files ([`RouteIndex`]), built once per
//! set of operations (at start and by each hot reload) and read by `crate::proxy::route`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::contract::template::{CompiledMatch, RequestView};
use crate::operation::Operation;

/// The path segments of a template with `None` for a wildcard (`*`, `{name}`), as
/// `may_match` (`crate::proxy::route`) reads them.
fn template_literals(m: &CompiledMatch) -> Vec<Option<&str>> {
    m.path()
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| (!s.contains(['*', '{', '}'])).then_some(s))
        .collect()
}

/// An integration's operation files bucketed for routing, built once per set of
/// operations: by method and number of path segments, then by the literal at the segment
/// position that tells most of the bucket apart. [`RouteIndex::candidates`] returns every
/// operation that `may_match` (`crate::proxy::route`) a request, so `route::operation_with` decides exactly as
/// `route::operation` does, without trying each file.
#[derive(Debug, Default)]
pub struct RouteIndex {
    /// Method (upper case) → number of path segments → bucket.
    buckets: HashMap<String, HashMap<usize, Bucket>>,
}

#[derive(Debug, Default)]
struct Bucket {
    /// The segment position whose literal selects among `by_literal`.
    at: Option<usize>,
    /// Literal at `at` → operation indexes, ascending.
    by_literal: HashMap<String, Vec<usize>>,
    /// Operations with a wildcard at `at` (or every one when `at` is `None`), ascending.
    rest: Vec<usize>,
}

impl RouteIndex {
    /// Index `ops` (their positions in the slice are what [`RouteIndex::candidates`]
    /// returns). Operations without a matcher (MCP) are left out.
    pub fn new(ops: &[Arc<Operation>]) -> RouteIndex {
        // (method, number of segments) → (operation index, its template literals).
        type Members<'a> = Vec<(usize, Vec<Option<&'a str>>)>;
        let mut grouped: HashMap<(&str, usize), Members<'_>> = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            let Some(m) = &op.matcher else { continue };
            let lits = template_literals(m);
            grouped
                .entry((m.method(), lits.len()))
                .or_default()
                .push((i, lits));
        }
        let mut buckets: HashMap<String, HashMap<usize, Bucket>> = HashMap::new();
        for ((method, n), members) in grouped {
            // The position with the most distinct literals (the first on a tie).
            let at = (0..n)
                .map(|p| {
                    let mut seen: Vec<&str> = members.iter().filter_map(|(_, l)| l[p]).collect();
                    seen.sort_unstable();
                    seen.dedup();
                    (seen.len(), std::cmp::Reverse(p))
                })
                .max()
                .filter(|(distinct, _)| *distinct > 1)
                .map(|(_, std::cmp::Reverse(p))| p);
            let mut b = Bucket {
                at,
                ..Bucket::default()
            };
            for (i, lits) in members {
                match at.and_then(|p| lits[p]) {
                    Some(lit) => b.by_literal.entry(lit.to_string()).or_default().push(i),
                    None => b.rest.push(i),
                }
            }
            buckets.entry(method.to_string()).or_default().insert(n, b);
        }
        RouteIndex { buckets }
    }

    /// The indexes, ascending, of every operation that may match `view` (a superset of
    /// those `may_match` (`crate::proxy::route`) accepts).
    pub fn candidates(&self, view: &RequestView<'_>) -> Vec<usize> {
        let by_method = if view.method.bytes().any(|b| b.is_ascii_lowercase()) {
            self.buckets.get(&view.method.to_ascii_uppercase())
        } else {
            self.buckets.get(view.method)
        };
        let Some(b) = by_method.and_then(|m| m.get(&view.segments.len())) else {
            return Vec::new();
        };
        let selected =
            b.at.and_then(|p| b.by_literal.get(view.segments[p].as_str()))
                .map(Vec::as_slice)
                .unwrap_or_default();
        // Merge the two ascending lists: files are tried in their order, as without index.
        let (mut out, mut x, mut y) = (Vec::with_capacity(selected.len() + b.rest.len()), 0, 0);
        while x < selected.len() || y < b.rest.len() {
            if y == b.rest.len() || (x < selected.len() && selected[x] < b.rest[y]) {
                out.push(selected[x]);
                x += 1;
            } else {
                out.push(b.rest[y]);
                y += 1;
            }
        }
        out
    }
}
