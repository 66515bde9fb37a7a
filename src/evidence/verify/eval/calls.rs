//! `calls.*` (how many effective calls) and `order` (the trajectory of effective calls, maximum matching).

use super::*;

impl<'a> Cx<'a> {
    pub(super) fn calls_checks(
        &self,
        k: &crate::evidence::verify::model::Calls,
        out: &mut Vec<CheckResult>,
    ) {
        let all = self.calls_of(self.tool);
        let eff: Vec<&Call> = all.iter().copied().filter(|c| c.effective()).collect();
        let not_eff: Vec<&Call> = all.iter().copied().filter(|c| !c.effective()).collect();
        let rest = if not_eff.is_empty() {
            String::new()
        } else {
            format!("; not effective: {}", labels(&not_eff))
        };
        let count = format!(
            "{} of {} ({}){rest}",
            plural(eff.len(), "effective call", "effective calls"),
            self.tool,
            if eff.is_empty() {
                "none".to_string()
            } else {
                labels(&eff)
            }
        );
        if k.exactly_once == Some(true) {
            let id = "calls.exactly_once".to_string();
            out.push(match eff.len() {
                _ if all.is_empty() => check(id, Inconclusive, self.no_effective_reason()),
                1 => check(id, Passed, count.clone()),
                // None, or more than one (the duplicates named; none names nothing).
                _ => check(id, Failed, format!("{count}{}", duplicates(&eff))),
            });
        }
        if let Some(min) = k.min {
            let id = "calls.min".to_string();
            out.push(if all.is_empty() && min > 0 {
                check(id, Inconclusive, self.no_effective_reason())
            } else if eff.len() as u64 >= min {
                check(id, Passed, format!("{count}; at least {min} required"))
            } else {
                check(id, Failed, format!("{count}; at least {min} required"))
            });
        }
        if let Some(max) = k.max {
            let id = "calls.max".to_string();
            out.push(if self.ev.items.is_empty() {
                check(
                    id,
                    Inconclusive,
                    "no call or event was recorded: the agent may not have run",
                )
            } else if eff.len() as u64 <= max {
                check(id, Passed, format!("{count}; at most {max} allowed"))
            } else {
                check(
                    id,
                    Failed,
                    format!("{count}; at most {max} allowed{}", duplicates(&eff)),
                )
            });
        }
    }

    pub(super) fn order(&self, mode: OrderMode, tools: &[String]) -> CheckResult {
        let id = format!("order[{}]", mode.as_str());
        let traj: Vec<&Call> = self
            .calls
            .iter()
            .copied()
            .filter(|c| c.effective())
            .collect();
        if traj.is_empty() {
            return check(id, Inconclusive, "no effective call was recorded");
        }
        // The contract's own tool is listed but was never called at all: the missing call is
        // missing evidence (docs/src/reference/contracts.md), not a wrong order.
        let about_tool = tools.iter().any(|t| match t.strip_suffix("/*") {
            Some(i) => self.tool.split_once('/').is_some_and(|(ti, _)| ti == i),
            None => t == self.tool,
        });
        if about_tool && self.calls_of(self.tool).is_empty() {
            return check(id, Inconclusive, self.no_effective_reason());
        }
        let shown = traj
            .iter()
            .map(|c| format!("{} {}", c.sequence, c.tool()))
            .collect::<Vec<_>>()
            .join(", ");
        let expected = tools.join(", ");
        match mode {
            OrderMode::Exact => {
                let bad = (0..traj.len().max(tools.len())).find(|&i| {
                    !matches!((tools.get(i), traj.get(i)), (Some(t), Some(c)) if entry_matches(t, c))
                });
                match bad {
                    None => check(
                        id,
                        Passed,
                        format!("the effective calls are exactly [{expected}]: {shown}"),
                    ),
                    Some(i) => {
                        let what = match (tools.get(i), traj.get(i)) {
                            (Some(t), Some(c)) => format!(
                                "position {} is sequence {} {} where {t} was expected",
                                i + 1,
                                c.sequence,
                                c.tool()
                            ),
                            (Some(t), None) => {
                                format!("{t} (position {}) was never called effectively", i + 1)
                            }
                            (None, Some(c)) => format!(
                                "sequence {} {} is an extra effective call",
                                c.sequence,
                                c.tool()
                            ),
                            (None, None) => unreachable!("i is below the longer length"),
                        };
                        check(
                            id,
                            Failed,
                            format!(
                                "{what}; effective calls: {shown}; expected exactly [{expected}]"
                            ),
                        )
                    }
                }
            }
            OrderMode::InOrder => {
                // Earliest-match is optimal for a subsequence (each entry takes the first
                // call after the previous entry's).
                let mut at = 0;
                let mut found = Vec::new();
                for t in tools {
                    match traj[at..].iter().position(|c| entry_matches(t, c)) {
                        Some(p) => {
                            found.push(format!("{t} at sequence {}", traj[at + p].sequence));
                            at += p + 1;
                        }
                        None => {
                            let after = found.last().map_or(String::new(), |_| {
                                format!(" after sequence {}", traj[at - 1].sequence)
                            });
                            return check(
                                id,
                                Failed,
                                format!("no effective call of {t}{after}; effective calls: {shown}; expected in order [{expected}]"),
                            );
                        }
                    }
                }
                check(id, Passed, found.join(", "))
            }
            OrderMode::Unordered | OrderMode::Subset | OrderMode::Superset => {
                let owner = max_matching(tools.len(), traj.len(), |l, r| {
                    entry_matches(&tools[l], traj[r])
                });
                let matched = owner.iter().filter(|o| o.is_some()).count();
                let unmatched_calls: Vec<String> = traj
                    .iter()
                    .zip(&owner)
                    .filter(|(_, o)| o.is_none())
                    .map(|(c, _)| format!("sequence {} {}", c.sequence, c.tool()))
                    .collect();
                let mut used = vec![false; tools.len()];
                owner.iter().flatten().for_each(|&l| used[l] = true);
                let unmatched_tools: Vec<&str> = tools
                    .iter()
                    .zip(&used)
                    .filter(|(_, u)| !**u)
                    .map(|(t, _)| t.as_str())
                    .collect();
                let need_calls = mode != OrderMode::Superset;
                let need_tools = mode != OrderMode::Subset;
                let ok = (!need_calls || matched == traj.len())
                    && (!need_tools || matched == tools.len());
                let mut why = Vec::new();
                if need_calls && !unmatched_calls.is_empty() {
                    why.push(format!("not in the list: {}", unmatched_calls.join(", ")));
                }
                if need_tools && !unmatched_tools.is_empty() {
                    why.push(format!(
                        "listed but not called effectively: {}",
                        unmatched_tools.join(", ")
                    ));
                }
                let summary = format!(
                    "a maximum matching pairs {matched} of {} effective calls with {} listed tools; effective calls: {shown}; list [{expected}]",
                    traj.len(),
                    tools.len()
                );
                if ok {
                    check(id, Passed, summary)
                } else {
                    check(id, Failed, format!("{}; {summary}", why.join("; ")))
                }
            }
        }
    }
}

/// `; sequences 3 and 4 share idempotency_key_ref k1` / `; no idempotency key at 3, 4`.
pub(super) fn duplicates(eff: &[&Call]) -> String {
    let mut by_key: std::collections::BTreeMap<&str, Vec<u64>> = Default::default();
    let mut keyless = Vec::new();
    for c in eff {
        match c.idempotency_key_ref.as_deref() {
            Some(k) => by_key.entry(k).or_default().push(c.sequence),
            None => keyless.push(c.sequence),
        }
    }
    let mut s = String::new();
    for (k, v) in by_key.iter().filter(|(_, v)| v.len() > 1) {
        s.push_str(&format!(
            "; sequences {} share idempotency_key_ref {k}: one logical action applied twice",
            seqs(v.iter().copied())
        ));
    }
    if keyless.len() > 1 {
        s.push_str(&format!(
            "; sequences {} carry no idempotency key",
            seqs(keyless)
        ));
    }
    s
}
