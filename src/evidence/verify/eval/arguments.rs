//! `arguments.*`: required and forbidden paths, value rules, and `sources` (where a value came from).

use std::borrow::Cow;

use super::*;

/// An earlier origin of a value: its sequence and the values at the source path (owned where
/// a `$json` step parsed them).
type Candidate<'v> = (u64, Vec<Cow<'v, Value>>);

impl<'a> Cx<'a> {
    pub(super) fn arguments(
        &self,
        a: &crate::evidence::verify::model::Arguments,
        out: &mut Vec<CheckResult>,
    ) {
        let all = self.calls_of(self.tool);
        // Input errors are the agent's recoverable mistake (docs/src/concepts/errors.md): only `forbidden`
        // looks at them (a forbidden field sent is sent).
        let scope: Vec<&Call> = all
            .iter()
            .copied()
            .filter(|c| c.result_status != "input_error")
            .collect();
        let none = if all.is_empty() {
            self.no_effective_reason()
        } else {
            format!(
                "every call of {} ended in an input error ({})",
                self.tool,
                labels(&all)
            )
        };
        for p in &a.required {
            let id = format!("arguments.required[{p}]");
            let Ok(path) = VPath::parse(p, false) else {
                out.push(check(id, Inconclusive, "the path is malformed"));
                continue;
            };
            if scope.is_empty() {
                out.push(check(id, Inconclusive, none.clone()));
                continue;
            }
            let missing: Vec<u64> = scope
                .iter()
                .filter(|c| path.get(&c.arguments).is_none())
                .map(|c| c.sequence)
                .collect();
            out.push(if missing.is_empty() {
                check(
                    id,
                    Passed,
                    format!(
                        "{p} is present at sequence {}",
                        seqs(scope.iter().map(|c| c.sequence))
                    ),
                )
            } else {
                check(
                    id,
                    Failed,
                    format!("{p} is absent at sequence {}", seqs(missing)),
                )
            });
        }
        for p in &a.forbidden {
            let id = format!("arguments.forbidden[{p}]");
            let Ok(path) = VPath::parse(p, false) else {
                out.push(check(id, Inconclusive, "the path is malformed"));
                continue;
            };
            if all.is_empty() {
                out.push(check(id, Inconclusive, self.no_effective_reason()));
                continue;
            }
            let present: Vec<u64> = all
                .iter()
                .filter(|c| path.get(&c.arguments).is_some())
                .map(|c| c.sequence)
                .collect();
            out.push(if present.is_empty() {
                check(
                    id,
                    Passed,
                    format!(
                        "{p} is absent at sequence {}",
                        seqs(all.iter().map(|c| c.sequence))
                    ),
                )
            } else {
                check(
                    id,
                    Failed,
                    format!(
                        "{p} is present at sequence {} (value not shown)",
                        seqs(present)
                    ),
                )
            });
        }
        for (arg, src) in &a.sources {
            let id = format!("arguments.sources[{arg}]");
            if scope.is_empty() {
                out.push(check(id, Inconclusive, none.clone()));
                continue;
            }
            let (Ok(apath), Ok(spath)) = (VPath::parse(arg, false), VPath::parse(&src.path, true))
            else {
                out.push(check(id, Inconclusive, "the path is malformed"));
                continue;
            };
            let outcomes = scope
                .iter()
                .map(|c| self.source_of(c, arg, &apath, src, &spath))
                .collect();
            out.push(fold(
                id,
                outcomes,
                format!(
                    "{arg} is absent at sequence {}: no value to trace",
                    seqs(scope.iter().map(|c| c.sequence))
                ),
            ));
        }
        for (arg, rule) in &a.values {
            let id = format!("arguments.values[{arg}]");
            if scope.is_empty() {
                out.push(check(id, Inconclusive, none.clone()));
                continue;
            }
            let Ok(apath) = VPath::parse(arg, false) else {
                out.push(check(id, Inconclusive, "the path is malformed"));
                continue;
            };
            let outcomes = scope
                .iter()
                .map(|c| value_rule(c, arg, &apath, rule))
                .collect();
            out.push(fold(
                id,
                outcomes,
                format!(
                    "{arg} is absent at sequence {}: no value to check",
                    seqs(scope.iter().map(|c| c.sequence))
                ),
            ));
        }
    }

    pub(super) fn source_of(
        &self,
        c: &Call,
        arg: &str,
        apath: &VPath,
        src: &Source,
        spath: &VPath,
    ) -> Per {
        let Some(v) = apath.get(&c.arguments) else {
            return Per::Skip;
        };
        let v: &Value = &v;
        if is_redacted(v) {
            return Per::Inc(format!(
                "{arg} at sequence {} is redacted: its origin cannot be proven",
                c.sequence
            ));
        }
        let shown = format!("{arg} at sequence {} ({})", c.sequence, show(v));
        // (sequence, values at the path) of every earlier candidate origin.
        let (what, candidates): (String, Vec<Candidate>) = match (&src.result_of, &src.event) {
            (Some(t), _) => (
                format!("any earlier effective {t} result"),
                self.effective_of(t)
                    .into_iter()
                    .filter(|o| o.sequence < c.sequence)
                    .map(|o| (o.sequence, spath.resolve_all(&o.result)))
                    .collect(),
            ),
            (None, Some(name)) => {
                let named = self.events_named(name);
                if named.is_empty() {
                    return Per::Inc(format!(
                        "{shown}: no event {name} was recorded to take it from"
                    ));
                }
                (
                    format!("any earlier event {name}"),
                    named
                        .into_iter()
                        .filter(|e| e.sequence < c.sequence)
                        .map(|e| (e.sequence, spath.resolve_all(&e.data)))
                        .collect(),
                )
            }
            (None, None) => return Per::Inc("the source names no origin".into()),
        };
        let mut redacted_at = Vec::new();
        for (seq, values) in &candidates {
            if values.iter().any(|x| !is_redacted(x) && json_equal(x, v)) {
                return Per::Pass(format!("{shown} was found at {} of sequence {seq}", spath));
            }
            if values.iter().any(|x| is_redacted(x)) {
                redacted_at.push(*seq);
            }
        }
        if !redacted_at.is_empty() {
            return Per::Inc(format!(
                "{shown}: the values at {spath} of sequence {} are redacted, so its origin cannot be proven",
                seqs(redacted_at)
            ));
        }
        let looked = if candidates.is_empty() {
            "there was none".to_string()
        } else {
            format!(
                "looked at sequence {}",
                seqs(candidates.iter().map(|(s, _)| *s))
            )
        };
        Per::Fail(format!(
            "{shown} was not found at {spath} of {what} ({looked})"
        ))
    }
}

pub(super) fn value_rule(c: &Call, arg: &str, apath: &VPath, rule: &ValueRule) -> Per {
    let Some(v) = apath.get(&c.arguments) else {
        return Per::Skip;
    };
    let v: &Value = &v;
    if is_redacted(v) {
        return Per::Inc(format!(
            "{arg} at sequence {} is redacted: its value cannot be checked",
            c.sequence
        ));
    }
    let shown = format!("{arg} at sequence {} ({})", c.sequence, show(v));
    let mut fails = Vec::new();
    let mut passes = Vec::new();
    if let Some(p) = &rule.pattern {
        match (regex::Regex::new(p), v.as_str()) {
            (Err(_), _) => return Per::Inc(format!("the pattern {p} does not compile")),
            (Ok(_), None) => fails.push(format!("is not a string, so it cannot match {p}")),
            (Ok(re), Some(s)) if re.is_match(s) => passes.push(format!("matches {p}")),
            (Ok(_), Some(_)) => fails.push(format!("does not match {p}")),
        }
    }
    if let Some(want) = &rule.equals {
        if json_equal(v, want) {
            passes.push(format!("equals {}", show(want)));
        } else {
            fails.push(format!("does not equal {}", show(want)));
        }
    }
    if let Some(list) = &rule.one_of {
        let shown_list = list.iter().map(show).collect::<Vec<_>>().join(", ");
        if list.iter().any(|w| json_equal(v, w)) {
            passes.push(format!("is one of [{shown_list}]"));
        } else {
            fails.push(format!("is not one of [{shown_list}]"));
        }
    }
    if fails.is_empty() {
        Per::Pass(format!("{shown} {}", passes.join(" and ")))
    } else {
        Per::Fail(format!("{shown} {}", fails.join(" and ")))
    }
}
