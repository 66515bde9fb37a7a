//! `side_effects.*`, `expected.*`, `cleanup.required` and `evidence.*`: what the calls did and what they left.

use super::*;

impl<'a> Cx<'a> {
    pub(super) fn side_effects(
        &self,
        s: &crate::evidence::verify::model::SideEffects,
        out: &mut Vec<CheckResult>,
    ) {
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

    pub(super) fn expected(
        &self,
        e: &crate::evidence::verify::model::Expected,
        out: &mut Vec<CheckResult>,
    ) {
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

    pub(super) fn cleanup(&self) -> CheckResult {
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

    pub(super) fn trace_ids(&self) -> CheckResult {
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

    pub(super) fn correlation(&self) -> CheckResult {
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

/// `expected.result` / `expected.final_state`: the value at `p` under `root` JSON-equals
/// `want`.
pub(super) fn compare(id: String, p: &str, root: Value, want: &Value, what: &str) -> CheckResult {
    let Ok(path) = VPath::parse(p, false) else {
        return check(id, Inconclusive, "the path is malformed");
    };
    match path.get(&root).as_deref() {
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
