//! `agent_trace.*`: the agent's own account of its run (its OpenTelemetry spans, recorded as
//! the agent-side events `otel.tool_call`, `otel.model_turn` and `otel.final_message`; see
//! docs/src/guides/traces.md) against the calls that reached understudy.
//!
//! - The agent's tool calls are taken in the agent's order (`data.start_unix_nano`, then
//!   sequence); the calls in sequence order, leaving out `replayed` repeats (an idempotent
//!   retry the agent's framework may not report). Tools in `local_tools` are left out of both.
//! - A reported call and an arrived call **match** when the reported tool resolves to the
//!   call's `integration/operation_id` (`data.resolves_to`, set when the span was taken) and
//!   every member of the reported arguments is found, JSON-equal, among the call's arguments
//!   (at the top, or one level down: `path`, `query`, `body`…; a number equals its decimal
//!   string; a redacted value on either side compares equal). Reported arguments that are
//!   absent or not an object match by name. The pairing is one order-preserving maximum
//!   matching (a longest common subsequence), so order counts.
//! - `reported_calls_arrived`: every reported call of a project tool is matched.
//! - `arrived_calls_reported`: every arrived call is matched.
//! - `claims_match_results`: no reported call whose span says success (`status: ok`) is
//!   paired with a call that did not succeed (an `input_error`, `blocked`, a fault, an HTTP
//!   status ≥ 400) or is paired with none; and the last final message, when it states success
//!   (`success_claims`), does not follow a write that did not succeed (and was not later
//!   retried with success), a reported call that never arrived, or an attempt where no write
//!   succeeded.
//! - `no_unknown_tools`: every reported tool resolves to a tool of the project.
//!
//! With no `otel.*` event at all, every check is inconclusive (the agent's account is
//! missing, so nothing can be compared).

use serde_json::Value;

use super::{check, plural, seqs, show, CheckResult, Failed, Inconclusive, Passed};
use crate::evidence::verify::input::{AgentEvent, Call};
use crate::evidence::verify::model::AgentTrace;
use crate::mock::path::json_equal;

/// The default `success_claims` (case-insensitive).
pub const DEFAULT_SUCCESS_CLAIMS: &[&str] = &[
    r"\bbooked\b",
    r"\bconfirmed\b",
    r"\bscheduled\b",
    r"\bcreated\b",
    r"\bupdated\b",
    r"\bcancel+ed\b",
    r"\bsent\b",
    r"\brefunded\b",
    r"\bsuccess(ful(ly)?)?\b",
    r"\ball set\b",
];

/// Most items on either side the matching pairs (beyond: inconclusive).
const MAX_MATCH: usize = 4000;

/// One tool call as the agent reported it.
struct Reported<'a> {
    ev: &'a AgentEvent,
    tool: String,
    resolves_to: Option<String>,
    arguments: Option<&'a Value>,
    ok: bool,
    start: u64,
}

impl Reported<'_> {
    fn label(&self) -> String {
        format!(
            "agent span at sequence {} ({} {})",
            self.ev.sequence,
            self.tool,
            if self.ok { "ok" } else { "error" }
        )
    }
}

fn reported<'a>(events: &[&'a AgentEvent], local: &[String]) -> Vec<Reported<'a>> {
    let mut v: Vec<Reported<'a>> = events
        .iter()
        .filter(|e| e.name == "otel.tool_call")
        .map(|e| {
            let d = &e.data;
            let s = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
            Reported {
                ev: e,
                tool: s("tool").unwrap_or_default(),
                resolves_to: s("resolves_to"),
                arguments: d.get("arguments"),
                ok: s("status").as_deref() != Some("error"),
                start: d
                    .get("start_unix_nano")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            }
        })
        .filter(|r| {
            !local
                .iter()
                .any(|l| *l == r.tool || r.resolves_to.as_deref() == Some(l))
        })
        .collect();
    v.sort_by_key(|r| (r.start, r.ev.sequence));
    v
}

fn is_redacted(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s == super::REDACTED || crate::util::scrub::is_mark(s))
}

fn value_eq(a: &Value, b: &Value) -> bool {
    if is_redacted(a) || is_redacted(b) || json_equal(a, b) {
        return true;
    }
    match (a, b) {
        (Value::String(s), Value::Number(_) | Value::Bool(_))
        | (Value::Number(_) | Value::Bool(_), Value::String(s)) => {
            let other = if a.is_string() { b } else { a };
            s.as_str() == other.to_string().as_str()
        }
        _ => false,
    }
}

/// Every member of the reported arguments is among the call's (module doc).
fn arguments_match(reported: Option<&Value>, arrived: &Value) -> bool {
    let Some(Value::Object(r)) = reported else {
        return true;
    };
    r.iter().all(|(k, v)| {
        let top = arrived.get(k).is_some_and(|a| value_eq(v, a));
        top || arrived.as_object().is_some_and(|m| {
            m.values()
                .filter_map(Value::as_object)
                .any(|inner| inner.get(k).is_some_and(|a| value_eq(v, a)))
        })
    })
}

fn pairs(r: &Reported<'_>, c: &Call) -> bool {
    c.operation_id.is_some()
        && r.resolves_to.as_deref() == Some(c.tool().as_str())
        && arguments_match(r.arguments, &c.arguments)
}

/// The longest order-preserving matching: for each reported index, its call index.
fn lcs(rep: &[Reported<'_>], arr: &[&Call]) -> Vec<Option<usize>> {
    let (n, m) = (rep.len(), arr.len());
    let mut dp = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            dp[i][j] = if pairs(&rep[i], arr[j]) {
                dp[i + 1][j + 1] + 1
            } else {
                dp[i + 1][j].max(dp[i][j + 1])
            };
        }
    }
    let mut out = vec![None; n];
    let (mut i, mut j) = (0, 0);
    // A pair that matches is part of some longest matching of what is left (a longest one
    // that pairs either side elsewhere, or not at all, can swap that pair for this one), so it
    // is taken.
    while i < n && j < m {
        if pairs(&rep[i], arr[j]) {
            out[i] = Some(j);
            i += 1;
            j += 1;
        } else if dp[i + 1][j] >= dp[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

fn list(items: Vec<String>) -> String {
    let n = items.len();
    let mut s = items.into_iter().take(12).collect::<Vec<_>>().join("; ");
    if n > 12 {
        s.push_str(&format!(" … (+{} more)", n - 12));
    }
    s
}

/// The `agent_trace.*` checks the contract turns on, appended to `out`.
pub(super) fn checks(
    calls: &[&Call],
    events: &[&AgentEvent],
    cfg: &AgentTrace,
    out: &mut Vec<CheckResult>,
) {
    let on = [
        ("reported_calls_arrived", cfg.reported_calls_arrived),
        ("arrived_calls_reported", cfg.arrived_calls_reported),
        ("claims_match_results", cfg.claims_match_results),
        ("no_unknown_tools", cfg.no_unknown_tools),
    ];
    let id = |k: &str| format!("agent_trace.{k}");
    let otel: Vec<&AgentEvent> = events
        .iter()
        .copied()
        .filter(|e| e.name.starts_with("otel."))
        .collect();
    if otel.is_empty() {
        for (k, _) in on.iter().filter(|(_, b)| *b) {
            out.push(check(
                id(k),
                Inconclusive,
                "no span of the agent was recorded for this attempt, so its account cannot be compared with the calls (export the agent's OpenTelemetry spans to /_understudy/api/otlp/v1/traces)",
            ));
        }
        return;
    }
    let rep = reported(&otel, &cfg.local_tools);
    let arr: Vec<&Call> = calls
        .iter()
        .copied()
        .filter(|c| c.result_status != "replayed")
        .filter(|c| !cfg.local_tools.iter().any(|l| c.is(l)))
        .collect();
    if rep.len() > MAX_MATCH || arr.len() > MAX_MATCH {
        for (k, _) in on.iter().filter(|(_, b)| *b) {
            out.push(check(
                id(k),
                Inconclusive,
                format!(
                    "{} and {} are more than the {MAX_MATCH} this check pairs",
                    plural(rep.len(), "reported call", "reported calls"),
                    plural(arr.len(), "call", "calls")
                ),
            ));
        }
        return;
    }
    let matched = lcs(&rep, &arr);
    let mut arrived_used = vec![false; arr.len()];
    for j in matched.iter().flatten() {
        arrived_used[*j] = true;
    }
    if cfg.reported_calls_arrived {
        let known: Vec<usize> = (0..rep.len())
            .filter(|i| rep[*i].resolves_to.is_some())
            .collect();
        let missing: Vec<String> = known
            .iter()
            .filter(|i| matched[**i].is_none())
            .map(|i| {
                let r = &rep[*i];
                match r.arguments {
                    Some(a) => format!("{} with arguments {} never arrived", r.label(), show(a)),
                    None => format!("{} never arrived", r.label()),
                }
            })
            .collect();
        out.push(if !missing.is_empty() {
            check(id("reported_calls_arrived"), Failed, list(missing))
        } else if known.is_empty() {
            check(
                id("reported_calls_arrived"),
                Passed,
                format!(
                    "the agent's spans ({}) report no call to a tool of the project",
                    plural(otel.len(), "event", "events")
                ),
            )
        } else {
            check(
                id("reported_calls_arrived"),
                Passed,
                format!(
                    "every reported call arrived, in order: sequences {}",
                    seqs(
                        known
                            .iter()
                            .filter_map(|i| matched[*i])
                            .map(|j| arr[j].sequence)
                    )
                ),
            )
        });
    }
    if cfg.arrived_calls_reported {
        let unreported: Vec<&Call> = (0..arr.len())
            .filter(|j| !arrived_used[*j])
            .map(|j| arr[j])
            .collect();
        out.push(if unreported.is_empty() {
            check(
                id("arrived_calls_reported"),
                Passed,
                if arr.is_empty() {
                    "no call arrived, and the agent reported none".to_string()
                } else {
                    format!(
                        "every call is in the agent's spans: sequences {}",
                        seqs(arr.iter().map(|c| c.sequence))
                    )
                },
            )
        } else {
            check(
                id("arrived_calls_reported"),
                Failed,
                list(
                    unreported
                        .iter()
                        .map(|c| format!("{} {} is in no span of the agent", c.label(), c.tool()))
                        .collect(),
                ),
            )
        });
    }
    if cfg.claims_match_results {
        out.push(claims(&rep, &arr, &matched, &otel, cfg));
    }
    if cfg.no_unknown_tools {
        let unknown: Vec<String> = rep
            .iter()
            .filter(|r| r.resolves_to.is_none())
            .map(|r| format!("{}: `{}` is no tool of the project", r.label(), r.tool))
            .collect();
        out.push(if unknown.is_empty() {
            check(
                id("no_unknown_tools"),
                Passed,
                format!(
                    "every tool the agent's spans name is a tool of the project ({})",
                    plural(rep.len(), "reported call", "reported calls")
                ),
            )
        } else {
            check(id("no_unknown_tools"), Failed, list(unknown))
        });
    }
}

fn claims(
    rep: &[Reported<'_>],
    arr: &[&Call],
    matched: &[Option<usize>],
    otel: &[&AgentEvent],
    cfg: &AgentTrace,
) -> CheckResult {
    let id = "agent_trace.claims_match_results".to_string();
    let mut wrong = Vec::new();
    for (i, r) in rep.iter().enumerate() {
        if !r.ok || r.resolves_to.is_none() {
            continue;
        }
        match matched[i] {
            Some(j) if !arr[j].succeeded() => wrong.push(format!(
                "{} reports success, but the call {} {} did not succeed",
                r.label(),
                arr[j].label(),
                arr[j].tool()
            )),
            None => wrong.push(format!(
                "{} reports success of a call that never arrived",
                r.label()
            )),
            _ => {}
        }
    }
    let patterns: Vec<regex::Regex> = if cfg.success_claims.is_empty() {
        DEFAULT_SUCCESS_CLAIMS
            .iter()
            .filter_map(|p| regex::Regex::new(&format!("(?i){p}")).ok())
            .collect()
    } else {
        cfg.success_claims
            .iter()
            .filter_map(|p| regex::Regex::new(&format!("(?i){p}")).ok())
            .collect()
    };
    let final_msg = otel
        .iter()
        .filter(|e| e.name == "otel.final_message")
        .max_by_key(|e| {
            (
                e.data
                    .get("start_unix_nano")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                e.sequence,
            )
        });
    let mut final_note = "no final message in the agent's spans".to_string();
    if let Some(f) = final_msg {
        let text = f.text.as_deref().unwrap_or("");
        let claim = patterns
            .iter()
            .find_map(|p| p.find(text))
            .map(|m| m.as_str());
        match claim {
            None => {
                final_note = format!(
                    "the final message (sequence {}) states no success",
                    f.sequence
                )
            }
            Some(word) => {
                let mut why = Vec::new();
                for (k, c) in arr.iter().enumerate() {
                    let retried = arr[k + 1..]
                        .iter()
                        .any(|l| l.tool() == c.tool() && l.succeeded());
                    if c.is_write && !c.succeeded() && !retried {
                        why.push(format!("{} {}", c.label(), c.tool()));
                    }
                }
                for (i, r) in rep.iter().enumerate() {
                    if r.resolves_to.is_some() && matched[i].is_none() {
                        why.push(format!("{} (never arrived)", r.label()));
                    }
                }
                let any_write_ok = arr.iter().any(|c| c.is_write && c.succeeded());
                if !why.is_empty() {
                    wrong.push(format!(
                        "the final message (sequence {}) says \"{word}\" after {}",
                        f.sequence,
                        why.join(", ")
                    ));
                } else if !any_write_ok {
                    wrong.push(format!(
                        "the final message (sequence {}) says \"{word}\" but no write succeeded ({} recorded)",
                        f.sequence,
                        plural(arr.len(), "call", "calls")
                    ));
                } else {
                    final_note = format!(
                        "the final message (sequence {}) says \"{word}\" and every write succeeded",
                        f.sequence
                    );
                }
            }
        }
    }
    if wrong.is_empty() {
        check(
            id,
            Passed,
            format!(
                "{} agree with the calls' results; {final_note}",
                plural(rep.len(), "reported call", "reported calls")
            ),
        )
    } else {
        check(id, Failed, list(wrong))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_names_twelve_items_and_counts_the_rest() {
        let items = |n: usize| (1..=n).map(|i| format!("i{i}")).collect::<Vec<_>>();
        assert_eq!(list(items(2)), "i1; i2");
        let twelve = list(items(12));
        assert!(
            twelve.ends_with("i11; i12") && !twelve.contains("more"),
            "{twelve}"
        );
        let thirteen = list(items(13));
        assert!(
            thirteen.ends_with("i12 … (+1 more)") && !thirteen.contains("i13"),
            "{thirteen}"
        );
    }

    /// The longest common subsequence's length by its definition (exponential: small inputs
    /// only), written apart from `lcs`'s table.
    fn best(rep: &[&str], arr: &[&str]) -> usize {
        match (rep.split_first(), arr.split_first()) {
            (Some((r, rs)), Some((a, ars))) => {
                let skip = best(rs, arr).max(best(rep, ars));
                if r == a {
                    skip.max(1 + best(rs, ars))
                } else {
                    skip
                }
            }
            _ => 0,
        }
    }

    /// For every pair of short tool sequences (a seeded generator), `lcs` pairs only calls
    /// that match, in order, each call at most once, and as many as the longest common
    /// subsequence has.
    #[test]
    fn lcs_is_a_maximum_order_preserving_matching() {
        const TOOLS: [&str; 3] = ["a", "b", "c"];
        let ev = AgentEvent {
            sequence: 1,
            name: "otel.tool_call".into(),
            kind: "checkpoint".into(),
            test_run_id: None,
            text: None,
            data: Value::Null,
        };
        let mut seed: u64 = 0x5eed;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..2000 {
            let rep: Vec<&str> = (0..next(7)).map(|_| TOOLS[next(3) as usize]).collect();
            let arr: Vec<&str> = (0..next(7)).map(|_| TOOLS[next(3) as usize]).collect();
            let reported: Vec<Reported<'_>> = rep
                .iter()
                .map(|t| Reported {
                    ev: &ev,
                    tool: t.to_string(),
                    resolves_to: Some(format!("crm/{t}")),
                    arguments: None,
                    ok: true,
                    start: 0,
                })
                .collect();
            let calls: Vec<Call> = arr
                .iter()
                .enumerate()
                .map(|(i, t)| Call::for_test(i as u64 + 1, t, "ok", Some(200)))
                .collect();
            let call_refs: Vec<&Call> = calls.iter().collect();
            let out = lcs(&reported, &call_refs);
            assert_eq!(out.len(), rep.len());
            let pairs_made: Vec<(usize, usize)> = out
                .iter()
                .enumerate()
                .filter_map(|(i, j)| j.map(|j| (i, j)))
                .collect();
            for w in pairs_made.windows(2) {
                assert!(w[0].1 < w[1].1, "{rep:?} {arr:?}: not in order {out:?}");
            }
            for (i, j) in &pairs_made {
                assert_eq!(rep[*i], arr[*j], "{rep:?} {arr:?}: {out:?}");
            }
            assert_eq!(
                pairs_made.len(),
                best(&rep, &arr),
                "{rep:?} {arr:?}: {out:?}"
            );
        }
    }
}
