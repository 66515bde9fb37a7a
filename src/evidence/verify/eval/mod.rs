//! The evaluator: one [`ToolCallContract`] over one attempt's [`Evidence`] → a
//! [`ContractResult`] (docs/src/reference/contracts.md). Pure: no clock, no I/O; the same evidence always gives the
//! same result.
//!
//! Checks come out in the contract's key order, one per key and bracketed member:
//! `tool[…]`, `preconditions.{required_before,forbidden_before,events_before}[…]`,
//! `arguments.{required,forbidden,sources,values}[…]`, `calls.{exactly_once,min,max}`,
//! `order[<mode>]`, `side_effects.no_upstream_writes`, `side_effects.max_writes[…]`,
//! `side_effects.forbidden[…]`, `expected.{result_status,http_status}`,
//! `expected.{result,final_state,after_success_only}[…]`, `cleanup.required`,
//! `evidence.trace_id_required`, `evidence.correlation`,
//! `agent_trace.{reported_calls_arrived,arrived_calls_reported,claims_match_results,no_unknown_tools}`.
//!
//! Inconclusive never passes: a check whose evidence does not exist (the tool never called,
//! a referenced event never recorded, a redacted value, no final state) is `inconclusive`; an
//! evidence gap turns every check inconclusive (keeping what it found on the evidence
//! present), and an unreadable store makes every check inconclusive.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::evidence::verify::input::{AgentEvent, Call, Evidence, Item};
use crate::evidence::verify::model::{OrderMode, Risk, Source, ToolCallContract, ValueRule};
use crate::evidence::verify::path::VPath;
use crate::mock::path::json_equal;

mod agent_trace;
#[cfg(test)]
mod agent_trace_tests;
mod arguments;
mod calls;
mod outcome;
mod preconditions;

use calls::duplicates;

/// What a redacted value is in exported evidence.
pub const REDACTED: &str = "[redacted]";

/// `passed`, `failed` or `inconclusive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CheckResult {
    /// The contract key path, with the tool or field in brackets.
    pub id: String,
    pub status: Status,
    /// What was looked at, naming sequences.
    pub evidence: String,
}

/// The result of one contract over one attempt, serialized as in docs/src/reference/contracts.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ContractResult {
    pub contract_id: String,
    pub contract_hash: String,
    pub policy_version: Option<String>,
    pub risk: Risk,
    pub status: Status,
    pub checks: Vec<CheckResult>,
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
        if let Some(t) = &c.agent_trace {
            agent_trace::checks(&self.calls, &self.events, t, out);
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
}

#[cfg(test)]
mod format_tests {
    //! The evidence texts' shortening (mutation testing found the `> 12` / `> 48` bounds
    //! untested): exactly at the bound nothing is cut, one past it is.
    use super::*;

    fn call(sequence: u64) -> Call {
        Call::for_test(sequence, "a", "ok", Some(200))
    }

    #[test]
    fn lists_show_twelve_then_say_how_many_more() {
        assert_eq!(seqs(1..=12), "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12");
        assert_eq!(
            seqs(1..=14),
            "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 … (+2 more)"
        );
        let calls: Vec<Call> = (1..=14).map(call).collect();
        let refs: Vec<&Call> = calls.iter().collect();
        assert!(!labels(&refs[..12]).contains("more"));
        assert!(labels(&refs[..12]).ends_with("sequence 12 (ok)"));
        assert!(labels(&refs).ends_with("sequence 12 (ok) … (+2 more)"));
    }

    #[test]
    fn values_longer_than_48_characters_are_cut() {
        let v48 = Value::String("x".repeat(46)); // 46 + 2 quotes
        assert_eq!(show(&v48), format!("\"{}\"", "x".repeat(46)));
        let v49 = Value::String("x".repeat(47));
        let s = show(&v49);
        assert_eq!(s.chars().count(), 48);
        assert!(s.ends_with('…'));
    }
}
