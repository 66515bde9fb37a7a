//! The docs/src/reference/mock-definition.md#checks-and-limits limits on a drafted mock: at most 100 examples (the first of every variant
//! kept first) and 100 KB — examples beyond one per variant dropped, then class variants,
//! then arrays cut to 10, 3, then 1 element — each drop noted.

use super::ctx::Ctx;
use super::infer::trim_arrays;
use crate::mock::model::{limits, Definition, Example};
use std::collections::BTreeSet;

/// At most [`limits::MAX_EXAMPLES`] examples, the first of every variant first (noted).
pub(super) fn cap_examples(
    examples: &mut Vec<Example>,
    id: &str,
    ctx: &Ctx<'_>,
    notes: &mut Vec<String>,
) {
    // At most 100 examples: the first of every variant first.
    if examples.len() > limits::MAX_EXAMPLES {
        let total = examples.len();
        let mut keep = vec![false; total];
        let mut seen = BTreeSet::new();
        for (i, e) in examples.iter().enumerate() {
            if seen.insert(e.variant.clone()) {
                keep[i] = true;
            }
        }
        let mut kept = keep.iter().filter(|k| **k).count();
        for k in keep.iter_mut() {
            if kept >= limits::MAX_EXAMPLES {
                break;
            }
            if !*k {
                *k = true;
                kept += 1;
            }
        }
        let mut it = keep.into_iter();
        examples.retain(|_| it.next().unwrap_or(false));
        ctx.note(
            notes,
            id,
            format!(
                "{} of {total} examples kept: at most {}",
                examples.len(),
                limits::MAX_EXAMPLES
            ),
        );
    }
}

fn mock_size(def: &Definition) -> usize {
    serde_json::to_string(def).map(|s| s.len()).unwrap_or(0)
}

/// Bring a definition under the 100 KB limit (see the module doc), noting every drop.
pub(super) fn shrink(def: &mut Definition, id: &str, ctx: &Ctx<'_>, notes: &mut Vec<String>) {
    let max = limits::MAX_BYTES;
    if mock_size(def) <= max {
        return;
    }
    let before = def.examples.len();
    let mut seen = BTreeSet::new();
    def.examples.retain(|e| seen.insert(e.variant.clone()));
    if def.examples.len() < before {
        ctx.note(
            notes,
            id,
            format!(
                "over 100 KB: {} examples dropped (one per variant kept)",
                before - def.examples.len()
            ),
        );
    }
    let mut dropped = Vec::new();
    while mock_size(def) > max {
        let Some(name) = def
            .variants
            .keys()
            .rev()
            .find(|n| **n != def.default_variant)
            .cloned()
        else {
            break;
        };
        def.variants.remove(&name);
        def.examples.retain(|e| e.variant != name);
        dropped.push(name);
    }
    if !dropped.is_empty() {
        ctx.note(
            notes,
            id,
            format!("over 100 KB: variants {} dropped", dropped.join(", ")),
        );
    }
    for cap in [10, 3, 1] {
        if mock_size(def) <= max {
            return;
        }
        for v in def.variants.values_mut() {
            trim_arrays(&mut v.result, cap);
            for r in &mut v.rules {
                if let Some(res) = &mut r.result {
                    trim_arrays(res, cap);
                }
            }
        }
        for e in &mut def.examples {
            trim_arrays(&mut e.expected, cap);
        }
        ctx.note(
            notes,
            id,
            format!("over 100 KB: arrays in answers cut to {cap} item(s)"),
        );
    }
    let size = mock_size(def);
    if size > max {
        ctx.note(
            notes,
            id,
            format!("still {size} bytes after shrinking (limit {max}): `check` will refuse it; record fewer or smaller calls for this operation, or edit the draft"),
        );
    }
}
