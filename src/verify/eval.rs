//! The evaluator: one [`ToolCallContract`] over one attempt's [`Evidence`] → a
//! [`ContractResult`] (SPEC 14). Pure: no clock, no I/O; the same evidence always gives the
//! same result.
//!
//! Checks come out in the contract's key order, one per key and bracketed member:
//! `tool[…]`, `preconditions.{required_before,forbidden_before,events_before}[…]`,
//! `arguments.{required,forbidden,sources,values}[…]`, `calls.{exactly_once,min,max}`,
//! `order[<mode>]`, `side_effects.no_upstream_writes`, `side_effects.max_writes[…]`,
//! `side_effects.forbidden[…]`, `expected.{result_status,http_status}`,
//! `expected.{result,final_state,after_success_only}[…]`, `cleanup.required`,
//! `evidence.trace_id_required`, `evidence.correlation`.
//!
//! Inconclusive never passes: a check whose evidence does not exist (the tool never called,
//! a referenced event never recorded, a redacted value, no final state) is `inconclusive`; an
//! evidence gap turns every check inconclusive (keeping what it found on the evidence
//! present), and an unreadable store makes every check inconclusive.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::input::{AgentEvent, Call, Evidence, Item};
use super::model::{OrderMode, Risk, Source, ToolCallContract, ValueRule};
use super::path::VPath;
use crate::mock::path::json_equal;

/// What a redacted value is in exported evidence.
pub const REDACTED: &str = "[redacted]";

/// `passed`, `failed` or `inconclusive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
    Inconclusive,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Inconclusive => "inconclusive",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One check of one contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The contract key path, with the tool or field in brackets.
    pub id: String,
    pub status: Status,
    /// What was looked at, naming sequences.
    pub evidence: String,
}

/// The result of one contract over one attempt, serialized as in SPEC 14.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContractResult {
    pub contract_id: String,
    pub contract_hash: String,
    pub policy_version: Option<String>,
    pub risk: Risk,
    pub status: Status,
    pub checks: Vec<CheckResult>,
}

/// The verdict reasons of SPEC 14: one line per check that did not pass, for every blocking
/// contract that is not `passed`. Advisory contracts contribute nothing.
pub fn verdict_effect(results: &[ContractResult]) -> Vec<String> {
    let mut out = Vec::new();
    for r in results {
        if r.risk != Risk::Blocking || r.status == Status::Passed {
            continue;
        }
        let mut any = false;
        for c in r.checks.iter().filter(|c| c.status != Status::Passed) {
            any = true;
            out.push(format!(
                "contract {}: {} — {}: {} ({})",
                r.contract_id, r.status, c.id, c.evidence, c.status
            ));
        }
        if !any {
            out.push(format!(
                "contract {}: {} — no check ran",
                r.contract_id, r.status
            ));
        }
    }
    out
}

/// Evaluates `contract` (whose pinned hash is `hash`) over `evidence`.
pub fn evaluate(contract: &ToolCallContract, hash: &str, evidence: &Evidence) -> ContractResult {
    let mut items: Vec<&Item> = evidence.items.iter().collect();
    items.sort_by_key(|i| i.sequence());
    let cx = Cx {
        ev: evidence,
        calls: items
            .iter()
            .filter_map(|i| match i {
                Item::Call(c) => Some(c),
                Item::Event(_) => None,
            })
            .collect(),
        events: items
            .iter()
            .filter_map(|i| match i {
                Item::Event(e) => Some(e),
                Item::Call(_) => None,
            })
            .collect(),
        tool: &contract.tool,
    };
    let mut checks = Vec::new();
    cx.run(contract, &mut checks);

    if evidence.unreadable {
        for c in &mut checks {
            c.status = Status::Inconclusive;
            c.evidence = "the evidence store could not be read".into();
        }
    } else if evidence.has_gap {
        for c in &mut checks {
            c.evidence = format!(
                "the evidence has a gap (its sequences are not 1..n), so nothing can be proven; on the events present: {} — {}",
                c.status, c.evidence
            );
            c.status = Status::Inconclusive;
        }
    }
    let status = if checks.is_empty() {
        Status::Inconclusive
    } else if checks.iter().all(|c| c.status == Status::Passed) {
        Status::Passed
    } else if checks.iter().any(|c| c.status == Status::Failed) {
        Status::Failed
    } else {
        Status::Inconclusive
    };
    ContractResult {
        contract_id: contract.id.clone(),
        contract_hash: hash.to_string(),
        policy_version: contract.policy_version.clone(),
        risk: contract.risk,
        status,
        checks,
    }
}

struct Cx<'a> {
    ev: &'a Evidence,
    calls: Vec<&'a Call>,
    events: Vec<&'a AgentEvent>,
    tool: &'a str,
}

fn check(id: String, status: Status, evidence: impl Into<String>) -> CheckResult {
    CheckResult {
        id,
        status,
        evidence: evidence.into(),
    }
}

use Status::{Failed, Inconclusive, Passed};

/// `3, 5, 8` (at most 12, then `… (+n more)`).
fn seqs<I: IntoIterator<Item = u64>>(it: I) -> String {
    let all: Vec<u64> = it.into_iter().collect();
    let mut s = all
        .iter()
        .take(12)
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if all.len() > 12 {
        s.push_str(&format!(" … (+{} more)", all.len() - 12));
    }
    s
}

fn labels(calls: &[&Call]) -> String {
    let mut s = calls
        .iter()
        .take(12)
        .map(|c| c.label())
        .collect::<Vec<_>>()
        .join(", ");
    if calls.len() > 12 {
        s.push_str(&format!(" … (+{} more)", calls.len() - 12));
    }
    s
}

fn is_redacted(v: &Value) -> bool {
    v.as_str() == Some(REDACTED)
}

/// A short JSON rendering of a value that is not redacted.
fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 48 {
        let mut t: String = s.chars().take(47).collect();
        t.push('…');
        t
    } else {
        s
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The outcome of one call under a per-call check.
enum Per {
    Pass(String),
    Fail(String),
    Inc(String),
    Skip,
}

/// Folds per-call outcomes: any failure fails; else any inconclusive; else passes when at
/// least one call was judged.
fn fold(id: String, outcomes: Vec<Per>, none_judged: String) -> CheckResult {
    let (mut p, mut f, mut i) = (Vec::new(), Vec::new(), Vec::new());
    for o in outcomes {
        match o {
            Per::Pass(s) => p.push(s),
            Per::Fail(s) => f.push(s),
            Per::Inc(s) => i.push(s),
            Per::Skip => {}
        }
    }
    if !f.is_empty() {
        check(id, Failed, f.join("; "))
    } else if !i.is_empty() {
        check(id, Inconclusive, i.join("; "))
    } else if p.is_empty() {
        check(id, Inconclusive, none_judged)
    } else {
        check(id, Passed, p.join("; "))
    }
}

/// An `order` entry: `integration/operation_id` or `integration/*`.
fn entry_matches(entry: &str, call: &Call) -> bool {
    match entry.strip_suffix("/*") {
        Some(integration) => call.integration == integration,
        None => call.is(entry),
    }
}

/// Maximum bipartite matching (Kuhn's augmenting paths) between `left` entries and `right`
/// calls; returns, for each right index, the left index matched to it.
pub(crate) fn max_matching(
    left: usize,
    right: usize,
    edge: impl Fn(usize, usize) -> bool,
) -> Vec<Option<usize>> {
    fn augment(
        l: usize,
        right: usize,
        edge: &dyn Fn(usize, usize) -> bool,
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for r in 0..right {
            if edge(l, r) && !seen[r] {
                seen[r] = true;
                if owner[r].is_none_or(|o| augment(o, right, edge, seen, owner)) {
                    owner[r] = Some(l);
                    return true;
                }
            }
        }
        false
    }
    let mut owner = vec![None; right];
    for l in 0..left {
        let mut seen = vec![false; right];
        augment(l, right, &edge, &mut seen, &mut owner);
    }
    owner
}

impl<'a> Cx<'a> {
    fn calls_of(&self, tool: &str) -> Vec<&'a Call> {
        self.calls.iter().copied().filter(|c| c.is(tool)).collect()
    }

    fn effective_of(&self, tool: &str) -> Vec<&'a Call> {
        self.calls
            .iter()
            .copied()
            .filter(|c| c.is(tool) && c.effective())
            .collect()
    }

    fn events_named(&self, name: &str) -> Vec<&'a AgentEvent> {
        self.events
            .iter()
            .copied()
            .filter(|e| e.name == name)
            .collect()
    }

    /// Why there is no first effective call of `tool`.
    fn no_effective_reason(&self) -> String {
        let all = self.calls_of(self.tool);
        if all.is_empty() {
            format!(
                "{} was never called ({} recorded)",
                self.tool,
                plural(self.calls.len(), "call", "calls")
            )
        } else {
            format!("{} has no effective call ({})", self.tool, labels(&all))
        }
    }

    fn run(&self, c: &ToolCallContract, out: &mut Vec<CheckResult>) {
        let forbid_all = c.calls.as_ref().is_some_and(|k| k.max == Some(0));
        if !forbid_all {
            out.push(self.tool_check());
        }
        if let Some(pre) = &c.preconditions {
            self.preconditions(pre, out);
        }
        if let Some(a) = &c.arguments {
            self.arguments(a, out);
        }
        if let Some(k) = &c.calls {
            self.calls_checks(k, out);
        }
        if let Some(o) = &c.order {
            out.push(self.order(o.mode, &o.tools));
        }
        if let Some(s) = &c.side_effects {
            self.side_effects(s, out);
        }
        if let Some(e) = &c.expected {
            self.expected(e, out);
        }
        if c.cleanup.as_ref().is_some_and(|k| k.required) {
            out.push(self.cleanup());
        }
        if let Some(e) = &c.evidence {
            if e.trace_id_required == Some(true) {
                out.push(self.trace_ids());
            }
            if e.correlation.is_some() {
                out.push(self.correlation());
            }
        }
    }

    fn tool_check(&self) -> CheckResult {
        let id = format!("tool[{}]", self.tool);
        let all = self.calls_of(self.tool);
        let eff: Vec<&Call> = all.iter().copied().filter(|c| c.effective()).collect();
        if all.is_empty() {
            check(id, Inconclusive, self.no_effective_reason())
        } else if eff.is_empty() {
            check(
                id,
                Failed,
                format!(
                    "{} was called but never took effect: {}",
                    self.tool,
                    labels(&all)
                ),
            )
        } else {
            check(
                id,
                Passed,
                format!("effective calls of {}: {}", self.tool, labels(&eff)),
            )
        }
    }

    fn preconditions(&self, pre: &super::model::Preconditions, out: &mut Vec<CheckResult>) {
        let first = self.effective_of(self.tool).first().copied();
        for t in &pre.required_before {
            let id = format!("preconditions.required_before[{t}]");
            let Some(first) = first else {
                out.push(check(id, Inconclusive, self.no_effective_reason()));
                continue;
            };
            let before = self
                .effective_of(t)
                .into_iter()
                .find(|c| c.sequence < first.sequence);
            out.push(match before {
                Some(b) => check(
                    id,
                    Passed,
                    format!(
                        "{} precedes the first effective call at sequence {}",
                        b.label(),
                        first.sequence
                    ),
                ),
                None => {
                    let seen = self.calls_of(t);
                    let note = if seen.is_empty() {
                        format!("{t} was never called")
                    } else {
                        format!("calls of {t}: {}", labels(&seen))
                    };
                    check(
                        id,
                        Failed,
                        format!(
                            "{} at sequence {} came before any effective {t} ({note})",
                            self.tool, first.sequence
                        ),
                    )
                }
            });
        }
        for t in &pre.forbidden_before {
            let id = format!("preconditions.forbidden_before[{t}]");
            let Some(first) = first else {
                out.push(check(id, Inconclusive, self.no_effective_reason()));
                continue;
            };
            let before: Vec<&Call> = self
                .effective_of(t)
                .into_iter()
                .filter(|c| c.sequence < first.sequence)
                .collect();
            out.push(if before.is_empty() {
                check(
                    id,
                    Passed,
                    format!(
                        "no effective {t} before the first effective call at sequence {}",
                        first.sequence
                    ),
                )
            } else {
                check(
                    id,
                    Failed,
                    format!(
                        "{t} at {} came before the first effective {} at sequence {}",
                        labels(&before),
                        self.tool,
                        first.sequence
                    ),
                )
            });
        }
        for name in &pre.events_before {
            let id = format!("preconditions.events_before[{name}]");
            let Some(first) = first else {
                out.push(check(id, Inconclusive, self.no_effective_reason()));
                continue;
            };
            let named = self.events_named(name);
            out.push(match named.iter().find(|e| e.sequence < first.sequence) {
                Some(e) => check(
                    id,
                    Passed,
                    format!(
                        "event {name} at sequence {} precedes the first effective call at sequence {}",
                        e.sequence, first.sequence
                    ),
                ),
                None if named.is_empty() => check(
                    id,
                    Inconclusive,
                    format!("no event {name} was recorded"),
                ),
                None => check(
                    id,
                    Failed,
                    format!(
                        "event {name} came only at sequence {}, after the first effective call of {} at sequence {}",
                        seqs(named.iter().map(|e| e.sequence)),
                        self.tool,
                        first.sequence
                    ),
                ),
            });
        }
    }

    fn arguments(&self, a: &super::model::Arguments, out: &mut Vec<CheckResult>) {
        let all = self.calls_of(self.tool);
        // Input errors are the agent's recoverable mistake (SPEC 5.2): only `forbidden`
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

    fn source_of(&self, c: &Call, arg: &str, apath: &VPath, src: &Source, spath: &VPath) -> Per {
        let Some(v) = apath.get(&c.arguments) else {
            return Per::Skip;
        };
        if is_redacted(v) {
            return Per::Inc(format!(
                "{arg} at sequence {} is redacted: its origin cannot be proven",
                c.sequence
            ));
        }
        let shown = format!("{arg} at sequence {} ({})", c.sequence, show(v));
        // (sequence, values at the path) of every earlier candidate origin.
        let (what, candidates): (String, Vec<(u64, Vec<&Value>)>) =
            match (&src.result_of, &src.event) {
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

    fn calls_checks(&self, k: &super::model::Calls, out: &mut Vec<CheckResult>) {
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
                0 => check(id, Failed, count.clone()),
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

    fn order(&self, mode: OrderMode, tools: &[String]) -> CheckResult {
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
        // missing evidence (SPEC 14), not a wrong order.
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

    fn side_effects(&self, s: &super::model::SideEffects, out: &mut Vec<CheckResult>) {
        let empty = self.calls.is_empty();
        let nothing = "no call was recorded: the agent may not have run";
        if s.no_upstream_writes == Some(true) {
            let id = "side_effects.no_upstream_writes".to_string();
            let writes: Vec<&Call> = self.calls.iter().copied().filter(|c| c.is_write).collect();
            let reached: Vec<&Call> = writes
                .iter()
                .copied()
                .filter(|c| c.result_status == "forwarded" || c.source == "upstream")
                .collect();
            out.push(if empty {
                check(id, Inconclusive, nothing)
            } else if reached.is_empty() {
                check(
                    id,
                    Passed,
                    if writes.is_empty() {
                        format!(
                            "no write among {}",
                            plural(self.calls.len(), "call", "calls")
                        )
                    } else {
                        format!("no write reached an upstream (writes: {})", labels(&writes))
                    },
                )
            } else {
                check(
                    id,
                    Failed,
                    format!(
                        "writes reached a real upstream: {}",
                        reached
                            .iter()
                            .map(|c| format!("{} {} (source {})", c.label(), c.tool(), c.source))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            });
        }
        for (integration, max) in &s.max_writes {
            let id = format!("side_effects.max_writes[{integration}]");
            let writes: Vec<&Call> = self
                .calls
                .iter()
                .copied()
                .filter(|c| c.is_write && c.effective() && &c.integration == integration)
                .collect();
            let text = format!(
                "{} to {integration} ({}); at most {max} allowed",
                plural(writes.len(), "effective write", "effective writes"),
                if writes.is_empty() {
                    "none".to_string()
                } else {
                    labels(&writes)
                }
            );
            out.push(if empty {
                check(id, Inconclusive, nothing)
            } else if writes.len() as u64 <= *max {
                check(id, Passed, text)
            } else {
                check(id, Failed, format!("{text}{}", duplicates(&writes)))
            });
        }
        for t in &s.forbidden {
            let id = format!("side_effects.forbidden[{t}]");
            let all = self.calls_of(t);
            let eff: Vec<&Call> = all.iter().copied().filter(|c| c.effective()).collect();
            out.push(if empty {
                check(id, Inconclusive, nothing)
            } else if eff.is_empty() {
                check(
                    id,
                    Passed,
                    if all.is_empty() {
                        format!(
                            "no call of {t} among {}",
                            plural(self.calls.len(), "call", "calls")
                        )
                    } else {
                        format!("no effective call of {t} (held back: {})", labels(&all))
                    },
                )
            } else {
                check(id, Failed, format!("{t} took effect at {}", labels(&eff)))
            });
        }
    }

    fn expected(&self, e: &super::model::Expected, out: &mut Vec<CheckResult>) {
        let all = self.calls_of(self.tool);
        // The last effective call; the last call when none took effect (so `blocked` can be
        // asserted and `ok` fails against it).
        let target = all
            .iter()
            .rev()
            .find(|c| c.effective())
            .or(all.last())
            .copied();
        let which = |c: &Call| {
            if c.effective() {
                format!("the last effective call, {}", c.label())
            } else {
                format!("the last call, {} (none took effect)", c.label())
            }
        };
        if let Some(want) = &e.result_status {
            let id = "expected.result_status".to_string();
            out.push(match target {
                None => check(id, Inconclusive, self.no_effective_reason()),
                Some(c) if &c.result_status == want => {
                    check(id, Passed, format!("{} is {want}", which(c)))
                }
                Some(c) => check(id, Failed, format!("{} is not {want}", which(c))),
            });
        }
        if let Some(want) = &e.http_status {
            let id = "expected.http_status".to_string();
            let list = want
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            out.push(match target {
                None => check(id, Inconclusive, self.no_effective_reason()),
                Some(c) => match c.http_status {
                    None => check(id, Inconclusive, format!("{} has no HTTP status", which(c))),
                    Some(s) if want.contains(&s) => {
                        check(id, Passed, format!("{} answered HTTP {s}", which(c)))
                    }
                    Some(s) => check(
                        id,
                        Failed,
                        format!("{} answered HTTP {s}, expected one of [{list}]", which(c)),
                    ),
                },
            });
        }
        for (p, want) in &e.result {
            let id = format!("expected.result[{p}]");
            let Some(c) = target else {
                out.push(check(id, Inconclusive, self.no_effective_reason()));
                continue;
            };
            out.push(compare(
                id,
                p,
                c.result.clone(),
                want,
                &format!("the result of {}", which(c)),
            ));
        }
        for (p, want) in &e.final_state {
            let id = format!("expected.final_state[{p}]");
            match &self.ev.final_state {
                // The state is the outcome of `tool`: without any call of it, a missing or
                // different value proves nothing about the agent's use of the tool.
                _ if all.is_empty() => {
                    out.push(check(id, Inconclusive, self.no_effective_reason()))
                }
                None => out.push(check(id, Inconclusive, "no final state was recorded")),
                Some(s) => out.push(compare(id, p, s.clone(), want, "the final state")),
            }
        }
        let success = all.iter().copied().find(|c| c.succeeded());
        for name in &e.after_success_only {
            let id = format!("expected.after_success_only[{name}]");
            let named = self.events_named(name);
            if named.is_empty() {
                out.push(check(
                    id,
                    Inconclusive,
                    format!("no event {name} was recorded"),
                ));
                continue;
            }
            let early: Vec<&AgentEvent> = named
                .iter()
                .copied()
                .filter(|ev| success.is_none_or(|s| ev.sequence < s.sequence))
                .collect();
            out.push(if let Some(bad) = early.first() {
                let before: Vec<&Call> = all.iter().copied().filter(|c| c.sequence < bad.sequence).collect();
                let answered = if before.is_empty() {
                    format!("{} had not been called", self.tool)
                } else {
                    format!(
                        "{} answered {}",
                        self.tool,
                        before
                            .iter()
                            .map(|c| match c.http_status {
                                Some(h) => format!("sequence {} ({}, HTTP {h})", c.sequence, c.result_status),
                                None => c.label(),
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                let tail = match success {
                    Some(s) => format!("; the first success came at sequence {}", s.sequence),
                    None => "; no call succeeded".to_string(),
                };
                check(
                    id,
                    Failed,
                    format!(
                        "event {name} at sequence {} came before any successful {} ({answered}{tail})",
                        seqs(early.iter().map(|e| e.sequence)),
                        self.tool
                    ),
                )
            } else {
                let s = success.expect("no early event implies a success");
                check(
                    id,
                    Passed,
                    format!(
                        "event {name} at sequence {} follows the first ok call at sequence {}",
                        seqs(named.iter().map(|e| e.sequence)),
                        s.sequence
                    ),
                )
            });
        }
    }

    fn cleanup(&self) -> CheckResult {
        let id = "cleanup.required".to_string();
        let ev = self.ev;
        if !ev.ended {
            check(
                id,
                Failed,
                "the attempt has not ended, so its cleanup has not run",
            )
        } else if !ev.cleanup_verified {
            check(
                id,
                Failed,
                "the attempt ended but its cleanup was not verified",
            )
        } else {
            match ev.remaining_keys {
                Some(0) => check(
                    id,
                    Passed,
                    "the attempt ended and its cleanup was verified with 0 remaining state keys",
                ),
                Some(n) => check(
                    id,
                    Failed,
                    format!(
                        "the cleanup left {} behind",
                        plural(n as usize, "state key", "state keys")
                    ),
                ),
                None => check(
                    id,
                    Failed,
                    "the cleanup does not say how many state keys remain",
                ),
            }
        }
    }

    fn trace_ids(&self) -> CheckResult {
        let id = "evidence.trace_id_required".to_string();
        let all = self.calls_of(self.tool);
        if all.is_empty() {
            return check(id, Inconclusive, self.no_effective_reason());
        }
        let missing: Vec<u64> = all
            .iter()
            .filter(|c| c.trace_id.as_deref().is_none_or(str::is_empty))
            .map(|c| c.sequence)
            .collect();
        if missing.is_empty() {
            check(
                id,
                Passed,
                format!(
                    "every call of {} carries a trace id: sequence {}",
                    self.tool,
                    seqs(all.iter().map(|c| c.sequence))
                ),
            )
        } else {
            check(
                id,
                Failed,
                format!("no trace id (traceparent) at sequence {}", seqs(missing)),
            )
        }
    }

    fn correlation(&self) -> CheckResult {
        let id = "evidence.correlation".to_string();
        let Some(run) = &self.ev.test_run_id else {
            return check(
                id,
                Inconclusive,
                "the attempt has no test_run_id to correlate with",
            );
        };
        if self.events.is_empty() {
            return check(id, Inconclusive, "no agent-side event was recorded");
        }
        let bad: Vec<String> = self
            .events
            .iter()
            .filter(|e| e.test_run_id.as_ref() != Some(run))
            .map(|e| match &e.test_run_id {
                Some(other) => format!(
                    "event {} at sequence {} carries test_run_id {other}",
                    e.name, e.sequence
                ),
                None => format!(
                    "event {} at sequence {} carries no test_run_id",
                    e.name, e.sequence
                ),
            })
            .collect();
        if bad.is_empty() {
            check(
                id,
                Passed,
                format!(
                    "{} (sequence {}) carry the attempt's test_run_id {run}",
                    plural(self.events.len(), "event", "events"),
                    seqs(self.events.iter().map(|e| e.sequence))
                ),
            )
        } else {
            check(
                id,
                Failed,
                format!("{}; the attempt's test_run_id is {run}", bad.join("; ")),
            )
        }
    }
}

/// `; sequences 3 and 4 share idempotency_key_ref k1` / `; no idempotency key at 3, 4`.
fn duplicates(eff: &[&Call]) -> String {
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

fn value_rule(c: &Call, arg: &str, apath: &VPath, rule: &ValueRule) -> Per {
    let Some(v) = apath.get(&c.arguments) else {
        return Per::Skip;
    };
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

/// `expected.result` / `expected.final_state`: the value at `p` under `root` JSON-equals
/// `want`.
fn compare(id: String, p: &str, root: Value, want: &Value, what: &str) -> CheckResult {
    let Ok(path) = VPath::parse(p, false) else {
        return check(id, Inconclusive, "the path is malformed");
    };
    match path.get(&root) {
        None => check(
            id,
            Failed,
            format!("{what} has no {p} (expected {})", show(want)),
        ),
        Some(v) if is_redacted(v) => check(
            id,
            Inconclusive,
            format!("{p} in {what} is redacted: it cannot be compared"),
        ),
        Some(v) if json_equal(v, want) => {
            check(id, Passed, format!("{p} in {what} is {}", show(v)))
        }
        Some(v) => check(
            id,
            Failed,
            format!("{p} in {what} is {}, expected {}", show(v), show(want)),
        ),
    }
}
