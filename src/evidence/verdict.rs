//! The one verdict: every rule that can fail an attempt, each with a stable code ([`Rule`]),
//! and the one function that judges an attempt ([`Judge`], a fold over its timeline with
//! bounded state, so the evidence can be streamed through it). Every reader — the evidence
//! route, `understudy evidence|verify|report|test`, JUnit, HTML, the UI list and the pytest
//! plugin — shows the [`Verdict`] computed here and never recomputes it or reads the text of
//! a reason: a reason's `code` is what tools match on.
//!
//! The verdict reads no clock: the same evidence always gives the same verdict. It is `fail`
//! when any rule below holds (one [`Reason`] per finding, in timeline order, then the
//! attempt's own marks, then contracts), else `pass`. The table is `docs/src/reference/verdict.md`.
//!
//! | code | fails when |
//! |---|---|
//! | `harness_error` | a call has `result_status: "harness_error"` (other than the codes below) |
//! | `store_failure` | a call was answered 500 `store_error` (the attempt's durable `store_failures` counter, or a recorded withdrawal) |
//! | `lease_expired` | a call arrived after the lease expired (recorded as such, or stamped after `expires_at`) |
//! | `attempt_ended` | a call arrived with the token of the attempt after it ended (answered 410), or is stamped after `ended_at` |
//! | `duplicate_side_effect` | two writes under one `idempotency_key_ref` both took effect |
//! | `missing_evidence` | the sequences of calls and agent-side events are not exactly 1..n |
//! | `unknown_status` | a `result_status` outside the known list |
//! | `interrupted` | the process serving the attempt died before its evidence was durable |
//! | `no_calls` | no tool call and no agent-side event (unless created with `expect_calls: false`) |
//! | `outside_attempt` | during the run of an exclusive attempt, a call reached the server without its token |
//! | `cleanup_not_verified` | the cleanup recorded at the end left state behind, or is missing its fields |
//! | `contract:<id>:<check>` | a check of a blocking contract did not pass |
//!
//! Input errors alone never fail the attempt.
//!
//! **Retention** (the default attempt only, docs/src/reference/evidence-envelope.md#retention):
//! the entries that rolled out of the store were judged by this same fold before they went
//! ([`Judge::roll_over`]); their findings, counted per code in the record's `rolled_over`,
//! come back as one reason per code, first, so a failure never leaves the verdict.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::verify::{ContractResult, Risk, Status};
use crate::records::{
    AgentEvent, AttemptRecord, ResultStatus, RolledFinding, RolledOver, ToolEvent,
};

/// A rule of the verdict: its stable code is what a report or a tool matches on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    HarnessError,
    StoreFailure,
    LeaseExpired,
    AttemptEnded,
    DuplicateSideEffect,
    MissingEvidence,
    UnknownStatus,
    Interrupted,
    NoCalls,
    OutsideAttempt,
    CleanupNotVerified,
    /// A check (`check`) of the blocking contract `id` did not pass.
    Contract {
        id: String,
        check: String,
    },
}

impl Rule {
    /// Every rule of the attempt itself (not contracts), in the order of the module doc:
    /// the JUnit report has one test case per rule.
    pub const ATTEMPT_RULES: [Rule; 11] = [
        Rule::HarnessError,
        Rule::StoreFailure,
        Rule::LeaseExpired,
        Rule::AttemptEnded,
        Rule::DuplicateSideEffect,
        Rule::MissingEvidence,
        Rule::UnknownStatus,
        Rule::Interrupted,
        Rule::NoCalls,
        Rule::OutsideAttempt,
        Rule::CleanupNotVerified,
    ];

    /// The stable code.
    pub fn code(&self) -> String {
        match self {
            Rule::Contract { id, check } => format!("contract:{id}:{check}"),
            other => other.fixed_code().to_string(),
        }
    }

    fn fixed_code(&self) -> &'static str {
        match self {
            Rule::HarnessError => "harness_error",
            Rule::StoreFailure => "store_failure",
            Rule::LeaseExpired => "lease_expired",
            Rule::AttemptEnded => "attempt_ended",
            Rule::DuplicateSideEffect => "duplicate_side_effect",
            Rule::MissingEvidence => "missing_evidence",
            Rule::UnknownStatus => "unknown_status",
            Rule::Interrupted => "interrupted",
            Rule::NoCalls => "no_calls",
            Rule::OutsideAttempt => "outside_attempt",
            Rule::CleanupNotVerified => "cleanup_not_verified",
            Rule::Contract { .. } => "contract",
        }
    }

    /// What passing the rule means, for people (the JUnit test case's title).
    pub fn title(&self) -> &'static str {
        match self {
            Rule::HarnessError => "no call was a harness error",
            Rule::StoreFailure => "every call's evidence was recorded (no store_error)",
            Rule::LeaseExpired => "no call arrived after the lease expired",
            Rule::AttemptEnded => "no call arrived after the attempt ended",
            Rule::DuplicateSideEffect => "no write took effect twice under one idempotency key",
            Rule::MissingEvidence => "sequences are 1..n without gaps or repeats",
            Rule::UnknownStatus => "every result_status is a known one",
            Rule::Interrupted => "the serving process did not die before the evidence was durable",
            Rule::NoCalls => "the agent made at least one tool call or agent-side event",
            Rule::OutsideAttempt => "no call of the run missed the attempt",
            Rule::CleanupNotVerified => "cleanup verified with 0 remaining state keys",
            Rule::Contract { .. } => "every check of the blocking contract passed",
        }
    }
}

/// One reason the verdict is `fail`: `{"code","message","sequence"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Reason {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
}

impl Reason {
    pub fn new(rule: &Rule, message: impl Into<String>) -> Reason {
        Reason {
            code: rule.code(),
            message: message.into(),
            sequence: None,
        }
    }

    pub fn at(rule: &Rule, sequence: u64, message: impl Into<String>) -> Reason {
        Reason {
            sequence: Some(sequence),
            ..Reason::new(rule, message)
        }
    }

    /// Whether this reason belongs to `rule` (a contract rule matches any contract reason).
    pub fn is(&self, rule: &Rule) -> bool {
        match rule {
            Rule::Contract { .. } => self.code.starts_with("contract:"),
            r => self.code == r.fixed_code(),
        }
    }
}

/// `pass` or `fail`, with every reason.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub reasons: Vec<Reason>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.reasons.is_empty()
    }

    /// `"pass"` or `"fail"`.
    pub fn word(&self) -> &'static str {
        if self.passed() {
            "pass"
        } else {
            "fail"
        }
    }

    /// The verdict as every reader finds it in an envelope (or an answer): its `verdict` and
    /// `verdict_reasons` members. `Err` says why the value is not a verdict of understudy:
    /// no `verdict` member, a word other than `pass`/`fail`, or a `fail` without reasons.
    /// Reasons written as plain strings (envelopes of earlier versions) are read with the
    /// code `unknown`.
    pub fn from_envelope(env: &Value) -> Result<Verdict, String> {
        let word = match env.get("verdict") {
            Some(Value::String(w)) => w.as_str(),
            Some(other) => {
                return Err(format!(
                    "`verdict` is {other}, expected \"pass\" or \"fail\""
                ))
            }
            None => return Err(
                "the answer has no `verdict` member: it is not an evidence envelope of understudy"
                    .to_string(),
            ),
        };
        let reasons: Vec<Reason> = match env.get("verdict_reasons") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|r| match r {
                    Value::String(s) => Reason {
                        code: "unknown".into(),
                        message: s.clone(),
                        sequence: None,
                    },
                    other => serde_json::from_value(other.clone()).unwrap_or_else(|_| Reason {
                        code: "unknown".into(),
                        message: other.to_string(),
                        sequence: None,
                    }),
                })
                .collect(),
            Some(other) => return Err(format!("`verdict_reasons` is {other}, expected an array")),
        };
        match (word, reasons.is_empty()) {
            ("pass", true) => Ok(Verdict { reasons }),
            ("pass", false) => Err("the verdict is `pass` but it lists reasons to fail".into()),
            ("fail", false) => Ok(Verdict { reasons }),
            ("fail", true) => Ok(Verdict {
                reasons: vec![Reason {
                    code: "unknown".into(),
                    message: "the verdict is fail (the envelope gives no reason)".into(),
                    sequence: None,
                }],
            }),
            (w, _) => Err(format!(
                "`verdict` is \"{w}\", expected \"pass\" or \"fail\""
            )),
        }
    }
}

/// How many reasons of one code the timeline contributes; past it, one more reason of that
/// code counts the rest ("… and N more"), so a history of a million failed calls is judged in
/// bounded memory and its envelope stays readable. The verdict is the same either way.
pub const MAX_REASONS_PER_CODE: u64 = 100;

/// The fold that judges one attempt: feed its calls and agent-side events **in sequence
/// order** ([`Judge::call`], [`Judge::event`]), optionally [`Judge::expect_last`], then
/// [`Judge::finish`]. State is bounded by the number of distinct idempotency keys of applied
/// writes and [`MAX_REASONS_PER_CODE`], never by the number of calls.
#[derive(Debug)]
pub struct Judge<'a> {
    attempt: &'a AttemptRecord,
    expires: Option<Result<chrono::DateTime<chrono::FixedOffset>, ()>>,
    ended: Option<chrono::DateTime<chrono::FixedOffset>>,
    reasons: Vec<Reason>,
    /// The next sequence expected (1..n without gaps or repeats).
    next: u64,
    gap_reported: bool,
    calls: u64,
    events: u64,
    applied: HashMap<String, u64>,
    /// Timeline reasons per code, and those past [`MAX_REASONS_PER_CODE`] (counted only).
    per_code: HashMap<String, u64>,
    over: std::collections::BTreeMap<String, u64>,
}

impl<'a> Judge<'a> {
    pub fn new(attempt: &'a AttemptRecord) -> Judge<'a> {
        let expires = attempt
            .expires_at
            .as_deref()
            .map(|e| parse_time(e).ok_or(()));
        let mut reasons = Vec::new();
        if let Some(Err(())) = expires {
            reasons.push(Reason::new(
                &Rule::LeaseExpired,
                format!(
                    "lease check inconclusive: expires_at `{}` is not an RFC 3339 time",
                    attempt.expires_at.as_deref().unwrap_or("")
                ),
            ));
        }
        Judge {
            attempt,
            expires,
            ended: attempt.ended_at.as_deref().and_then(parse_time),
            reasons,
            // Entries up to `rolled_through` rolled out: the timeline continues after them.
            next: attempt.rolled_through() + 1,
            gap_reported: false,
            calls: 0,
            events: 0,
            applied: HashMap::new(),
            per_code: HashMap::new(),
            over: std::collections::BTreeMap::new(),
        }
    }

    /// A reason found in the timeline, kept unless its code already has
    /// [`MAX_REASONS_PER_CODE`] (then only counted).
    fn push(&mut self, r: Reason) {
        let n = self.per_code.entry(r.code.clone()).or_insert(0);
        *n += 1;
        if *n > MAX_REASONS_PER_CODE {
            *self.over.entry(r.code).or_insert(0) += 1;
        } else {
            self.reasons.push(r);
        }
    }

    /// The attempt's counter says `recorded` entries were written (read before the
    /// timeline): entries missing at the end of what was read fail it (`missing_evidence`).
    pub fn expect_last(&mut self, recorded: u64) {
        let read_upto = self.next.saturating_sub(1);
        if read_upto < recorded && !self.gap_reported {
            self.gap_reported = true;
            self.push(Reason::at(
                &Rule::MissingEvidence,
                read_upto + 1,
                format!(
                    "missing evidence: {recorded} entries were recorded but only {read_upto} could be read"
                ),
            ));
        }
    }

    /// How many calls and agent-side events were judged.
    pub fn counts(&self) -> (u64, u64) {
        (self.calls, self.events)
    }

    fn sequence(&mut self, seq: u64) {
        if seq != self.next && !self.gap_reported {
            self.gap_reported = true;
            self.push(Reason::at(
                &Rule::MissingEvidence,
                seq,
                format!(
                    "missing evidence: expected sequence {}, found {seq} (sequences must be 1..n without gaps or repeats)",
                    self.next
                ),
            ));
        }
        self.next = self.next.max(seq.saturating_add(1));
    }

    /// Whether `seq` rolled out of the store (judged already: [`Judge::roll_over`]).
    fn rolled_out(&self, seq: u64) -> bool {
        seq <= self.attempt.rolled_through()
    }

    /// One agent-side event, in sequence order.
    pub fn event(&mut self, e: &AgentEvent) {
        if self.rolled_out(e.sequence) {
            return;
        }
        self.events += 1;
        self.sequence(e.sequence);
    }

    /// One tool call, in sequence order.
    pub fn call(&mut self, e: &ToolEvent) {
        if self.rolled_out(e.sequence) {
            return;
        }
        self.calls += 1;
        self.sequence(e.sequence);
        let seq = e.sequence;
        match &e.result_status {
            ResultStatus::HarnessError => {
                let field = |k: &str| {
                    e.error
                        .as_ref()
                        .and_then(|v| v.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string()
                };
                let code = field("code");
                let rule = match code.as_str() {
                    "lease_expired" => Rule::LeaseExpired,
                    "attempt_ended" => Rule::AttemptEnded,
                    "store_error" => Rule::StoreFailure,
                    _ => Rule::HarnessError,
                };
                self.push(Reason::at(
                    &rule,
                    seq,
                    format!("harness error at sequence {seq}: {code}: {}", field("message")),
                ));
            }
            ResultStatus::Unknown(status) => self.push(Reason::at(
                &Rule::UnknownStatus,
                seq,
                format!(
                    "unknown result_status `{status}` at sequence {seq}: the outcome of that call is unknown"
                ),
            )),
            _ if self.after_end(e) => self.push(Reason::at(
                &Rule::AttemptEnded,
                seq,
                format!(
                    "call at sequence {seq} ({}) was recorded after the attempt ended at {}",
                    e.timestamp,
                    self.attempt.ended_at.as_deref().unwrap_or("")
                ),
            )),
            _ => {
                if let Some(Ok(exp)) = &self.expires {
                    match parse_time(&e.timestamp) {
                        Some(t) if t > *exp => self.push(Reason::at(
                            &Rule::LeaseExpired,
                            seq,
                            format!(
                                "call at sequence {seq} ({}) arrived after the lease expired at {}",
                                e.timestamp,
                                self.attempt.expires_at.as_deref().unwrap_or("")
                            ),
                        )),
                        Some(_) => {}
                        None => self.push(Reason::at(
                            &Rule::LeaseExpired,
                            seq,
                            format!(
                                "lease check inconclusive: timestamp `{}` of sequence {seq} is not an RFC 3339 time",
                                e.timestamp
                            ),
                        )),
                    }
                }
            }
        }
        if let Some(key) = e.idempotency_key_ref.as_deref() {
            if e.is_write && matches!(e.result_status, ResultStatus::Ok | ResultStatus::Forwarded) {
                if let Some(first) = self.applied.get(key) {
                    self.push(Reason::at(
                        &Rule::DuplicateSideEffect,
                        seq,
                        format!(
                            "duplicate side effect: sequences {first} and {seq} are both applied writes with idempotency_key_ref {key}"
                        ),
                    ));
                } else {
                    self.applied.insert(key.to_string(), seq);
                }
            }
        }
    }

    /// A call stamped after the attempt's end (another process of a fleet that had not yet
    /// seen the end answered it): it counts as a late call, whatever its status.
    fn after_end(&self, e: &ToolEvent) -> bool {
        match (&self.ended, parse_time(&e.timestamp)) {
            (Some(end), Some(t)) => t > *end,
            _ => false,
        }
    }

    /// The verdict, after every call and event: the attempt's own marks (store failures,
    /// interruption, calls outside it, cleanup, nothing happened), then every check of a
    /// blocking contract that did not pass.
    pub fn finish(mut self, contracts: &[ContractResult]) -> Verdict {
        let a = self.attempt;
        // What rolled out of the store came first in the timeline: its findings lead.
        if let Some(r) = &a.rolled_over {
            let carried = r.findings.iter().map(|(code, f)| Reason {
                code: code.clone(),
                message: format!(
                    "{code}: {} finding(s) in the {} entries (sequences 1..={}) that rolled out of the store at the default attempt's retention bound; the first: {}",
                    f.count,
                    r.calls + r.events,
                    r.through,
                    f.first_message
                ),
                sequence: f.first_sequence,
            });
            self.reasons.splice(0..0, carried);
        }
        // First: a forgotten token explains every contract reason after it (the tools look
        // "never called" because their calls went elsewhere), so the fix is said once, here.
        if a.outside_calls > 0 {
            let seen = a
                .outside
                .iter()
                .map(|o| o.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            self.reasons.push(Reason::new(
                &Rule::OutsideAttempt,
                format!(
                    "outside attempt: {} call(s) reached the default attempt during the run instead of this one: they carried no token of this attempt (no `Understudy-Attempt` header, a base URL without `/~<token>`, or proxy credentials dropped). Fix: call the attempt's base URL `$UNDERSTUDY_URL_<INTEGRATION>` (it carries the token), or send the header `Understudy-Attempt: $UNDERSTUDY_ATTEMPT` with every call to `$UNDERSTUDY_URL/<integration>`, or keep the credentials of `HTTPS_PROXY`; the other reasons below may only be this{}",
                    a.outside_calls,
                    if seen.is_empty() { String::new() } else { format!(". Calls: {seen}") }
                ),
            ));
        }
        for (code, n) in std::mem::take(&mut self.over) {
            self.reasons.push(Reason {
                message: format!(
                    "{code}: {n} more reason(s) of this code in the timeline, not listed (the first {MAX_REASONS_PER_CODE} are)"
                ),
                code,
                sequence: None,
            });
        }
        if a.store_failures > 0 {
            self.reasons.push(Reason::new(
                &Rule::StoreFailure,
                format!(
                    "store failures: {} call(s) of this attempt were answered 500 `store_error`: their evidence is missing or unconfirmed",
                    a.store_failures
                ),
            ));
        }
        if a.interrupted {
            self.reasons.push(Reason::new(
                &Rule::Interrupted,
                "interrupted: the process serving this attempt died (or could not record a store failure) before its evidence was made durable; calls answered after the last flush may be missing, so the attempt cannot pass",
            ));
        }
        if let Some(cleanup) = &a.cleanup {
            let status = cleanup.get("status").and_then(Value::as_str);
            let remaining = cleanup.get("remaining_state_keys");
            if status != Some("verified") || remaining.and_then(Value::as_u64) != Some(0) {
                self.reasons.push(Reason::new(
                    &Rule::CleanupNotVerified,
                    format!(
                        "cleanup not verified: status {}, remaining_state_keys {}",
                        status.map_or_else(|| "missing".to_string(), |s| format!("`{s}`")),
                        remaining.map_or_else(|| "missing".to_string(), Value::to_string)
                    ),
                ));
            }
        }
        let rolled = a.rolled_over.as_ref().map_or(0, |r| r.calls + r.events);
        if self.calls == 0 && self.events == 0 && rolled == 0 && a.expect_calls {
            self.reasons.push(Reason::new(
                &Rule::NoCalls,
                "no calls: the attempt saw no tool call and no agent-side event, so nothing was judged (create it with \"expect_calls\": false, or run `understudy test --allow-no-calls`, when that is the point)",
            ));
        }
        self.reasons.extend(contract_reasons(contracts));
        Verdict {
            reasons: self.reasons,
        }
    }

    /// The summary that replaces the judged entries when they roll out of the store
    /// (through sequence `through`; call [`Judge::expect_last`] with it first): the
    /// attempt's earlier summary plus what this pass found, counted per code with the
    /// first reason of each. The attempt's own marks (store failures, calls outside it,
    /// cleanup) stay in its record and are not part of it.
    pub fn roll_over(self, through: u64) -> RolledOver {
        let mut out = self.attempt.rolled_over.clone().unwrap_or_default();
        out.through = through.max(out.through);
        out.rolls += 1;
        out.calls += self.calls;
        out.events += self.events;
        let mut seen = std::collections::BTreeSet::new();
        for r in &self.reasons {
            if !seen.insert(r.code.as_str()) {
                continue; // the first reason of each code stands for all of them
            }
            let found = match self.per_code.get(&r.code) {
                Some(n) => *n,
                None => self.reasons.iter().filter(|x| x.code == r.code).count() as u64,
            };
            out.findings
                .entry(r.code.clone())
                .and_modify(|f| f.count = f.count.saturating_add(found))
                .or_insert_with(|| RolledFinding {
                    count: found,
                    first_sequence: r.sequence,
                    first_message: r.message.clone(),
                });
        }
        out
    }
}

/// One reason per check that did not pass, for every blocking contract that is not
/// `passed` (`contract:<id>:<check>`); advisory contracts contribute nothing.
pub fn contract_reasons(results: &[ContractResult]) -> Vec<Reason> {
    let mut out = Vec::new();
    for r in results {
        if r.risk != Risk::Blocking || r.status == Status::Passed {
            continue;
        }
        let mut any = false;
        for c in r.checks.iter().filter(|c| c.status != Status::Passed) {
            any = true;
            out.push(Reason::new(
                &Rule::Contract {
                    id: r.contract_id.clone(),
                    check: c.id.clone(),
                },
                format!(
                    "contract {}: {} — {}: {} ({})",
                    r.contract_id, r.status, c.id, c.evidence, c.status
                ),
            ));
        }
        if !any {
            out.push(Reason::new(
                &Rule::Contract {
                    id: r.contract_id.clone(),
                    check: "contract".into(),
                },
                format!("contract {}: {} — no check ran", r.contract_id, r.status),
            ));
        }
    }
    out
}

/// The answer of a verification (`POST …/verify`, `understudy verify --format json`):
/// `{"attempt_id","contract_results","passed","verdict","verdict_reasons"}`. `verdict` is the
/// attempt's own (its pinned contracts included); the reasons of `results` (contracts given
/// to this verification) are added. `passed` is `false` whenever the verdict fails, whatever
/// the contracts say. Returns whether it passed, and the answer.
pub fn verification(
    attempt_id: &str,
    results: &[ContractResult],
    verdict: &Verdict,
) -> (bool, Value) {
    let mut reasons = verdict.reasons.clone();
    for r in contract_reasons(results) {
        if !reasons.contains(&r) {
            reasons.push(r);
        }
    }
    let v = Verdict { reasons };
    let answer = serde_json::json!({
        "attempt_id": attempt_id,
        "contract_results": results,
        "passed": v.passed(),
        "verdict": v.word(),
        "verdict_reasons": v.reasons,
    });
    (v.passed(), answer)
}

/// The verdict of an attempt from its calls and events in any order (sorted here, calls
/// before events of one sequence), and its contract results: [`Judge`] in one call.
pub fn judge(
    attempt: &AttemptRecord,
    calls: &[ToolEvent],
    events: &[AgentEvent],
    contracts: &[ContractResult],
) -> Verdict {
    let mut c: Vec<&ToolEvent> = calls.iter().collect();
    c.sort_by_key(|e| e.sequence);
    let mut ev: Vec<&AgentEvent> = events.iter().collect();
    ev.sort_by_key(|e| e.sequence);
    let mut j = Judge::new(attempt);
    let (mut ci, mut ei) = (0, 0);
    while ci < c.len() || ei < ev.len() {
        let take_call = match (c.get(ci), ev.get(ei)) {
            (Some(a), Some(b)) => a.sequence <= b.sequence,
            (Some(_), None) => true,
            _ => false,
        };
        if take_call {
            j.call(c[ci]);
            ci += 1;
        } else {
            j.event(ev[ei]);
            ei += 1;
        }
    }
    j.finish(contracts)
}

fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(s).ok()
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
